// headscope — patching experiments as the frontends run them (pipeline.h, docs/circuits.md): the
// prompt pairs from wherever they come, the sweep or path patch, its timing, JSON and CSV.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "pipeline/timed.h"

namespace headscope {
namespace {

nlohmann::json heads_json(const std::vector<HeadRef>& heads) {
  nlohmann::json a = nlohmann::json::array();
  for (const HeadRef& h : heads) a.push_back({h.layer, h.head});
  return a;
}

std::string heads_text(const std::vector<HeadRef>& heads) {
  std::string s;
  for (const HeadRef& h : heads) s += (s.empty() ? "" : " ") + std::to_string(h.layer) + "." + std::to_string(h.head);
  return s;
}

}  // namespace

PromptPairs load_prompt_pairs(const Model& model, const PairSource& s) {
  const bool one = !s.clean.empty() || !s.corrupt.empty();
  const int given = int(one) + int(!s.pairs_json.empty()) + int(!s.task.empty());
  if (given != 1)
    throw Error(
        "give the prompt pairs one way: a clean and a corrupted prompt, a pairs file, or a task (ioi, "
        "induction, greater_than)");
  PromptPairs pairs;
  if (one) {
    if (s.clean.empty() || s.corrupt.empty()) throw Error("give both prompts: the clean one and the corrupted one");
    if (model.config().causal && (s.answer.empty() || s.wrong.empty()))
      throw Error("give the answer token and the wrong one (e.g. \" Mary\" and \" John\"): the metric compares them");
    pairs.task = "custom";
    pairs.pairs.push_back({s.clean, s.corrupt, s.answer, s.wrong, ""});
    check_pairs(model, pairs);
  } else if (!s.pairs_json.empty()) {
    pairs = prompt_pairs_from_json(s.pairs_json, s.pairs_name);
    check_pairs(model, pairs);
  } else if (s.task == "ioi") {
    pairs = make_ioi_pairs(model, s.n, s.seed);
  } else if (s.task == "induction") {
    pairs = make_induction_pairs(model, s.n, s.length, s.seed);
  } else if (s.task == "greater_than") {
    pairs = make_greater_than_pairs(model, s.n, s.seed);
  } else {
    throw Error("unknown task \"" + s.task + "\" (one of: ioi, induction, greater_than)");
  }
  return pairs;
}

// The document's model and pairs, before any result.
static PatchExperiment experiment_of(const Model& model, const PromptPairs& pairs) {
  PatchExperiment x;
  x.model = model.config();
  x.task = pairs.task;
  x.seed = pairs.seed;
  return x;
}

PatchExperiment run_patch_sweep(const Model& model, PromptPairs& pairs, const PatchRequest& request) {
  PatchExperiment x = experiment_of(model, pairs);
  x.seconds = timed([&] { x.sweep = patch_sweep(model, pairs, request); });
  return x;
}

PatchExperiment run_path_patch(const Model& model, PromptPairs& pairs, const PathPatchRequest& request) {
  PatchExperiment x = experiment_of(model, pairs);
  x.seconds = timed([&] { x.path = path_patch(model, pairs, request); });
  return x;
}

namespace {
// Ranks 1..n, ties sharing their mean rank.
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * double(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}
double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = double(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i] / n, mb += b[i] / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : std::nan("");
}
// The indices of the k largest |x − origin|, largest first.
std::vector<size_t> top_by_size(const std::vector<double>& x, double origin, size_t k) {
  std::vector<size_t> order(x.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return std::fabs(x[a] - origin) > std::fabs(x[b] - origin); });
  order.resize(std::min(k, order.size()));
  return order;
}
}  // namespace

PatchAgreement patch_agreement(const PatchReport& exact, const PatchReport& estimate) {
  if (exact.effects.size() != estimate.effects.size())
    throw Error("patch agreement: the two sweeps patched different sites");
  PatchAgreement a;
  a.sites = int64_t(exact.effects.size());
  std::vector<double> x, y;
  for (size_t i = 0; i < exact.effects.size(); ++i)
    x.push_back(exact.effects[i].value), y.push_back(estimate.effects[i].value);
  const std::vector<double> rx = ranks_of(x), ry = ranks_of(y);
  a.spearman = pearson(rx, ry);
  a.pearson = pearson(x, y);
  const double origin = exact.direction == PatchDirection::kDenoise ? exact.corrupt : exact.clean;
  const std::vector<size_t> tx = top_by_size(x, origin, 10), ty = top_by_size(y, origin, 10);
  for (size_t i : tx) a.top10_shared += std::count(ty.begin(), ty.end(), i) > 0;
  std::vector<double> gap(x.size());
  for (size_t i = 0; i < x.size(); ++i) gap[i] = std::fabs(rx[i] - ry[i]);
  a.misranked = top_by_size(gap, 0.0, 10);
  return a;
}

PatchExperiment run_attribution_patch(const Model& model, PromptPairs& pairs, const AttributionRequest& request,
                                      bool exact) {
  PatchExperiment x = experiment_of(model, pairs);
  x.attribution_seconds = timed([&] { x.attribution = attribution_patch(model, pairs, request); });
  if (exact) {
    PatchRequest r;
    r.sweeps = request.sweeps;
    r.direction = request.direction;
    r.metric = request.metric;
    r.layers = request.layers;
    x.seconds = timed([&] { x.sweep = patch_sweep(model, pairs, r); });
    x.agreement = patch_agreement(*x.sweep, x.attribution->sites);
  } else {
    x.seconds = x.attribution_seconds;
  }
  return x;
}

PatchExperiment run_head_set_patch(const Model& model, PromptPairs& pairs, const std::vector<HeadRef>& heads,
                                   PatchDirection direction, PatchMetric metric) {
  PatchExperiment x = experiment_of(model, pairs);
  x.set_metric = metric;
  x.set_direction = direction;
  x.seconds = timed([&] { x.set = patch_heads_together(model, pairs, heads, direction, metric); });
  return x;
}

std::string patch_parts_to_bytes(const PatchParts& parts) {
  nlohmann::json sites = nlohmann::json::array();
  for (const PatchEffect& e : parts.sites)
    sites.push_back({patch_sweep_name(e.sweep), e.layer, e.head, e.position, e.group});
  const nlohmann::json j = {{"schema", "headscope.patch_parts/1"},
                            {"metric", patch_metric_name(parts.metric)},
                            {"direction", patch_direction_name(parts.direction)},
                            {"n_tokens", parts.n_tokens},
                            {"passes", parts.passes},
                            {"sites", std::move(sites)},
                            {"clean", parts.clean},
                            {"corrupt", parts.corrupt},
                            {"values", parts.values}};
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
  return {cbor.begin(), cbor.end()};
}

PatchParts patch_parts_from_bytes(std::string_view bytes) {
  try {
    const nlohmann::json j = nlohmann::json::from_cbor(bytes.begin(), bytes.end());
    if (j.at("schema") != "headscope.patch_parts/1") throw Error("not headscope.patch_parts/1");
    PatchParts parts;
    parts.metric = patch_metric_from_name(j.at("metric").get<std::string>());
    parts.direction = patch_direction_from_name(j.at("direction").get<std::string>());
    parts.n_tokens = j.at("n_tokens").get<int64_t>();
    parts.passes = j.at("passes").get<int64_t>();
    for (const nlohmann::json& s : j.at("sites")) {
      PatchEffect e;
      e.sweep = patch_sweep_from_name(s.at(0).get<std::string>());
      e.layer = s.at(1).get<int>(), e.head = s.at(2).get<int>(), e.position = s.at(3).get<int64_t>();
      e.group = s.at(4).get<std::vector<int>>();
      parts.sites.push_back(std::move(e));
    }
    parts.clean = j.at("clean").get<std::vector<double>>();
    parts.corrupt = j.at("corrupt").get<std::vector<double>>();
    parts.values = j.at("values").get<std::vector<double>>();
    if (parts.corrupt.size() != parts.clean.size() || parts.values.size() != parts.clean.size() * parts.sites.size())
      throw Error("its sizes disagree");
    return parts;
  } catch (const std::exception& e) {
    throw Error(std::string("patching parts: these bytes are not a shard's parts (") + e.what() + ")");
  }
}

PatchExperiment patch_experiment_from_parts(const ModelConfig& model, const std::string& task, uint64_t seed,
                                            const PatchParts& parts, Seconds seconds) {
  PatchExperiment x;
  x.model = model;
  x.task = task;
  x.seed = seed;
  x.sweep = patch_report(parts);
  x.seconds = seconds;
  return x;
}

std::string patch_csv(const PatchExperiment& x) {
  std::string csv;
  char line[256];
  if (x.sweep || x.attribution) {
    // Exact and estimated values side by side when both ran.
    const PatchReport& r = x.sweep ? *x.sweep : x.attribution->sites;
    const bool both = x.sweep && x.attribution;
    csv = x.sweep ? "site,layer,head,position,value,normalised" : "site,layer,head,position,estimate,normalised";
    csv += both ? ",estimate,estimate_normalised\n" : "\n";
    for (size_t i = 0; i < r.effects.size(); ++i) {
      const PatchEffect& e = r.effects[i];
      std::snprintf(line, sizeof line, "%s,%d,%s,%s,%.9g,%.9g", patch_sweep_name(e.sweep), e.layer,
                    e.head >= 0 ? std::to_string(e.head).c_str() : "",
                    e.position >= 0 ? std::to_string(e.position).c_str() : "", e.value, e.normalised);
      csv += line;
      if (both) {
        const PatchEffect& a = x.attribution->sites.effects[i];
        std::snprintf(line, sizeof line, ",%.9g,%.9g", a.value, a.normalised);
        csv += line;
      }
      csv += "\n";
    }
  } else if (x.set) {
    std::snprintf(line, sizeof line, "%s,%.9g,%.9g\n", heads_text(x.set->heads).c_str(), x.set->value,
                  x.set->normalised);
    csv = std::string("heads,value,normalised\n") + line;
  } else if (x.path) {
    csv = "receivers,input,value,normalised\n";
    for (const PathEffect& e : x.path->effects) {
      std::snprintf(line, sizeof line, "%s,%s,%.9g,%.9g\n",
                    e.receivers.empty() ? "logits" : heads_text(e.receivers).c_str(),
                    path_input_name(x.path->request.input), e.value, e.normalised);
      csv += line;
    }
  }
  return csv;
}

void to_json(nlohmann::json& j, const PatchEffect& e) {
  j = {{"site", patch_sweep_name(e.sweep)},
       {"layer", e.layer},
       {"head", e.head >= 0 ? nlohmann::json(e.head) : nlohmann::json(nullptr)},
       {"position", e.position >= 0 ? nlohmann::json(e.position) : nlohmann::json(nullptr)},
       {"value", json_number(e.value)},
       {"normalised", json_number(e.normalised)}};
  if (e.sweep == PatchSweep::kKey || e.sweep == PatchSweep::kValue) j["group"] = e.group;
}

void to_json(nlohmann::json& j, const EdgeEffect& e) {
  j = {{"sender", {e.sender.layer, e.sender.head}},
       {"receiver", e.input == PathPatchRequest::Input::kLogits ? nlohmann::json(nullptr)
                                                                : nlohmann::json({e.receiver.layer, e.receiver.head})},
       {"input", path_input_name(e.input)},
       {"value", json_number(e.value)},
       {"normalised", json_number(e.normalised)}};
}

void to_json(nlohmann::json& j, const PatchExperiment& x) {
  j = {{"schema", "headscope.patch/1"}, {"model", x.model}, {"task", x.task}, {"seed", x.seed}, {"seconds", x.seconds}};
  j["method"] = x.attribution ? (x.sweep ? "both" : "attribution") : "exact";
  if (x.attribution) {
    const AttributionReport& a = *x.attribution;
    j["attribution"] = {{"results", a.sites.effects},
                        {"clean", json_number(a.sites.clean)},
                        {"corrupt", json_number(a.sites.corrupt)},
                        {"edges", a.edges},
                        {"forward_passes", a.forward_passes},
                        {"backward_passes", a.backward_passes},
                        {"seconds", x.attribution_seconds}};
    if (x.agreement) {
      const PatchAgreement& g = *x.agreement;
      nlohmann::json mis = nlohmann::json::array();
      for (size_t i : g.misranked) mis.push_back(x.sweep->effects[i]);
      j["agreement"] = {{"spearman", json_number(g.spearman)},
                        {"pearson", json_number(g.pearson)},
                        {"top10_shared", g.top10_shared},
                        {"sites", g.sites},
                        {"misranked", mis}};
    }
  }
  if (x.sweep || x.attribution) {
    const PatchReport& r = x.sweep ? *x.sweep : x.attribution->sites;
    j["n_pairs"] = r.n_pairs;
    j["n_tokens"] = r.n_tokens;
    j["metric"] = patch_metric_name(r.metric);
    j["direction"] = patch_direction_name(r.direction);
    j["clean"] = json_number(r.clean);
    j["corrupt"] = json_number(r.corrupt);
    j["results"] = r.effects;
    j["passes"] = r.passes;
  } else if (x.set) {
    const HeadSetEffect& r = *x.set;
    j["n_pairs"] = r.n_pairs;
    j["metric"] = patch_metric_name(x.set_metric);
    j["direction"] = patch_direction_name(x.set_direction);
    j["clean"] = json_number(r.clean);
    j["corrupt"] = json_number(r.corrupt);
    j["set"] = {
        {"heads", heads_json(r.heads)}, {"value", json_number(r.value)}, {"normalised", json_number(r.normalised)}};
  } else if (x.path) {
    const PathPatchReport& r = *x.path;
    j["n_pairs"] = r.n_pairs;
    j["metric"] = patch_metric_name(r.request.metric);
    j["direction"] = patch_direction_name(r.request.direction);
    j["clean"] = json_number(r.clean);
    j["corrupt"] = json_number(r.corrupt);
    nlohmann::json results = nlohmann::json::array();
    for (const PathEffect& e : r.effects)
      results.push_back({{"receivers", heads_json(e.receivers)},
                         {"value", json_number(e.value)},
                         {"normalised", json_number(e.normalised)}});
    j["path"] = {{"senders", heads_json(r.request.senders)},
                 {"receivers", heads_json(r.request.receivers)},
                 {"input", path_input_name(r.request.input)},
                 {"results", results}};
    if (!r.effects.empty()) {
      j["path"]["value"] = json_number(r.effects[0].value);
      j["path"]["normalised"] = json_number(r.effects[0].normalised);
    }
  }
}

}  // namespace headscope
