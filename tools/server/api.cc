// headscope server — request parsing, core calls and reply formatting (see api.h, docs/api.md).
#include "server/api.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "server/remedy.h"

namespace headscope::server {
namespace {

using json = nlohmann::json;

// A request the client got wrong: becomes a 4xx reply with a machine-readable code.
struct RequestError {
  int status;
  std::string code;
  std::string message;
};

// A heavy request that found no compute slot: 503 with Retry-After.
struct Busy {
  std::string message;
};

// Text for a JSON string: invalid UTF-8 becomes U+FFFD instead of making dump() throw.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_object(std::string_view body, std::initializer_list<std::string_view> allowed) {
  size_t bad = 0;
  if (!is_valid_utf8(body, &bad))
    throw RequestError{400, "invalid_utf8",
                       "request body is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) +
                           "); send the text encoded as UTF-8"};
  json j;
  // Requests are flat objects; refusing deep nesting while parsing keeps a body of a million '['
  // from building a million nested values. A key given twice in one object is refused too: the
  // parser would keep the last value and drop the first without a word.
  std::vector<std::set<std::string>> keys;  // of each object being parsed, innermost last
  const json::parser_callback_t check = [&keys](int depth, json::parse_event_t event, json& parsed) {
    if (depth > limits::kMaxRequestJsonDepth)
      throw RequestError{400, "bad_json",
                         "request body nests deeper than " + std::to_string(limits::kMaxRequestJsonDepth) +
                             " levels; send a flat object"};
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      throw RequestError{400, "duplicate_field",
                         "field \"" + parsed.get<std::string>() + "\" appears twice in one object; send it once"};
    return true;
  };
  try {
    j = json::parse(body, check);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers such as 1e999 that no double holds.
    throw RequestError{400, "bad_json", std::string("request body is not valid JSON: ") + e.what()};
  }
  if (!j.is_object())
    throw RequestError{400, "bad_request", "request body must be a JSON object, e.g. {\"text\": \"...\"}"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) throw RequestError{400, "unknown_field", "unknown field \"" + key + "\" (see docs/api.md)"};
  }
  return j;
}

std::string required_string(const json& j, const char* key) {
  if (!j.contains(key)) throw RequestError{400, "missing_field", std::string("field \"") + key + "\" is required"};
  if (!j[key].is_string()) throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be a string"};
  return j[key].get<std::string>();
}

std::optional<int> optional_int(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const json& v = j[key];
  if (!v.is_number_integer())
    throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be an integer"};
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX)
    throw RequestError{400, std::string("unknown_") + key, std::string(key) + " " + dump(v) + " is out of range"};
  return static_cast<int>(x);
}

bool optional_bool(const json& j, const char* key, bool fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be true or false"};
  return j[key].get<bool>();
}

std::string optional_enum(const json& j, const char* key, std::initializer_list<std::string_view> values) {
  std::string first(*values.begin());
  if (!j.contains(key) || j[key].is_null()) return first;
  std::string list;
  for (std::string_view v : values) list += (list.empty() ? "" : ", ") + std::string(v);
  if (j[key].is_string()) {
    const std::string s = j[key].get<std::string>();
    for (std::string_view v : values)
      if (s == v) return s;
  }
  throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be one of: " + list};
}

// Checks a layer / head / token index against its range; the code names what was unknown.
int check_index(int value, int count, const char* what, const char* plural) {
  if (value < 0 || value >= count)
    throw RequestError{400, std::string("unknown_") + what,
                       std::string(what) + " " + std::to_string(value) + " does not exist: there are " +
                           std::to_string(count) + " " + plural + " (0 to " + std::to_string(count - 1) + ")"};
  return value;
}

int required_int(const json& j, const char* key) {
  const auto v = optional_int(j, key);
  if (!v) throw RequestError{400, "missing_field", std::string("field \"") + key + "\" is required"};
  return *v;
}

WireDtype parse_dtype(const json& j) {
  return optional_enum(j, "dtype", {"float32", "uint8"}) == "uint8" ? WireDtype::kUint8 : WireDtype::kFloat32;
}

// A half-open range [lo, hi) of positions in a text of T tokens: inside it and not empty.
void check_range(int lo, int hi, int T, const char* what) {
  if (lo < 0 || hi > T || lo >= hi)
    throw RequestError{400, "bad_range",
                       std::string(what) + " " + std::to_string(lo) + ".." + std::to_string(hi) +
                           " is not a non-empty range inside the text's " + std::to_string(T) +
                           " tokens: send 0 <= start < end <= " + std::to_string(T) + " (end excluded)"};
}

// The full maps of a run whose maps were streamed are not kept: say where to read them instead.
void refuse_streamed(const RunRecord& run, const char* endpoint, const char* instead) {
  if (run.streamed)
    throw RequestError{422, "streamed",
                       std::string(endpoint) + ": this text's " + std::to_string(run.T()) +
                           " tokens were analysed with streamed attention maps, which are not kept whole; " + instead};
}

HttpReply json_reply(const json& j) { return {200, "application/json", dump(j), {}}; }

}  // namespace

Api::Api(const Model& model, RunCache& cache, ApiLimits limits)
    : model_(model),
      cache_(cache),
      limits_(limits),
      queue_(limits.compute_slots, limits.max_compute_waiters, limits.max_compute_wait) {}

HttpReply Api::error(int status, std::string_view code, std::string_view message) noexcept {
  try {
    json j = {{"error", {{"status", status}, {"code", code}, {"message", message}}}};
    return {status, "application/json", dump(j), {}};
  } catch (...) {
    // Only std::bad_alloc can get here; a fixed reply needs no allocation beyond its own.
  }
  try {
    return {
        500, "application/json", R"({"error":{"status":500,"code":"internal_error","message":"out of memory"}})", {}};
  } catch (...) {
    return {};
  }
}

template <typename Handler>
HttpReply Api::guarded(std::string_view body, Handler&& handler) {
  try {
    return handler(body);
  } catch (const RequestError& e) {
    return error(e.status, e.code, e.message);
  } catch (const Busy& e) {
    HttpReply reply = error(503, "busy", e.message);
    reply.headers.emplace_back("Retry-After", std::to_string(limits::kRetryAfterSeconds));
    return reply;
  } catch (const ResourceError& e) {
    // Well-formed, but over a budget or the machine's memory (estimated before allocating).
    return error(413, "too_large", error_message(e));
  } catch (const Error& e) {
    // The core refused the input (e.g. a text its tokenizer cannot take).
    return error(422, "rejected_by_model", error_message(e));
  } catch (const std::bad_alloc&) {
    return error(413, "too_large", "not enough memory for this request; try a shorter text");
  } catch (const json::exception& e) {
    return error(400, "bad_request", std::string("the request could not be read: ") + e.what());
  } catch (const std::exception& e) {
    return error(500, "internal_error", std::string("internal error (the server keeps running): ") + e.what());
  } catch (...) {
    return error(500, "internal_error", "internal error (the server keeps running)");
  }
}

std::optional<ComputeQueue::Ticket> Api::admit() {
  auto ticket = queue_.enter();
  if (!ticket)
    throw Busy{"the server is busy with other analyses (" + std::to_string(queue_.busy()) + " running, " +
               std::to_string(queue_.waiting()) + " waiting); retry in a few seconds"};
  return ticket;
}

HttpReply Api::health() const {
  const json j = {{"ok", true},
                  {"runs_computed", cache_.runs_computed()},
                  {"busy", queue_.busy()},
                  {"waiting", queue_.waiting()},
                  {"turned_away", queue_.turned_away()}};
  return json_reply(j);
}

namespace {

// Reads the text fields and encodes the text once; that encoding goes on to the run (or the
// generation), so a request is tokenised once.
// `reuse_cached`: a text whose run is cached is not encoded again (its limits were checked when it
// was run); the handler then reads the run from the cache (8,192 tokens take ~30 ms to encode).
TextRequest parse_text_request(const json& j, const ApiLimits& limits, const Model& model, RunCache& cache,
                               bool reuse_cached = true) {
  TextRequest r;
  r.text = required_string(j, "text");
  r.truncate = optional_bool(j, "truncate", false);
  r.level = optional_enum(j, "level", {"token", "word"}) == "word" ? Level::kWord : Level::kToken;
  if (r.text.size() > limits.max_text_bytes)
    throw RequestError{413, "text_too_long",
                       "text is " + std::to_string(r.text.size()) + " bytes; the limit is " +
                           std::to_string(limits.max_text_bytes) + " bytes"};
  if (r.text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw RequestError{400, "empty_text", "text is empty; send at least one word"};
  if (reuse_cached && cache.cached(r.text, r.truncate)) return r;
  const int max_tokens = limits.max_tokens;
  if (!r.truncate && max_tokens > 0) {
    // No length limit here, so that the reply can say how long the text is; within the limit this
    // is the encoding the run uses.
    r.encoding = model.tokenizer().encode(r.text, EncodeOptions{});
    const size_t n = r.encoding.size();
    if (n > static_cast<size_t>(max_tokens))
      throw RequestError{413, "text_too_long",
                         "text is " + std::to_string(n) + " tokens; at most " + std::to_string(max_tokens) +
                             " are allowed (serve --max-tokens, up to the model's limit): shorten it or send "
                             "\"truncate\": true"};
  } else {
    r.encoding = cache.encode(r.text, r.truncate);
  }
  return r;
}

}  // namespace

// The core's description of the model, with what this server adds: its limits and the corpus
// evidence it joined into the roles.
HttpReply Api::model_info() const {
  json j = describe_model(model_);
  j["limits"] = {{"max_text_bytes", limits_.max_text_bytes}, {"max_tokens", limits_.max_tokens}};
  j["corpus_evidence"] = {{"source", corpus_source_}, {"syntax", corpus_syntax_}, {"coreference", corpus_coreference_}};
  return json_reply(j);
}

HttpReply Api::run(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "level", "special"});
    TextRequest req = parse_text_request(j, limits_, model_, cache_);
    req.hide_special = optional_enum(j, "special", {"keep", "hide"}) == "hide";
    const auto ticket = admit();
    const auto record = cache_.get(req.text, req.truncate, std::move(req.encoding));
    return json_reply(run_document(model_.config(), *record, req.level, req.hide_special, /*with_views=*/true));
  });
}

std::shared_ptr<const Tensor> Api::rollout_of(const std::shared_ptr<const RunRecord>& run) {
  std::lock_guard lock(rollout_mutex_);
  if (rollout_ && rollout_run_.lock() == run) return rollout_;
  rollout_ = std::make_shared<const Tensor>(attention_rollout(*run));  // [n_layer, T, T]
  rollout_run_ = run;
  return rollout_;
}

HttpReply Api::attention(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "level", "layer", "head", "dtype", "view"});
    AttentionRequest req;
    req.text = parse_text_request(j, limits_, model_, cache_);
    const ModelConfig& c = model_.config();
    req.layer = optional_int(j, "layer");
    req.head = optional_int(j, "head");
    if (req.layer) check_index(*req.layer, c.n_layer, "layer", "layers");
    if (req.head) check_index(*req.head, c.n_head, "head", "heads per layer");
    req.dtype = parse_dtype(j);
    const std::string view = optional_enum(j, "view", {"weights", "norm", "rollout"});
    req.view = view == "norm"      ? AttentionView::kNorm
               : view == "rollout" ? AttentionView::kRollout
                                   : AttentionView::kWeights;
    if (req.view == AttentionView::kRollout && req.head)
      throw RequestError{400, "bad_field",
                         "the rollout view has one map per layer (every head mixed), not per head: leave out \"head\""};

    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate, std::move(req.text.encoding));
    if (record->streamed && req.view == AttentionView::kWeights)
      refuse_streamed(*record, "/api/attention",
                      "read the pooled maps from /api/overview and exact weights of any region from /api/tile");
    if (const auto why = view_unavailable(*record, req.view))
      throw RequestError{record->streamed ? 422 : 413, record->streamed ? "streamed" : "too_long_for_view",
                         "/api/attention: " + *why};
    const std::shared_ptr<const Tensor> rollout = req.view == AttentionView::kRollout ? rollout_of(record) : nullptr;
    const Tensor part = attention_view(c, *record, req.view, req.text.level, req.layer, req.head, rollout.get());
    return HttpReply{
        200,
        "application/octet-stream",
        encode_tensor(std::span<const float>(part.ptr(), static_cast<size_t>(part.numel())), part.shape, req.dtype),
        {}};
  });
}

HttpReply Api::tile(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "layer", "head", "q0", "q1", "k0", "k1", "dtype", "view"});
    TileRequest req;
    req.text = parse_text_request(j, limits_, model_, cache_);
    const ModelConfig& c = model_.config();
    req.layer = check_index(required_int(j, "layer"), c.n_layer, "layer", "layers");
    req.head = check_index(required_int(j, "head"), c.n_head, "head", "heads per layer");
    req.q0 = required_int(j, "q0"), req.q1 = required_int(j, "q1");
    req.k0 = required_int(j, "k0"), req.k1 = required_int(j, "k1");
    req.dtype = parse_dtype(j);
    // Rollout has no tile: it multiplies every layer's whole maps.
    req.norm_weighted = optional_enum(j, "view", {"weights", "norm"}) == "norm";
    // The size is known before the text is run: a tile over the budget is refused at once.
    const int64_t cells = int64_t{req.q1 - req.q0} * int64_t{req.k1 - req.k0};
    if (req.q1 > req.q0 && req.k1 > req.k0 && cells > limits::kMaxTileCells)
      throw RequestError{413, "tile_too_large",
                         "a tile of " + std::to_string(req.q1 - req.q0) + " x " + std::to_string(req.k1 - req.k0) +
                             " = " + std::to_string(cells) + " weights is over the limit of " +
                             std::to_string(limits::kMaxTileCells) + "; ask for a smaller region"};
    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate, std::move(req.text.encoding));
    check_range(req.q0, req.q1, record->T(), "query rows");
    check_range(req.k0, req.k1, record->T(), "keys");
    const Tensor t =
        attention_tile(model_, *record, req.layer, req.head, req.q0, req.q1, req.k0, req.k1, req.norm_weighted);
    const std::span<const float> values(t.ptr(), static_cast<size_t>(t.numel()));
    return HttpReply{
        200, "application/octet-stream", encode_tensor(values, {req.q1 - req.q0, req.k1 - req.k0}, req.dtype), {}};
  });
}

HttpReply Api::overview(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "layer", "head", "part"});
    OverviewRequest req;
    req.text = parse_text_request(j, limits_, model_, cache_);
    const ModelConfig& c = model_.config();
    req.layer = check_index(required_int(j, "layer"), c.n_layer, "layer", "layers");
    req.head = optional_int(j, "head");
    if (req.head) check_index(*req.head, c.n_head, "head", "heads per layer");
    const std::string part = optional_enum(j, "part", {"maps", "received", "offsets"});
    req.part = part == "received"  ? OverviewPart::kReceived
               : part == "offsets" ? OverviewPart::kOffsets
                                   : OverviewPart::kMaps;
    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate, std::move(req.text.encoding));
    if (record->overviews.size() != static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.n_head))
      throw RequestError{422, "no_overview", "/api/overview: this run kept no overview maps"};
    const OverviewSlice slice = overview_slice(c, *record, req.layer, req.head, req.part);
    return HttpReply{
        200, "application/octet-stream", encode_tensor(slice.values, slice.shape, WireDtype::kFloat32), {}};
  });
}

HttpReply Api::decompose(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "layer", "token"});
    DecomposeRequest req;
    req.text = parse_text_request(j, limits_, model_, cache_);
    const ModelConfig& c = model_.config();
    const auto layer = optional_int(j, "layer");
    const auto token = optional_int(j, "token");
    if (!layer) throw RequestError{400, "missing_field", "field \"layer\" is required"};
    if (!token) throw RequestError{400, "missing_field", "field \"token\" is required"};
    req.layer = check_index(*layer, c.n_layer, "layer", "layers");
    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate, std::move(req.text.encoding));
    refuse_streamed(*record, "/api/decompose",
                    "the W_O decomposition needs the dense capture: send a shorter text (the explorer's maps "
                    "stay dense up to a few thousand tokens)");
    req.token = check_index(*token, record->T(), "token", "tokens in this text");
    return json_reply(headscope::decompose(model_, record->capture, req.layer, req.token));
  });
}

HttpReply Api::link(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "q", "k", "limit"});
    TextRequest req = parse_text_request(j, limits_, model_, cache_);
    const int q = required_int(j, "q"), k = required_int(j, "k");
    const int n_heads = model_.config().n_layer * model_.config().n_head;
    const int limit = optional_int(j, "limit").value_or(n_heads);
    if (limit < 1) throw RequestError{400, "bad_field", "field \"limit\" must be at least 1"};
    const auto ticket = admit();
    const auto record = cache_.get(req.text, req.truncate, std::move(req.encoding));
    check_index(q, record->T(), "token", "tokens in this text");
    check_index(k, record->T(), "token", "tokens in this text");
    return json_reply(link_search(model_, *record, q, k, limit));
  });
}

HttpReply Api::generate(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "max_new_tokens"});
    const ModelConfig& c = model_.config();
    if (!c.causal)
      throw RequestError{
          400, "not_causal",
          c.name + " is an encoder (" + c.architecture + "): only causal models (Llama, GPT-2, ...) generate text"};
    TextRequest req = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);  // the prompt
    const int max_new = optional_int(j, "max_new_tokens").value_or(16);
    if (max_new < 1 || max_new > limits_.max_new_tokens)
      throw RequestError{400, "bad_max_new_tokens",
                         "max_new_tokens must be between 1 and " + std::to_string(limits_.max_new_tokens)};
    if (req.encoding.size() == 0) throw RequestError{400, "empty_text", "the text produced no tokens"};
    GenerateOptions options;
    options.max_new_tokens = max_new;
    options.max_length = limits_.max_tokens > 0 ? limits_.max_tokens : c.max_positions;
    // Only the logits are needed here; the explorer shows the attention of the whole text through
    // /api/run, whose row t equals step t's row in a causal model.
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    Generation g = headscope::generate(model_, req.encoding, options);
    return json_reply(describe_generation(model_, req.text, req.encoding, std::move(g)));
  });
}

namespace {

// The token budget of an ablation request, checked on the encoding before any pass is run.
// `why` says in the reader's words what makes a longer text too much work; `instead`, what else to do.
void check_ablation_tokens(const Encoding& encoding, int64_t max, const std::string& why, const std::string& instead) {
  const auto T = static_cast<int64_t>(encoding.size());
  if (T > max)
    throw RequestError{413, "text_too_long",
                       "the text is " + std::to_string(T) + " tokens; at most " + std::to_string(max) +
                           " are allowed (" + why + "): shorten it to " + std::to_string(max) + " tokens" + instead};
}

// `key`: [[layer, head], ...], 0-based, at least one, none twice ("heads" of /api/ablate, "senders"
// and "receivers" of /api/patch).
std::vector<HeadRef> parse_head_list(const json& j, const ModelConfig& c, const std::string& key = "heads") {
  if (!j.contains(key)) throw RequestError{400, "missing_field", "field \"" + key + "\" is required, e.g. [[3, 1]]"};
  const json& list = j[key];
  if (!list.is_array() || list.empty())
    throw RequestError{400, "bad_field",
                       "field \"" + key + "\" must be a non-empty list of [layer, head] pairs, e.g. [[3, 1]]"};
  std::vector<HeadRef> heads;
  for (const json& item : list) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_number_integer() || !item[1].is_number_integer())
      throw RequestError{400, "bad_field", key + ": " + dump(item) + " is not a [layer, head] pair of integers"};
    const int64_t l = item[0].get<int64_t>(), h = item[1].get<int64_t>();
    if (l < 0 || l >= c.n_layer || h < 0 || h >= c.n_head)
      throw RequestError{400, "unknown_head",
                         key + ": " + dump(item) + " is not a head of " + c.name + " (layers 0.." +
                             std::to_string(c.n_layer - 1) + ", heads 0.." + std::to_string(c.n_head - 1) +
                             ", counted from 0)"};
    const HeadRef ref{static_cast<int>(l), static_cast<int>(h)};
    if (std::find(heads.begin(), heads.end(), ref) != heads.end())
      throw RequestError{400, "bad_field", key + ": " + dump(item) + " is named twice"};
    heads.push_back(ref);
  }
  return heads;
}

}  // namespace

const std::vector<std::string>& ablation_reference_sentences() {
  static const std::vector<std::string> sentences = {
      "The trophy would not fit in the brown suitcase because it was too big.",
      "She opened the window and the cold air filled the room.",
      "After the meeting, the engineers went back to their desks.",
      "A small dog was barking at the postman across the street.",
      "The river rose quickly during the night, flooding the lower fields.",
      "He said that the report would be ready by Friday morning.",
      "Children in the village learn to swim before they can read.",
      "The old library closed its doors for the last time in June.",
  };
  return sentences;
}

static std::string ablation_reference_name() {
  return "the server's " + std::to_string(ablation_reference_sentences().size()) + " reference sentences";
}

HttpReply Api::ablate(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "heads", "mode"});
    AblateRequest req;
    req.text = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);
    req.heads = parse_head_list(j, model_.config());
    req.mode = parse_ablation_mode(optional_enum(j, "mode", {"zero", "mean", "resample"}));
    check_ablation_tokens(req.text.encoding, limits::kMaxAblateTokens,
                          "an ablation reruns the text from the first ablated layer", "");
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    return json_reply(ablate_text(model_, req.text.encoding, req.heads, req.mode, ablation_reference_sentences(),
                                  ablation_reference_name()));
  });
}

std::optional<std::string> Api::cached_importance(const std::string& key) {
  const std::lock_guard<std::mutex> guard(importance_mutex_);
  for (auto it = importance_cache_.begin(); it != importance_cache_.end(); ++it)
    if (it->first == key) {
      importance_cache_.splice(importance_cache_.begin(), importance_cache_, it);
      return it->second;
    }
  return std::nullopt;
}

void Api::remember_importance(const std::string& key, std::string reply) {
  const std::lock_guard<std::mutex> guard(importance_mutex_);
  importance_cache_.emplace_front(key, std::move(reply));
  while (importance_cache_.size() > limits::kImportanceCacheTexts) importance_cache_.pop_back();
}

HttpReply Api::importance(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate"});
    const ModelConfig& c = model_.config();
    TextRequest req = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);
    const int64_t n_heads = int64_t{c.n_layer} * c.n_head;
    check_ablation_tokens(
        req.encoding, limits::kMaxImportanceTokenPasses / n_heads,
        "measuring importance reruns the text once for each of the model's " + std::to_string(n_heads) + " heads",
        ", or ablate single heads instead");
    const std::string key = std::string(req.truncate ? "1" : "0") + req.text;
    if (const std::optional<std::string> cached = cached_importance(key)) {
      json out = json::parse(*cached);
      out["cached"] = true;
      return json_reply(out);
    }
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    json out = measure_importance(Ablator(model_, {req.encoding}, AblateOptions{}));
    remember_importance(key, dump(out));
    out["cached"] = false;
    return json_reply(out);
  });
}

// ---- circuits: /api/patch, /api/logit_lens, /api/head_lens, /api/tokenize ----

namespace {

// A text field of /api/patch: a string, within the byte limit; prompts (not answers) not empty.
std::string patch_text(const json& j, const std::string& key, const ApiLimits& limits, bool prompt,
                       const std::string& where = "") {
  if (!j.contains(key)) throw RequestError{400, "missing_field", where + "field \"" + key + "\" is required"};
  if (!j[key].is_string()) throw RequestError{400, "bad_field", where + "field \"" + key + "\" must be a string"};
  std::string text = j[key].get<std::string>();
  if (text.size() > limits.max_text_bytes)
    throw RequestError{413, "text_too_long",
                       where + "\"" + key + "\" is " + std::to_string(text.size()) + " bytes; the limit is " +
                           std::to_string(limits.max_text_bytes) + " bytes"};
  if (prompt && text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw RequestError{400, "empty_text", where + "\"" + key + "\" is empty; write a prompt"};
  return text;
}

// The core's refusal of a prompt pair (different token counts, an answer of several tokens) is the
// request's fault here: 400, with the core's message, which says what to change.
template <class F>
auto refused_as_400(const char* code, F&& f) {
  try {
    return f();
  } catch (const ResourceError&) {
    throw;
  } catch (const Error& e) {
    throw RequestError{400, code, error_message(e)};
  }
}

// "pairs": [{clean, corrupt, answer, wrong}, ...] (answers: decoders only), checked by the core.
PromptPairs parse_pair_list(const json& j, const Model& model, const ApiLimits& limits) {
  const json& list = j["pairs"];
  if (!list.is_array() || list.empty() || list.size() > size_t{limits::kMaxPatchPairs})
    throw RequestError{400, "bad_field",
                       "field \"pairs\" must be a list of 1 to " + std::to_string(limits::kMaxPatchPairs) +
                           " objects {\"clean\", \"corrupt\", \"answer\", \"wrong\"}"};
  const bool causal = model.config().causal;
  PromptPairs pairs;
  pairs.task = "custom";
  for (size_t i = 0; i < list.size(); ++i) {
    const json& p = list[i];
    const std::string where = "pairs[" + std::to_string(i) + "]: ";
    if (!p.is_object()) throw RequestError{400, "bad_field", where + "must be an object"};
    for (const auto& [key, value] : p.items())
      if (key != "clean" && key != "corrupt" && key != "answer" && key != "wrong")
        throw RequestError{400, "unknown_field", where + "unknown field \"" + key + "\" (see docs/api.md)"};
    PromptPair pair;
    pair.clean = patch_text(p, "clean", limits, true, where);
    pair.corrupt = patch_text(p, "corrupt", limits, true, where);
    if (causal || p.contains("answer")) pair.answer = patch_text(p, "answer", limits, false, where);
    if (causal || p.contains("wrong")) pair.wrong = patch_text(p, "wrong", limits, false, where);
    pairs.pairs.push_back(std::move(pair));
  }
  refused_as_400("bad_pair", [&] { check_pairs(model, pairs); });
  return pairs;
}

// The prompt pairs of /api/patch, given exactly one way: one pair, a list, or a task.
PromptPairs parse_patch_pairs(const json& j, const Model& model, const ApiLimits& limits) {
  const bool one = j.contains("clean") || j.contains("corrupt");
  if (int(one) + int(j.contains("pairs")) + int(j.contains("task")) != 1)
    throw RequestError{400, "bad_field",
                       "give the prompt pairs one way: \"clean\" and \"corrupt\" (with \"answer\" and \"wrong\" on a "
                       "decoder), a \"pairs\" list, or a \"task\" (ioi, induction, greater_than)"};
  if (j.contains("pairs")) return parse_pair_list(j, model, limits);
  PairSource source;
  if (one) {
    source.clean = patch_text(j, "clean", limits, true);
    source.corrupt = patch_text(j, "corrupt", limits, true);
    if (model.config().causal) {
      source.answer = patch_text(j, "answer", limits, false);
      source.wrong = patch_text(j, "wrong", limits, false);
    }
  } else {
    source.task = optional_enum(j, "task", {"ioi", "induction", "greater_than"});
    source.n = optional_int(j, "n").value_or(8);
    if (source.n < 1 || source.n > limits::kMaxPatchPairs)
      throw RequestError{
          400, "bad_field",
          "field \"n\" (pairs the task draws) must be between 1 and " + std::to_string(limits::kMaxPatchPairs)};
    source.length = optional_int(j, "length").value_or(source.length);
    const int seed = optional_int(j, "seed").value_or(0);
    if (seed < 0) throw RequestError{400, "bad_field", "field \"seed\" must be 0 or more"};
    source.seed = uint64_t(seed);
  }
  return refused_as_400("bad_pair", [&] { return load_prompt_pairs(model, source); });
}

// A name the core knows ("sites", "direction", "metric", "input"), else 400 with the core's list.
template <class E>
E parse_name(const json& j, const char* key, E fallback, E (*from_name)(const std::string&)) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be a string"};
  return refused_as_400("bad_field", [&] { return from_name(j[key].get<std::string>()); });
}

PatchMetric parse_metric(const json& j, const ModelConfig& c) {
  return parse_name(j, "metric", c.causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine, patch_metric_from_name);
}

// A sweep: "sites" (default ["head"]), "direction" (default denoise), "metric", "layers".
headscope::PatchRequest parse_sweep(const json& j, const ModelConfig& c) {
  for (const char* key : {"receivers", "input"})
    if (j.contains(key))
      throw RequestError{400, "bad_field",
                         std::string("field \"") + key + "\" belongs to path patching, which needs \"senders\""};
  headscope::PatchRequest r;
  if (j.contains("sites")) {
    const json& sites = j["sites"];
    if (!sites.is_array() || sites.empty())
      throw RequestError{400, "bad_field", "field \"sites\" must be a non-empty list, e.g. [\"head\"]"};
    r.sweeps.clear();
    for (const json& s : sites) {
      const PatchSweep sweep = parse_name(json{{"sites", s}}, "sites", PatchSweep::kHead, patch_sweep_from_name);
      if (std::find(r.sweeps.begin(), r.sweeps.end(), sweep) != r.sweeps.end())
        throw RequestError{400, "bad_field", "sites: \"" + std::string(patch_sweep_name(sweep)) + "\" is named twice"};
      r.sweeps.push_back(sweep);
    }
  }
  r.direction = parse_name(j, "direction", PatchDirection::kDenoise, patch_direction_from_name);
  r.metric = parse_metric(j, c);
  if (j.contains("layers")) {
    const json& layers = j["layers"];
    if (!layers.is_array() || layers.empty())
      throw RequestError{400, "bad_field", "field \"layers\" must be a non-empty list of layer numbers, e.g. [0, 5]"};
    for (const json& l : layers) {
      if (!l.is_number_integer()) throw RequestError{400, "bad_field", "layers: " + dump(l) + " is not an integer"};
      const int64_t v = l.get<int64_t>();
      if (v < 0 || v >= c.n_layer)
        throw RequestError{400, "unknown_layer",
                           "layers: " + dump(l) + " does not exist: there are " + std::to_string(c.n_layer) +
                               " layers (0 to " + std::to_string(c.n_layer - 1) + ")"};
      const int layer = static_cast<int>(v);
      if (std::find(r.layers.begin(), r.layers.end(), layer) != r.layers.end())
        throw RequestError{400, "bad_field", "layers: " + std::to_string(layer) + " is named twice"};
      r.layers.push_back(layer);
    }
  }
  return r;
}

// Path patching: "senders", "receivers" (default: every later head alone), "input" (default q),
// "direction" (default noise), "metric".
PathPatchRequest parse_path(const json& j, const ModelConfig& c) {
  for (const char* key : {"sites", "layers"})
    if (j.contains(key))
      throw RequestError{400, "bad_field",
                         std::string("field \"") + key +
                             "\" belongs to a sweep; path patching takes \"senders\", "
                             "\"receivers\" and \"input\""};
  PathPatchRequest r;
  r.senders = parse_head_list(j, c, "senders");
  if (j.contains("receivers")) r.receivers = parse_head_list(j, c, "receivers");
  r.input = parse_name(j, "input", PathPatchRequest::Input::kQuery, path_input_from_name);
  r.direction = parse_name(j, "direction", PatchDirection::kNoise, patch_direction_from_name);
  r.metric = parse_metric(j, c);
  return r;
}

// The work budget: what the experiment would run, refused before it runs.
void check_patch_cost(const PatchCost& cost, const PromptPairs& pairs) {
  if (cost.token_passes <= limits::kMaxPatchTokenPasses) return;
  const int64_t T = pairs.pairs.empty() ? 0 : pairs.pairs.front().n_tokens;
  throw RequestError{413, "too_much_work",
                     "this experiment would run " + std::to_string(cost.passes) + " resumed passes over " +
                         std::to_string(pairs.pairs.size()) + " pair(s) of " + std::to_string(T) + " tokens (" +
                         std::to_string(cost.token_passes) + " passes x tokens); this server runs at most " +
                         std::to_string(limits::kMaxPatchTokenPasses) +
                         " passes x tokens per request: patch fewer \"layers\", use fewer pairs or "
                         "shorter prompts, or patch whole heads (\"head\") instead of every position"};
}

// Heads patched together: "heads", "direction" (default denoise), "metric"; a sweep's and path
// patching's fields are refused.
struct HeadSetRequest {
  std::vector<HeadRef> heads;
  PatchDirection direction = PatchDirection::kDenoise;
  PatchMetric metric = PatchMetric::kLogitDiff;
};
HeadSetRequest parse_head_set(const json& j, const ModelConfig& c) {
  for (const char* key : {"sites", "layers", "senders", "receivers", "input"})
    if (j.contains(key))
      throw RequestError{400, "bad_field",
                         std::string("field \"") + key +
                             "\" does not go with \"heads\" (heads patched together take \"direction\" and "
                             "\"metric\" only)"};
  HeadSetRequest r;
  r.heads = parse_head_list(j, c, "heads");
  r.direction = parse_name(j, "direction", PatchDirection::kDenoise, patch_direction_from_name);
  r.metric = parse_metric(j, c);
  return r;
}

// "method": exact (default), attribution (first-order estimates from one backward pass per pair,
// docs/gradients.md) or both; "edges" (attribution) adds every head-to-head edge.
struct SweepMethod {
  std::string method = "exact";
  bool edges = false;
};
SweepMethod parse_method(const json& j, bool sweep) {
  SweepMethod m;
  if (j.contains("method")) {
    if (!j["method"].is_string() || (j["method"] != "exact" && j["method"] != "attribution" && j["method"] != "both"))
      throw RequestError{400, "bad_field", "field \"method\" must be \"exact\", \"attribution\" or \"both\""};
    m.method = j["method"].get<std::string>();
  }
  m.edges = optional_bool(j, "edges", false);
  if ((m.method != "exact" || m.edges) && !sweep)
    throw RequestError{400, "bad_field",
                       "fields \"method\" and \"edges\" belong to a sweep (no \"heads\" or \"senders\")"};
  if (m.edges && m.method == "exact")
    throw RequestError{400, "bad_field", "field \"edges\" needs \"method\": \"attribution\" (or \"both\")"};
  return m;
}

PatchExperiment run_sweep(const Model& model, PromptPairs& pairs, const headscope::PatchRequest& r,
                          const SweepMethod& m) {
  if (m.method == "exact") return run_patch_sweep(model, pairs, r);
  AttributionRequest a;
  a.sweeps = r.sweeps, a.direction = r.direction, a.metric = r.metric, a.layers = r.layers, a.edges = m.edges;
  return refused_as_400("bad_field", [&] { return run_attribution_patch(model, pairs, a, m.method == "both"); });
}

}  // namespace

HttpReply Api::patch(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j =
        parse_object(b, {"clean", "corrupt", "answer", "wrong", "pairs", "task", "n", "seed", "length", "sites",
                         "direction", "metric", "layers", "senders", "receivers", "input", "heads", "method", "edges"});
    const ModelConfig& c = model_.config();
    std::optional<headscope::PatchRequest> sweep;
    std::optional<PathPatchRequest> path;
    std::optional<HeadSetRequest> set;
    if (j.contains("heads"))
      set = parse_head_set(j, c);
    else if (j.contains("senders"))
      path = parse_path(j, c);
    else
      sweep = parse_sweep(j, c);
    const auto ticket = admit();
    PromptPairs pairs = parse_patch_pairs(j, model_, limits_);
    for (const PromptPair& p : pairs.pairs)
      if (p.n_tokens > limits_.max_tokens)
        throw RequestError{413, "text_too_long",
                           "the prompt \"" + p.clean + "\" is " + std::to_string(p.n_tokens) + " tokens; at most " +
                               std::to_string(limits_.max_tokens) + " are allowed: shorten it"};
    const SweepMethod method = parse_method(j, sweep.has_value());
    if (!set && method.method != "attribution")  // heads together: one resumed pass per pair; attribution: 3
      check_patch_cost(
          refused_as_400(
              "bad_field",
              [&] { return sweep ? patch_sweep_cost(model_, pairs, *sweep) : path_patch_cost(model_, pairs, *path); }),
          pairs);
    const auto lock = cache_.exclusive_model();
    if (set) return json_reply(run_head_set_patch(model_, pairs, set->heads, set->direction, set->metric));
    return json_reply(sweep ? run_sweep(model_, pairs, *sweep, method) : run_path_patch(model_, pairs, *path));
  });
}

namespace {

// The fields both lenses share: "position" (default the last token), "top_k", "tokens" (each one
// token as it follows the text), checked against the text.
void parse_lens_fields(const json& j, const Encoding& encoding, int& position, int& top_k,
                       std::vector<std::string>& tokens) {
  const auto at = optional_int(j, "position");
  if (at) position = check_index(*at, int(encoding.size()), "token", "tokens in this text");
  top_k = optional_int(j, "top_k").value_or(top_k);
  if (top_k < 1 || top_k > limits::kMaxLensTopK)
    throw RequestError{400, "bad_field",
                       "field \"top_k\" must be between 1 and " + std::to_string(limits::kMaxLensTopK)};
  if (!j.contains("tokens")) return;
  const json& list = j["tokens"];
  if (!list.is_array() || list.size() > size_t{limits::kMaxLensTokens})
    throw RequestError{400, "bad_field",
                       "field \"tokens\" must be a list of at most " + std::to_string(limits::kMaxLensTokens) +
                           " strings, each one token as it follows the text (\" Paris\")"};
  for (const json& t : list) {
    if (!t.is_string()) throw RequestError{400, "bad_field", "tokens: " + dump(t) + " is not a string"};
    tokens.push_back(t.get<std::string>());
  }
}

void require_decoder(const ModelConfig& c, const char* what) {
  if (!c.causal)
    throw RequestError{400, "not_causal",
                       c.name + " is an encoder (" + c.architecture +
                           "): it predicts no next token, so there are no logits to read " + what +
                           " through; the logit lens needs a decoder (Llama, GPT-2, ...)"};
}

}  // namespace

HttpReply Api::logit_lens(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "position", "top_k", "tokens"});
    require_decoder(model_.config(), "its layers");
    TextRequest text = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);
    LensRequest lens;
    parse_lens_fields(j, text.encoding, lens.position, lens.top_k, lens.tokens);
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    return json_reply(refused_as_400(
        "bad_token", [&] { return logit_lens_text(model_, std::move(text.text), std::move(text.encoding), lens); }));
  });
}

HttpReply Api::head_lens(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "layer", "head", "position", "top_k", "tokens"});
    const ModelConfig& c = model_.config();
    require_decoder(c, "a head's output");
    HeadLensRequest lens;
    lens.layer = check_index(required_int(j, "layer"), c.n_layer, "layer", "layers");
    lens.head = check_index(required_int(j, "head"), c.n_head, "head", "heads per layer");
    TextRequest text = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);
    parse_lens_fields(j, text.encoding, lens.position, lens.top_k, lens.tokens);
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    return json_reply(refused_as_400(
        "bad_token", [&] { return head_lens_text(model_, std::move(text.text), std::move(text.encoding), lens); }));
  });
}

HttpReply Api::tokenize(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "special"});
    const std::string text = patch_text(j, "text", limits_, false);
    const bool special = optional_bool(j, "special", true);
    EncodeOptions options;
    options.add_special_tokens = special;
    const Encoding e = model_.tokenizer().encode(text, options);
    return json_reply({{"text", text}, {"special", special}, {"n_tokens", e.size()}, {"tokens", tokens_json(text, e)}});
  });
}

// ---- gradients: /api/saliency ----

// "text", "method" (integrated_gradients | grad_x_input), "metric", "answer" and "wrong" (decoders),
// "reference" (encoders), "steps", "rule", "baseline" (a token id; default zero embeddings),
// "keep_special". Its work: about three passes per point on the path, within the patching budget.
HttpReply Api::saliency(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "method", "metric", "answer", "wrong", "reference", "steps",
                                    "rule", "baseline", "keep_special"});
    const ModelConfig& c = model_.config();
    SaliencyRequest r;
    r.method = parse_name(j, "method", SaliencyMethod::kIntegratedGradients, saliency_method_from_name);
    r.metric = parse_metric(j, c);
    r.rule = parse_name(j, "rule", IntegrationRule::kGaussLegendre, integration_rule_from_name);
    for (auto [key, field] :
         {std::pair{"answer", &r.answer}, std::pair{"wrong", &r.wrong}, std::pair{"reference", &r.reference}})
      if (j.contains(key)) *field = patch_text(j, key, limits_, false);
    r.steps = optional_int(j, "steps").value_or(r.steps);
    if (r.steps < 1 || r.steps > 1000)
      throw RequestError{400, "bad_field", "field \"steps\" must be between 1 and 1000"};
    r.baseline_token = static_cast<int32_t>(optional_int(j, "baseline").value_or(-1));
    if (r.baseline_token < -1 || r.baseline_token >= c.vocab_size)
      throw RequestError{400, "bad_field",
                         "field \"baseline\" must be a token id (0 to " + std::to_string(c.vocab_size - 1) + ")"};
    r.keep_special = optional_bool(j, "keep_special", true);
    TextRequest text = parse_text_request(j, limits_, model_, cache_, /*reuse_cached=*/false);
    const int64_t T = int64_t(text.encoding.size());
    const int64_t passes = r.method == SaliencyMethod::kIntegratedGradients ? 3 * (r.steps + 2) : 3;
    if (passes * T > limits::kMaxPatchTokenPasses)
      throw RequestError{
          413, "too_much_work",
          "integrated gradients over " + std::to_string(r.steps) + " steps of a " + std::to_string(T) +
              "-token text is about " + std::to_string(passes * T) + " passes x tokens; this server runs at most " +
              std::to_string(limits::kMaxPatchTokenPasses) + " per request: use fewer steps or a shorter text"};
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    return json_reply(refused_as_400("bad_field", [&] { return run_saliency(model_, text.text, r); }));
  });
}

// ---- composition scores: /api/composition ----

namespace {

// An optional integer field in [lo, hi]; the message says what the field is for.
int bounded_int(const json& j, const char* key, int fallback, int lo, int hi, const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  const bool in_range = v.is_number_integer() && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range)
    throw RequestError{400, "bad_field",
                       std::string("field \"") + key + "\" must be an integer between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + " (" + what + ")"};
  return static_cast<int>(v.get<int64_t>());
}

// {"draws", "seed", "gains", "top"}, each optional (docs/api.md, POST /api/composition).
CompositionRequest parse_composition(const json& j) {
  CompositionRequest r;
  r.options.baseline_draws = bounded_int(j, "draws", r.options.baseline_draws, 2, limits::kMaxCompositionDraws,
                                         "random heads scored for the baseline");
  if (j.contains("seed") && !j["seed"].is_null()) {
    if (!j["seed"].is_number_unsigned())
      throw RequestError{400, "bad_field", "field \"seed\" must be a non-negative integer (the baseline's draws)"};
    r.options.seed = j["seed"].get<uint64_t>();
  }
  r.options.fold_gains = optional_bool(j, "gains", r.options.fold_gains);
  r.top = bounded_int(j, "top", r.top, 1, limits::kMaxCompositionTop, "highest pairs listed per kind");
  return r;
}

bool same_options(const CompositionOptions& a, const CompositionOptions& b) {
  return a.baseline_draws == b.baseline_draws && a.seed == b.seed && a.fold_gains == b.fold_gains;
}

}  // namespace

std::shared_ptr<const CompositionScores> Api::cached_composition(const CompositionOptions& options) {
  const std::lock_guard<std::mutex> guard(composition_mutex_);
  for (auto it = composition_cache_.begin(); it != composition_cache_.end(); ++it)
    if (same_options((*it)->options, options)) {
      composition_cache_.splice(composition_cache_.begin(), composition_cache_, it);
      return composition_cache_.front();
    }
  return nullptr;
}

std::shared_ptr<const CompositionScores> Api::composition_of(const CompositionOptions& options, bool& computed) {
  const std::lock_guard<std::mutex> computing(composition_compute_mutex_);
  computed = false;
  if (auto hit = cached_composition(options)) return hit;
  std::shared_ptr<const CompositionScores> scores;
  {
    // Every core, as a forward pass uses them: one at a time.
    const auto lock = cache_.exclusive_model();
    scores = std::make_shared<const CompositionScores>(composition_scores(model_, options));
  }
  computed = true;
  const std::lock_guard<std::mutex> guard(composition_mutex_);
  composition_cache_.push_front(scores);
  while (composition_cache_.size() > limits::kCompositionCacheSets) composition_cache_.pop_back();
  return scores;
}

// The scores of one option set, computed on the first request for it and kept; a kept set needs
// no compute slot. The reply is `headscope composition --json`'s document plus "cached".
HttpReply Api::composition(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const CompositionRequest req = parse_composition(parse_object(b, {"draws", "seed", "gains", "top"}));
    bool computed = false;
    std::shared_ptr<const CompositionScores> scores = cached_composition(req.options);
    if (!scores) {
      const auto ticket = admit();
      scores = composition_of(req.options, computed);
    }
    json out = composition_json(*scores, req.top);
    out["cached"] = !computed;
    return json_reply(out);
  });
}

// The head map: read from its cache beside the corpus evidence, or measured (a few seconds: the
// first kHeadMapTexts EWT sentences, then every pair of heads) on the first request, then kept.
HttpReply Api::head_map(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    if (!b.empty()) (void)parse_object(b, {});
    const std::lock_guard<std::mutex> guard(head_map_mutex_);
    bool computed = false;
    if (!head_map_reply_) {
      const auto ticket = admit();
      const auto lock = cache_.exclusive_model();
      analysis::HeadMap map;
      std::string source;
      if (head_map_options_) {
        EvidenceOptions options = *head_map_options_;
        options.measure = true;  // seconds, not the corpus evidence's minutes: measured on first use
        map = cached_head_map(model_, head_map_path_, options);
        source = "the first " + std::to_string(map.texts) + " sentences of UD EWT dev";
      } else {
        map = headscope::head_map(model_, ablation_reference_sentences());
        source = std::to_string(map.texts) + " reference sentences shipped with the server";
      }
      json j = head_map_json(map, model_.config());
      j["source"] = source;
      head_map_reply_ = std::make_shared<const std::string>(j.dump());
      computed = true;
    }
    json out = json::parse(*head_map_reply_);
    out["cached"] = !computed;
    return json_reply(out);
  });
}

}  // namespace headscope::server
