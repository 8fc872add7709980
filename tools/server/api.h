// headscope server — the HTTP API as plain functions: request body in, status + body out.
//
// This is the only place that knows JSON. Each handler parses the request into a native struct
// first (TextRequest, AttentionRequest, DecomposeRequest), calls the core through RunCache, and
// formats the reply. serve_command.cc binds these handlers to routes with cpp-httplib; keeping
// them free of httplib types makes the contract (docs/api.md) readable in one file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "headscope/model.h"
#include "server/run_cache.h"
#include "server/wire.h"

namespace headscope::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

struct ApiLimits {
  size_t max_text_bytes = 64 * 1024;  // longer text: 413 (a 512-token text is a few KiB)
  int max_tokens = 512;               // longer encoding: 413 unless truncated (<= the model's limit)
  int max_new_tokens = 32;            // /api/generate: more is a 400 (each step is a forward pass)
};

// What every endpoint that analyses a text takes.
struct TextRequest {
  std::string text;
  bool truncate = false;      // keep the first max_positions tokens instead of refusing
  Level level = Level::kToken;
  bool hide_special = false;  // statistics and roles without the special tokens (run only)
};
struct AttentionRequest {
  TextRequest text;
  std::optional<int> layer;   // absent: every layer
  std::optional<int> head;    // absent: every head
  WireDtype dtype = WireDtype::kFloat32;
};
struct DecomposeRequest {
  TextRequest text;
  int layer = 0;
  int token = 0;              // token index (W_O acts on token positions, so always token level)
};

class Api {
 public:
  Api(const Model& model, RunCache& cache, ApiLimits limits = {});

  HttpReply model_info() const;                // GET  /api/model
  HttpReply run(std::string_view body);        // POST /api/run
  HttpReply attention(std::string_view body);  // POST /api/attention
  HttpReply decompose(std::string_view body);  // POST /api/decompose
  HttpReply generate(std::string_view body);   // POST /api/generate (causal models only)

  // {"error": {"status", "code", "message"}} with that status.
  static HttpReply error(int status, std::string_view code, std::string_view message);

 private:
  // Wraps a handler: request errors become their 4xx reply, model errors 422.
  template <typename Handler>
  HttpReply guarded(std::string_view body, Handler&& handler);

  const Model& model_;
  RunCache& cache_;
  ApiLimits limits_;
};

}  // namespace headscope::server
