// headscope server — the HTTP transport of `headscope serve`: Boost.Beast over Asio.
//
// A few I/O threads accept, read, parse and write every connection asynchronously; the API's heavy
// handlers (which may run a model for seconds) run on a separate pool and post their reply back,
// so a slow handler or a slow client never delays another connection. Every resource a client can
// make the server hold is bounded per connection and per request (include/headscope/limits.h,
// "the HTTP server"): the head's size, field count and deadline, the body's size and deadline,
// requests per connection, idle time, open connections. The request gate (gate.h) sees every
// request head before any body is read or anything is computed.
//
// serve_command.cc binds, configures and serves; the tests and the HTTP fuzz target do the same on
// port 0. Nothing a client sends can make this code throw out of a connection: every callback
// catches everything and closes that connection.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "headscope/limits.h"
#include "server/api.h"

namespace headscope::server {

struct HttpOptions {
  std::string host = "127.0.0.1";        // the bound address (for the Host / Origin checks)
  int port = 8080;                       // the port the gate expects in Origin (the bound one)
  std::vector<std::string> allow_hosts;  // other names the server may be called by (--allow-host)
  std::string web_dir;                   // the built web UI; empty or missing: the API only
  size_t max_body_bytes = limits::kMaxRequestBodyBytes;
  int io_threads = limits::kIoThreads;
  int handler_threads = limits::kHandlerThreads;
  int max_connections = limits::kMaxConnections;
  std::chrono::milliseconds head_timeout{limits::kHeadTimeoutSeconds * 1000};
  std::chrono::milliseconds body_timeout{limits::kBodyTimeoutSeconds * 1000};
  std::chrono::milliseconds keep_alive_timeout{limits::kKeepAliveTimeoutSeconds * 1000};
  std::chrono::milliseconds write_timeout{limits::kWriteTimeoutSeconds * 1000};
  std::chrono::milliseconds linger_timeout{limits::kLingerSeconds * 1000};
  int max_requests_per_connection = limits::kMaxRequestsPerConnection;
  size_t max_request_line_bytes = limits::kMaxRequestLineBytes;
  size_t max_header_bytes = limits::kMaxHeaderBytes;
  int max_header_fields = limits::kMaxHeaderFields;
  bool log_requests = true;  // one stderr line per /api/ request
};

class HttpServer {
 public:
  HttpServer();
  ~HttpServer();  // stops serving and waits for the handlers in progress
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: any free port) with the system's largest listen backlog; returns the
  // port, or -1 when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Serves `api` (and the UI in options.web_dir); `api` must outlive the server. Throws Error when
  // options.web_dir holds an index.html but cannot be resolved.
  void configure(Api& api, const HttpOptions& options);
  // Several models side by side (serve --model A --model B): `apis[0]` answers by default, and a
  // request with the header "Headscope-Model: k" is answered by apis[k] (400 bad_model for an index
  // out of range); GET /api/models lists them.
  void configure(std::vector<Api*> apis, const HttpOptions& options);
  // Accepts and serves connections on io_threads threads (this one among them) until stop().
  void serve();
  void stop();
  bool running() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The two steps every caller takes, by their names in docs/reliability.md.
inline int bind_http(HttpServer& http, const std::string& host, int port) { return http.bind(host, port); }
inline void configure_http(HttpServer& http, Api& api, const HttpOptions& options) { http.configure(api, options); }
inline void configure_http(HttpServer& http, std::vector<Api*> apis, const HttpOptions& options) {
  http.configure(std::move(apis), options);
}

}  // namespace headscope::server
