// headscope serve — the explorer: a local HTTP server with the web UI (web/dist, built by Vite
// during set-up) and the JSON/binary API of docs/api.md. Binds 127.0.0.1 unless told otherwise:
// it is a desktop tool, not a public service.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <httplib.h>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "server/api.h"
#include "server/run_cache.h"

#ifndef HEADSCOPE_WEB_DIST
#define HEADSCOPE_WEB_DIST "web/dist"
#endif

namespace headscope::cli {
namespace {

struct ServeOptions {
  std::string model = "models/all-MiniLM-L6-v2";
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string web_dir = HEADSCOPE_WEB_DIST;
  int cache_runs = 4;
  int cache_mib = 2048;
  int max_body_kib = 1024;
  int max_tokens = 512;
};

void send(httplib::Response& res, const server::HttpReply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type.c_str());
  res.set_header("Cache-Control", "no-store");
}

void serve(const ServeOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> model = Model::load(opt.model);
  const ModelConfig& c = model->config();
  std::fprintf(stderr, "headscope: loaded %s (%s, %d layers x %d heads, d_model %d) in %.1f s\n", c.name.c_str(),
               c.architecture.c_str(), c.n_layer, c.n_head, c.d_model,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  t0 = std::chrono::steady_clock::now();
  std::vector<analysis::ProbeEvidence> probe = server::measure_probe(*model);
  std::fprintf(stderr, "headscope: induction probe over %zu heads in %.1f s\n", probe.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  server::ApiLimits limits;
  limits.max_tokens = c.max_positions > 0 ? std::min(opt.max_tokens, c.max_positions) : opt.max_tokens;
  server::RunCache cache(*model, static_cast<size_t>(opt.cache_runs), static_cast<size_t>(opt.cache_mib) << 20,
                         limits.max_tokens, std::move(probe));
  server::Api api(*model, cache, limits);

  httplib::Server http;
  http.set_payload_max_length(static_cast<size_t>(opt.max_body_kib) * 1024);

  http.Get("/api/model", [&](const httplib::Request&, httplib::Response& res) { send(res, api.model_info()); });
  http.Post("/api/run", [&](const httplib::Request& req, httplib::Response& res) { send(res, api.run(req.body)); });
  http.Post("/api/attention",
            [&](const httplib::Request& req, httplib::Response& res) { send(res, api.attention(req.body)); });
  http.Post("/api/generate",
            [&](const httplib::Request& req, httplib::Response& res) { send(res, api.generate(req.body)); });
  http.Post("/api/decompose",
            [&](const httplib::Request& req, httplib::Response& res) { send(res, api.decompose(req.body)); });
  http.Get("/api/health", [&](const httplib::Request&, httplib::Response& res) {
    send(res, {200, "application/json", "{\"ok\":true,\"runs_computed\":" + std::to_string(cache.runs_computed()) + "}"});
  });

  // Errors that never reached a handler (unknown route, body over the size limit, wrong method)
  // get the same JSON shape as the API's own errors. httplib calls this for every status >= 400,
  // so a reply that already has a body is left alone.
  http.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      send(res, server::Api::error(413, "body_too_large",
                                   "request body is over " + std::to_string(opt.max_body_kib) + " KiB"));
    } else if (res.status == 404) {
      send(res, server::Api::error(404, "not_found", "no such path: " + req.method + " " + req.path + " (see docs/api.md)"));
    } else {
      send(res, server::Api::error(res.status, "http_error", "request failed with HTTP status " + std::to_string(res.status)));
    }
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send(res, server::Api::error(500, "internal_error", what));
  });
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (req.path.rfind("/api/", 0) == 0)
      std::fprintf(stderr, "headscope: %s %s -> %d (%zu bytes)\n", req.method.c_str(), req.path.c_str(), res.status,
                   res.body.size());
  });

  const bool has_ui = std::filesystem::exists(std::filesystem::path(opt.web_dir) / "index.html");
  if (has_ui) {
    if (!http.set_mount_point("/", opt.web_dir))
      throw Error("--web-dir " + opt.web_dir + ": cannot serve this folder");
  } else {
    std::fprintf(stderr,
                 "headscope: warning: no web UI at %s/index.html (run `npm run build` in web/, or pass --web-dir); "
                 "serving the API only\n",
                 opt.web_dir.c_str());
    http.Get("/", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content("headscope API is running; the web UI was not built (see web/README.md).\n", "text/plain");
    });
  }

  int port = opt.port;
  if (port == 0) {
    port = http.bind_to_any_port(opt.host);
    if (port < 0) throw Error("--host " + opt.host + ": cannot bind a port on this address");
  } else if (!http.bind_to_port(opt.host, port)) {
    throw Error("--port " + std::to_string(port) + " on " + opt.host +
                ": cannot bind (in use? try another port, or --port 0 for any free one)");
  }
  // One line on stdout, flushed, so that scripts (make demo, the end-to-end tests) can read it.
  std::printf("headscope explorer: http://%s:%d/\n", opt.host.c_str(), port);
  std::fflush(stdout);
  if (!http.listen_after_bind()) throw Error("the server stopped unexpectedly on port " + std::to_string(port));
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Start the explorer: web UI and HTTP API (docs/api.md) on one model");
  cmd->add_option("--model", opt->model, "Model directory (Hugging Face files) or .gguf file")->capture_default_str();
  cmd->add_option("--port", opt->port, "TCP port; 0 picks a free one")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--host", opt->host, "Address to bind; only change it to share the explorer on a trusted network")
      ->capture_default_str();
  cmd->add_option("--web-dir", opt->web_dir, "Folder of the built web UI")->capture_default_str();
  cmd->add_option("--max-tokens", opt->max_tokens,
                  "Longest text in tokens (at most the model's position limit); memory grows with its square")
      ->check(CLI::Range(2, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--cache-runs", opt->cache_runs, "Texts whose runs stay in memory")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--cache-mib", opt->cache_mib, "Memory budget of the run cache (MiB)")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  cmd->callback([opt] { serve(*opt); });
}

}  // namespace headscope::cli
