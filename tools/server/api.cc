// headscope server — request parsing, core calls and reply formatting (see api.h, docs/api.md).
#include "server/api.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "analysis/roles.h"
#include "headscope/error.h"

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
  // from building a million nested values.
  const json::parser_callback_t depth_limit = [](int depth, json::parse_event_t, json&) {
    if (depth > limits::kMaxRequestJsonDepth)
      throw RequestError{400, "bad_json", "request body nests deeper than " +
                                              std::to_string(limits::kMaxRequestJsonDepth) + " levels; send a flat object"};
    return true;
  };
  try {
    j = json::parse(body, depth_limit);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for numbers such as 1e999 that no double holds.
    throw RequestError{400, "bad_json", std::string("request body is not valid JSON: ") + e.what()};
  }
  if (!j.is_object()) throw RequestError{400, "bad_request", "request body must be a JSON object, e.g. {\"text\": \"...\"}"};
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
  if (!j[key].is_boolean()) throw RequestError{400, "bad_field", std::string("field \"") + key + "\" must be true or false"};
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

const char* level_name(Level level) { return level == Level::kToken ? "token" : "word"; }

std::string hex_colour(uint32_t rgb) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%06x", rgb & 0xFFFFFFu);
  return buf;
}

// NaN (a statistic with no sample) becomes JSON null.
json number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json stats_json(const analysis::HeadStats& s) {
  json offsets = json::array();
  for (double m : s.offset_mass) offsets.push_back(number(m));
  return {
      {"n_queries", s.n_queries},
      {"entropy_bits", number(s.entropy_bits)},
      {"entropy_norm", number(s.entropy_norm)},
      {"sparsity", number(s.sparsity)},
      {"keys_90", number(s.keys_90)},
      {"keys_90_share", number(s.keys_90_share)},
      {"max_attention", number(s.max_attention)},
      {"avg_attention", number(s.avg_attention)},
      {"uniform_overlap", number(s.uniform_overlap)},
      {"mean_distance", number(s.mean_distance)},
      {"mean_offset", number(s.mean_offset)},
      {"self_mass", number(s.self_mass)},
      {"prev_mass", number(s.prev_mass)},
      {"next_mass", number(s.next_mass)},
      {"local_mass", number(s.local_mass)},
      {"offset_mass", offsets},
      {"first_mass", number(s.first_mass)},
      {"special_mass", number(s.special_mass)},
      {"end_special_mass", number(s.end_special_mass)},
      {"sink_mass", number(s.sink_mass)},
      {"punct_mass", number(s.punct_mass)},
      {"content_mass", number(s.content_mass)},
      {"duplicate_mass", number(s.duplicate_mass)},
      {"n_duplicate_queries", s.n_duplicate_queries},
  };
}

json role_score_json(const analysis::RoleScore& r) {
  const analysis::RoleInfo& info = analysis::role_info(r.role);
  return {{"id", info.id}, {"name", info.name}, {"score", number(r.score)}, {"detail", r.detail}, {"evidence", r.evidence}};
}

json roles_json(const analysis::HeadRoles& roles) {
  json scores = json::array();
  for (const analysis::RoleScore& r : roles.scores) scores.push_back(role_score_json(r));
  return {{"primary", role_score_json(roles.primary)},
          {"secondary", role_score_json(roles.secondary)},
          {"confidence", number(roles.confidence)},
          {"margin", number(roles.margin)},
          {"scores", scores}};
}

// {"shape": [...], "dtype": "float32", "data": base64}: a small tensor inside a JSON reply.
json typed_array(std::span<const float> values, std::vector<int64_t> shape) {
  return {{"shape", std::move(shape)}, {"dtype", "float32"}, {"data", base64_floats(values)}};
}

json tokens_json(const Encoding& encoding) {
  json tokens = json::array();
  for (const Token& t : encoding.tokens)
    tokens.push_back({{"id", t.id}, {"text", t.text}, {"begin", t.begin}, {"end", t.end}, {"special", t.special}, {"word", t.word}});
  return tokens;
}

// The word units of words.h, labelled with the original text they cover (specials: their token).
json units_json(const RunRecord& run) {
  const analysis::WordMap& map = run.words;
  std::vector<std::vector<int>> members(static_cast<size_t>(map.n_units));
  for (size_t t = 0; t < map.unit_of_token.size(); ++t)
    if (map.unit_of_token[t] >= 0) members[static_cast<size_t>(map.unit_of_token[t])].push_back(static_cast<int>(t));
  json units = json::array();
  for (int u = 0; u < map.n_units; ++u) {
    const auto& toks = members[static_cast<size_t>(u)];
    std::string label;
    bool special = false;
    if (!toks.empty()) {
      const Token& first = run.encoding.tokens[static_cast<size_t>(toks.front())];
      const Token& last = run.encoding.tokens[static_cast<size_t>(toks.back())];
      special = first.special;
      label = special || last.end <= first.begin
                  ? first.text
                  : run.text.substr(static_cast<size_t>(first.begin), static_cast<size_t>(last.end - first.begin));
    }
    units.push_back({{"text", label}, {"tokens", toks}, {"special", special}});
  }
  return units;
}

std::vector<int> kv_head_map(const ModelConfig& c) {
  // Grouped-query attention shares each key/value head among n_head / n_kv_head consecutive
  // query heads (the repeat_kv convention of Hugging Face); without GQA this is the identity.
  const int kv = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  const int group = kv > 0 ? std::max(1, c.n_head / kv) : 1;
  std::vector<int> map(static_cast<size_t>(c.n_head));
  for (int h = 0; h < c.n_head; ++h) map[static_cast<size_t>(h)] = h / group;
  return map;
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
    return {500, "application/json", R"({"error":{"status":500,"code":"internal_error","message":"out of memory"}})", {}};
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
    return error(413, "too_large", e.what());
  } catch (const Error& e) {
    // The core refused the input (e.g. a text its tokenizer cannot take).
    return error(422, "rejected_by_model", e.what());
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

TextRequest parse_text_request(const json& j, const ApiLimits& limits, const Model& model) {
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
  const int max_tokens = limits.max_tokens;
  if (!r.truncate && max_tokens > 0) {
    EncodeOptions count_only;  // no length limit: only to report how long the text is
    const size_t n = model.tokenizer().encode(r.text, count_only).size();
    if (n > static_cast<size_t>(max_tokens))
      throw RequestError{413, "text_too_long",
                         "text is " + std::to_string(n) + " tokens; at most " + std::to_string(max_tokens) +
                             " are allowed (serve --max-tokens, up to the model's limit): shorten it or send "
                             "\"truncate\": true"};
  }
  return r;
}

}  // namespace

HttpReply Api::model_info() const {
  const ModelConfig& c = model_.config();
  json roles = json::array();
  for (const analysis::RoleInfo& r : analysis::role_catalogue())
    roles.push_back({{"id", r.id},
                     {"name", r.name},
                     {"description", r.description},
                     {"typical_function", r.typical_function},
                     {"literature", r.literature},
                     {"color", hex_colour(r.color)}});
  json j = {
      {"name", c.name},
      {"architecture", c.architecture},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_kv_head", c.n_kv_head},
      {"d_model", c.d_model},
      {"d_head", c.d_head},
      {"d_ff", c.d_ff},
      {"vocab_size", c.vocab_size},
      {"max_positions", c.max_positions},
      {"causal", c.causal},
      {"kv_head_of", kv_head_map(c)},
      {"w_o_shape", {c.d_model, c.n_head * c.d_head}},
      {"limits", {{"max_text_bytes", limits_.max_text_bytes}, {"max_tokens", limits_.max_tokens}}},
      {"statistics",
       {{"sparsity_fraction", analysis::kSparsityFraction},
        {"cover_mass", analysis::kCoverMass},
        {"local_window", analysis::kLocalWindow},
        {"max_offset", analysis::kMaxOffset},
        {"min_role_score", analysis::kMinRoleScore}}},
      {"roles", roles},
  };
  return json_reply(j);
}

HttpReply Api::run(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "level", "special"});
    TextRequest req = parse_text_request(j, limits_, model_);
    req.hide_special = optional_enum(j, "special", {"keep", "hide"}) == "hide";
    const auto ticket = admit();
    const auto record = cache_.get(req.text, req.truncate);
    const ModelConfig& c = model_.config();
    const LevelAnalysis& a = record->analysis(req.level, req.hide_special);
    json heads = json::array();
    for (int l = 0; l < c.n_layer; ++l)
      for (int h = 0; h < c.n_head; ++h) {
        const size_t i = static_cast<size_t>(l * c.n_head + h);
        heads.push_back({{"layer", l}, {"head", h}, {"stats", stats_json(a.stats[i])}, {"roles", roles_json(a.roles[i])}});
      }
    json out = {
        {"text", record->text},
        {"truncated", record->encoding.truncated},
        {"level", level_name(req.level)},
        {"special", req.hide_special ? "hide" : "keep"},
        {"n_tokens", record->T()},
        {"n_units", a.units.T()},
        {"tokens", tokens_json(record->encoding)},
        {"words", units_json(*record)},
        {"heads", heads},
    };
    return json_reply(out);
  });
}

HttpReply Api::attention(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "level", "layer", "head", "dtype"});
    AttentionRequest req;
    req.text = parse_text_request(j, limits_, model_);
    const ModelConfig& c = model_.config();
    req.layer = optional_int(j, "layer");
    req.head = optional_int(j, "head");
    if (req.layer) check_index(*req.layer, c.n_layer, "layer", "layers");
    if (req.head) check_index(*req.head, c.n_head, "head", "heads per layer");
    req.dtype = optional_enum(j, "dtype", {"float32", "uint8"}) == "uint8" ? WireDtype::kUint8 : WireDtype::kFloat32;

    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate);
    const Tensor& att = record->attention(req.text.level);  // [n_layer, n_head, U, U]
    const int64_t U = att.dim(2), block = U * U;
    const int l0 = req.layer.value_or(0), nl = req.layer ? 1 : c.n_layer;
    const int h0 = req.head.value_or(0), nh = req.head ? 1 : c.n_head;
    std::vector<float> values;
    values.reserve(static_cast<size_t>(nl * nh * block));
    for (int l = l0; l < l0 + nl; ++l)
      for (int h = h0; h < h0 + nh; ++h) {
        const float* src = att.ptr() + (static_cast<int64_t>(l) * c.n_head + h) * block;
        values.insert(values.end(), src, src + block);
      }
    return HttpReply{200, "application/octet-stream", encode_tensor(values, {nl, nh, U, U}, req.dtype), {}};
  });
}

HttpReply Api::decompose(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "truncate", "layer", "token"});
    DecomposeRequest req;
    req.text = parse_text_request(j, limits_, model_);
    const ModelConfig& c = model_.config();
    const auto layer = optional_int(j, "layer");
    const auto token = optional_int(j, "token");
    if (!layer) throw RequestError{400, "missing_field", "field \"layer\" is required"};
    if (!token) throw RequestError{400, "missing_field", "field \"token\" is required"};
    req.layer = check_index(*layer, c.n_layer, "layer", "layers");
    const auto ticket = admit();
    const auto record = cache_.get(req.text.text, req.text.truncate);
    req.token = check_index(*token, record->T(), "token", "tokens in this text");

    const Capture& cap = record->capture;
    const int H = c.n_head, dh = c.d_head, D = c.d_model, T = record->T(), L = req.layer, t = req.token;
    const int concat_dim = H * dh;

    // head_outputs [n_layer, n_head, T, d_head] → this token's [n_head, d_head], which laid side
    // by side is the concatenation [n_head · d_head] that enters W_O.
    std::vector<float> concat(static_cast<size_t>(concat_dim));
    for (int h = 0; h < H; ++h) {
      const float* src = cap.head_outputs.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * dh;
      std::copy(src, src + dh, concat.begin() + static_cast<ptrdiff_t>(h) * dh);
    }
    // W_O [d_model, n_head · d_head] (nn.Linear: out × in) applied to the concatenation, in double
    // so that the check against the captured output measures the model, not this sum.
    const Tensor& W = model_.output_projection(L);
    W.expect_shape({D, concat_dim}, "output projection of layer " + std::to_string(L));
    const Tensor& bias_t = model_.output_bias(L);
    std::vector<float> bias(static_cast<size_t>(D), 0.0f);
    if (!bias_t.empty()) std::copy(bias_t.data.begin(), bias_t.data.end(), bias.begin());
    std::vector<float> projection(static_cast<size_t>(D));
    for (int o = 0; o < D; ++o) {
      double s = 0;
      const float* row = W.ptr() + static_cast<int64_t>(o) * concat_dim;
      for (int k = 0; k < concat_dim; ++k) s += static_cast<double>(row[k]) * concat[static_cast<size_t>(k)];
      projection[static_cast<size_t>(o)] = static_cast<float>(s);
    }
    // contributions [n_layer, n_head, T, d_model] → this token's [n_head, d_model] and their norms.
    std::vector<float> contributions(static_cast<size_t>(H) * D), norms(static_cast<size_t>(H)), out_norms(static_cast<size_t>(H));
    for (int h = 0; h < H; ++h) {
      const float* src = cap.contributions.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * D;
      std::copy(src, src + D, contributions.begin() + static_cast<ptrdiff_t>(h) * D);
      double n2 = 0, o2 = 0;
      for (int k = 0; k < D; ++k) n2 += static_cast<double>(src[k]) * src[k];
      for (int k = 0; k < dh; ++k) o2 += static_cast<double>(concat[static_cast<size_t>(h * dh + k)]) * concat[static_cast<size_t>(h * dh + k)];
      norms[static_cast<size_t>(h)] = static_cast<float>(std::sqrt(n2));
      out_norms[static_cast<size_t>(h)] = static_cast<float>(std::sqrt(o2));
    }
    const float* out_ptr = cap.attn_output.ptr() + (static_cast<int64_t>(L) * T + t) * D;
    std::vector<float> attn_output(out_ptr, out_ptr + D);
    double sum_error = 0, projection_error = 0;
    for (int k = 0; k < D; ++k) {
      double s = bias[static_cast<size_t>(k)];
      for (int h = 0; h < H; ++h) s += contributions[static_cast<size_t>(h * D + k)];
      sum_error = std::max(sum_error, std::abs(s - attn_output[static_cast<size_t>(k)]));
      projection_error = std::max(projection_error, std::abs(static_cast<double>(projection[static_cast<size_t>(k)]) +
                                                             bias[static_cast<size_t>(k)] - attn_output[static_cast<size_t>(k)]));
    }
    // This token's attention row in every head of the layer: [n_head, T].
    std::vector<float> rows(static_cast<size_t>(H) * T);
    for (int h = 0; h < H; ++h) {
      const float* src = cap.attention.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * T;
      std::copy(src, src + T, rows.begin() + static_cast<ptrdiff_t>(h) * T);
    }
    json out = {
        {"layer", L},
        {"token", t},
        {"n_head", H},
        {"d_head", dh},
        {"d_model", D},
        {"w_o_shape", {D, concat_dim}},
        {"head_outputs", typed_array(concat, {H, dh})},
        {"head_output_norms", typed_array(out_norms, {H})},
        {"concat", typed_array(concat, {concat_dim})},
        {"projection", typed_array(projection, {D})},
        {"bias", typed_array(bias, {D})},
        {"contributions", typed_array(contributions, {H, D})},
        {"contribution_norms", typed_array(norms, {H})},
        {"attn_output", typed_array(attn_output, {D})},
        {"attention_rows", typed_array(rows, {H, T})},
        {"check", {{"sum_max_abs_error", sum_error}, {"projection_max_abs_error", projection_error}}},
    };
    return json_reply(out);
  });
}

HttpReply Api::generate(std::string_view body) {
  return guarded(body, [&](std::string_view b) {
    const json j = parse_object(b, {"text", "max_new_tokens"});
    const ModelConfig& c = model_.config();
    if (!c.causal)
      throw RequestError{400, "not_causal",
                         c.name + " is an encoder (" + c.architecture + "): only causal models (Llama, GPT-2, ...) generate text"};
    TextRequest req = parse_text_request(j, limits_, model_);
    const int max_new = optional_int(j, "max_new_tokens").value_or(16);
    if (max_new < 1 || max_new > limits_.max_new_tokens)
      throw RequestError{400, "bad_max_new_tokens",
                         "max_new_tokens must be between 1 and " + std::to_string(limits_.max_new_tokens)};
    const Encoding prompt = model_.encode(req.text);
    if (prompt.size() == 0) throw RequestError{400, "empty_text", "the text produced no tokens"};
    const int64_t T0 = static_cast<int64_t>(prompt.size());
    const int64_t limit = std::min<int64_t>(c.max_positions, limits_.max_tokens > 0 ? limits_.max_tokens : c.max_positions);
    const int64_t T_max = std::min<int64_t>(T0 + max_new, limit);
    // Greedy decoding through the KV cache, as `headscope generate`: the prompt once, then one
    // extend() per new token. Only the logits are needed here; the explorer shows the attention
    // of the whole text through /api/run, whose row t equals step t's row in a causal model.
    const CaptureOptions none = CaptureOptions::attention_only();
    const auto ticket = admit();
    const auto lock = cache_.exclusive_model();
    auto state = model_.start();
    std::vector<float> logits;
    model_.extend(*state, prompt.ids(), none, &logits);
    std::vector<int32_t> ids = prompt.ids();
    json generated = json::array();
    bool stopped_at_eos = false;
    while (static_cast<int64_t>(ids.size()) < T_max) {
      const auto best = std::max_element(logits.begin(), logits.end());
      const int32_t next = static_cast<int32_t>(best - logits.begin());
      ids.push_back(next);
      generated.push_back({{"position", ids.size() - 1}, {"id", next}, {"text", model_.tokenizer().token_text(next)}, {"logit", number(*best)}});
      if (next == c.eos_token_id) {
        stopped_at_eos = true;
        break;
      }
      if (static_cast<int64_t>(ids.size()) < T_max) model_.extend(*state, {next}, none, &logits);
    }
    // The continuation as text: what decoding gained over the prompt's own decoding.
    const std::string before = model_.tokenizer().decode(prompt.ids());
    const std::string after = model_.tokenizer().decode(ids);
    std::string continuation = after.compare(0, before.size(), before) == 0 ? after.substr(before.size()) : std::string();
    // Byte-level tokens can stop inside a multi-byte character (the first bytes of an emoji, say):
    // the reply holds those bytes back, so that text and continuation end at the last whole
    // character and stay valid UTF-8; held_back_bytes says how many were left out.
    const size_t held_back = incomplete_utf8_tail(continuation);
    continuation.resize(continuation.size() - held_back);
    const std::string text = req.text + continuation;
    // Whether the text encodes back to exactly these ids; if not, an analysis of `text` sees
    // different tokens than the ones generated (e.g. two pieces that merge when re-encoded, or a
    // held-back tail). A text that is still not UTF-8 (the model emitted a stray byte) is not
    // encoded: it cannot give back the ids, and the reply writes its bad bytes as U+FFFD.
    const bool same = held_back == 0 && is_valid_utf8(text) && model_.encode(text).ids() == ids;
    json out = {
        {"prompt", req.text},
        {"prompt_tokens", T0},
        {"ids", ids},
        {"generated", generated},
        {"continuation", continuation},
        {"text", text},
        {"held_back_bytes", held_back},
        {"retokenizes_same", same},
        {"stopped_at_eos", stopped_at_eos},
        {"stopped_at_limit", !stopped_at_eos && static_cast<int64_t>(ids.size()) - T0 < max_new},
    };
    return json_reply(out);
  });
}

}  // namespace headscope::server
