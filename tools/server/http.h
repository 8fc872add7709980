// headscope server — everything `headscope serve` does to the cpp-httplib server, in one function:
// routes, the request gate (gate.h), body limits, timeouts, the connection thread pool, and the
// error and exception handlers. serve_command.cc loads the model, binds, calls configure_http and
// listens; the tests and the HTTP fuzz target call configure_http on a server bound to port 0.
//
// Every reply is produced here or by Api; nothing a client sends can make a handler throw out of
// cpp-httplib (an exception escaping its error handler or logger would end the process).
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "headscope/limits.h"
#include "server/api.h"

namespace httplib {
class Server;
}

namespace headscope::server {

struct HttpOptions {
  std::string host = "127.0.0.1";        // the bound address (for the Host / Origin checks)
  int port = 8080;                       // the bound port (bind before configuring when it was 0)
  std::vector<std::string> allow_hosts;  // other names the server may be called by (--allow-host)
  std::string web_dir;                   // the built web UI; empty or missing: the API only
  size_t max_body_bytes = limits::kMaxRequestBodyBytes;
  int connection_threads = limits::kConnectionThreads;
  std::chrono::milliseconds read_timeout{limits::kReadTimeoutSeconds * 1000};
  std::chrono::milliseconds write_timeout{limits::kWriteTimeoutSeconds * 1000};
  int keep_alive_timeout_s = limits::kKeepAliveTimeoutSeconds;
  int keep_alive_max_count = limits::kKeepAliveMaxCount;
  bool log_requests = true;  // one stderr line per /api/ request
};

// Binds `http` to host:port (port 0: any free port) and returns the port, or -1. cpp-httplib 0.11.4
// listens with a backlog of 5, so a burst of clients saw dropped connection attempts (each retried
// by the kernel after 1 s); this listens again on the bound socket with the system's maximum.
int bind_http(httplib::Server& http, const std::string& host, int port);

// Configures `http` to serve `api` (and the UI in options.web_dir). `api` must outlive the server.
// Throws Error when options.web_dir exists but cannot be served.
void configure_http(httplib::Server& http, Api& api, const HttpOptions& options);

}  // namespace headscope::server
