// headscope serve — the explorer: a local HTTP server with the web UI (web/dist, built by Vite
// during set-up) and the JSON/binary API of docs/api.md. Binds 127.0.0.1 unless told otherwise:
// it is a desktop tool, not a public service.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
#include "server/api.h"
#include "server/gate.h"
#include "server/http.h"
#include "server/run_cache.h"

#ifndef HEADSCOPE_WEB_DIST
#define HEADSCOPE_WEB_DIST "web/dist"
#endif

namespace headscope::cli {
namespace {

struct ServeOptions {
  std::vector<std::string> models = {"models/all-MiniLM-L6-v2"};  // --model, once per model side by side
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> allow_hosts;
  std::string web_dir = HEADSCOPE_WEB_DIST;
  int cache_runs = 4;
  int cache_mib = 2048;
  int max_body_kib = static_cast<int>(limits::kMaxRequestBodyBytes >> 10);
  int max_tokens = 0;  // 0: server::default_max_tokens
  LoadOptions load;
  EvidenceOptions evidence = [] {
    EvidenceOptions e;
    e.measure = false;  // --measure-corpus
    return e;
  }();
  bool no_corpus = false;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One run of max_tokens must fit in the cache's budget (the latest run is always kept), or a long
// text would take more memory than the user allowed: refused before loading anything more.
// Returns the budget in bytes.
uint64_t check_cache_budget(const Model& model, int max_tokens, int64_t cache_mib) {
  const ModelConfig& c = model.config();
  const uint64_t budget = static_cast<uint64_t>(cache_mib) << 20;
  const uint64_t need = server::run_bytes(model, max_tokens, budget);
  if (need > budget)
    throw ResourceError("--max-tokens " + std::to_string(max_tokens) + ": one run of that length on " + c.name +
                        " keeps " + std::to_string((need + (1 << 20) - 1) >> 20) + " MiB (" +
                        (server::streams_maps(model, max_tokens, budget)
                             ? std::string("streamed maps: queries, keys and overviews")
                             : std::string("dense maps: attention alone is 2 x n_layer x n_head x T^2 floats")) +
                        "), over --cache-mib " + std::to_string(cache_mib) + "; use --max-tokens " +
                        std::to_string(server::max_tokens_within(model, budget)) + " or raise --cache-mib");
  return budget;
}

// One model the server answers for: the model, its run cache and its API.
struct Served {
  std::unique_ptr<Model> model;
  std::unique_ptr<server::RunCache> cache;
  std::unique_ptr<server::Api> api;
};

// Loads `path` with its probe and corpus evidence; `cache_mib` is this model's share of --cache-mib.
std::unique_ptr<Served> serve_model(const ServeOptions& opt, const std::string& path, int cache_mib) {
  auto s = std::make_unique<Served>();
  auto t0 = std::chrono::steady_clock::now();
  s->model = load_model(path, opt.load);
  const Model& model = *s->model;
  const ModelConfig& c = model.config();
  std::fprintf(stderr, "headscope: loaded %s (%s, %d layers x %d heads, d_model %d) in %.1f s\n", c.name.c_str(),
               c.architecture.c_str(), c.n_layer, c.n_head, c.d_model, seconds_since(t0));
  server::ApiLimits limits;
  if (opt.max_tokens == 0) {
    limits.max_tokens = static_cast<int>(server::default_max_tokens(model, static_cast<uint64_t>(cache_mib) << 20));
    std::fprintf(
        stderr, "headscope: texts of up to %d tokens (%s; --max-tokens to change)\n", limits.max_tokens,
        limits.max_tokens >= c.max_positions ? "as long as the model reads" : "the longest whose run fits --cache-mib");
  } else {
    limits.max_tokens = c.max_positions > 0 ? std::min(opt.max_tokens, c.max_positions) : opt.max_tokens;
  }
  const uint64_t budget = check_cache_budget(model, limits.max_tokens, cache_mib);
  t0 = std::chrono::steady_clock::now();
  std::vector<analysis::ProbeEvidence> probe = headscope::probe(model);
  std::fprintf(stderr, "headscope: induction probe over %zu heads in %.1f s\n", probe.size(), seconds_since(t0));
  CorpusEvidence corpus;
  if (!opt.no_corpus) corpus = load_corpus_evidence(model, path, opt.evidence);
  s->cache = std::make_unique<server::RunCache>(model, static_cast<size_t>(opt.cache_runs), budget, limits.max_tokens,
                                                std::move(probe), AnalyseOptions::Maps::kAuto, corpus.heads);
  s->api = std::make_unique<server::Api>(model, *s->cache, limits);
  if (!opt.no_corpus) s->api->set_corpus_info(corpus.source, corpus.syntax, corpus.coreference);
  s->api->set_head_map_source(path, opt.evidence);
  return s;
}

void serve(const ServeOptions& opt) {
  if (opt.models.empty() || opt.models.size() > 4) throw Error("serve: give one to four --model");
  // Two models side by side share --cache-mib.
  const int cache_mib = opt.cache_mib / static_cast<int>(opt.models.size());
  std::vector<std::unique_ptr<Served>> served;
  std::vector<server::Api*> apis;
  for (const std::string& path : opt.models) {
    served.push_back(serve_model(opt, path, cache_mib));
    apis.push_back(served.back()->api.get());
  }

  server::HttpServer http;
  const int port = server::bind_http(http, opt.host, opt.port);
  if (port < 0 && opt.port == 0) throw Error("--host " + opt.host + ": cannot bind a port on this address");
  if (port < 0)
    throw Error("--port " + std::to_string(opt.port) + " on " + opt.host +
                ": cannot bind (in use? try another port, or --port 0 for any free one)");
  server::HttpOptions http_options;
  http_options.host = opt.host;
  http_options.port = port;
  http_options.allow_hosts = opt.allow_hosts;
  http_options.web_dir = opt.web_dir;
  http_options.max_body_bytes = static_cast<size_t>(opt.max_body_kib) << 10;
  server::configure_http(http, apis, http_options);
  if (!std::filesystem::exists(std::filesystem::path(opt.web_dir) / "index.html"))
    std::fprintf(stderr,
                 "headscope: warning: no web UI at %s/index.html (run `npm run build` in web/, or pass --web-dir); "
                 "serving the API only\n",
                 opt.web_dir.c_str());
  if (!server::is_loopback_host(opt.host))
    std::fprintf(stderr,
                 "headscope: WARNING: --host %s is not a loopback address: every machine that can reach it can read "
                 "the model's analyses and make it compute, with no password and no encryption. Use it only on a "
                 "network you trust; the default is 127.0.0.1.\n",
                 opt.host.c_str());

  // One line on stdout, flushed, so that scripts (make demo, the end-to-end tests) can read it.
  const bool v6 = opt.host.find(':') != std::string::npos;
  std::printf("headscope explorer: http://%s%s%s:%d/\n", v6 ? "[" : "", opt.host.c_str(), v6 ? "]" : "", port);
  std::fflush(stdout);
  http.serve();
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Start the explorer: web UI and HTTP API (docs/api.md) on one model");
  add_load_flags(cmd, opt->load);
  cmd->add_option("--model", opt->models,
                  "Model directory (Hugging Face files) or .gguf file; give it twice to compare two models side by "
                  "side (requests pick one with the header Headscope-Model: 0 or 1; GET /api/models lists them)")
      ->capture_default_str();
  cmd->add_option("--port", opt->port, "TCP port; 0 picks a free one")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--host", opt->host, "Address to bind; only change it to share the explorer on a trusted network")
      ->capture_default_str();
  cmd->add_option("--allow-host", opt->allow_hosts,
                  "Another name the server may be called by in the Host header (besides 127.0.0.1, localhost, [::1] "
                  "and --host); repeat for several");
  cmd->add_option("--web-dir", opt->web_dir, "Folder of the built web UI")->capture_default_str();
  cmd->add_option("--max-tokens", opt->max_tokens,
                  "Longest text in tokens (at most the model's position limit; default: as long as the model "
                  "reads while one run fits --cache-mib). Short runs keep dense maps (8 x n_layer x n_head x T^2 "
                  "bytes); longer ones stream them and keep queries, keys and pooled overviews (linear in T)")
      ->check(CLI::Range(2, 1 << 16));
  cmd->add_option("--cache-runs", opt->cache_runs, "Texts whose runs stay in memory")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--cache-mib", opt->cache_mib, "Memory budget of the run cache (MiB)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  add_evidence_flags(cmd, opt->evidence, opt->no_corpus);
  cmd->callback([opt] { serve(*opt); });
}

}  // namespace headscope::cli
