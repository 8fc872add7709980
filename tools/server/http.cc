// headscope server — the cpp-httplib configuration (see http.h).
#include "server/http.h"

#include <httplib.h>
#include <sys/socket.h>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "headscope/error.h"
#include "server/gate.h"

namespace headscope::server {
namespace {

void send(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type.c_str());
  res.set_header("Cache-Control", "no-store");
  for (const auto& [name, value] : reply.headers) res.set_header(name.c_str(), value);
}

// A fixed reply for when building the JSON one failed (out of memory): must not throw either.
void send_fallback(httplib::Response& res) noexcept {
  try {
    res.status = 500;
    res.set_content(R"({"error":{"status":500,"code":"internal_error","message":"internal error"}})",
                    "application/json");
  } catch (...) {
  }
}

// A path or header value for a message or the log: control bytes become '?', and it is cut to a
// length a terminal line can show. (JSON replies escape the rest; see Api::error.)
std::string printable(std::string_view s, size_t max = 200) {
  std::string out;
  for (char c : s.substr(0, max)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  if (s.size() > max) out += "...";
  return out;
}

RequestHead head_of(const httplib::Request& req) {
  RequestHead head{req.method, req.path, {}};
  for (const auto& [name, value] : req.headers) head.headers.emplace_back(name, value);
  return head;
}

// Reads the body of a POST through the content reader, keeping at most `max` bytes: a chunked
// body is refused (413) while it arrives instead of being buffered whole. After the limit the rest
// is read and dropped, up to kMaxDiscardedBodyBytes, so that the client is still reading when the
// 413 comes back; a body longer still is left unread.
std::optional<HttpReply> read_body(const httplib::ContentReader& reader, size_t max, std::string& body) {
  size_t dropped = 0;
  bool over = false;
  const bool complete = reader([&](const char* data, size_t n) {
    if (!over && body.size() + n <= max) {
      body.append(data, n);
      return true;
    }
    over = true;
    dropped += n;
    return dropped <= limits::kMaxDiscardedBodyBytes;
  });
  if (over)
    return Api::error(413, "body_too_large",
                      "request body is over the limit of " + std::to_string(max) + " bytes; send a shorter text");
  if (!complete) return Api::error(400, "bad_body", "the request body could not be read (cut short or badly chunked)");
  return std::nullopt;
}

using Endpoint = HttpReply (Api::*)(std::string_view);

}  // namespace

int bind_http(httplib::Server& http, const std::string& host, int port) {
  // The options callback sees each socket cpp-httplib tries; the last one is the one it bound.
  auto bound = std::make_shared<int>(-1);
  http.set_socket_options([bound](socket_t sock) {
    httplib::default_socket_options(sock);
    *bound = sock;
  });
  const int result = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (result > 0 && *bound >= 0) ::listen(*bound, SOMAXCONN);
  return result;
}

namespace {

// Connection threads: each open connection holds one while its request arrives, so the pool is
// much larger than cpp-httplib's default (8 here), and reads time out quickly.
void set_connection_limits(httplib::Server& http, const HttpOptions& options) {
  const size_t threads = static_cast<size_t>(std::max(1, options.connection_threads));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_read_timeout(options.read_timeout);
  http.set_write_timeout(options.write_timeout);
  http.set_keep_alive_timeout(options.keep_alive_timeout_s);
  http.set_keep_alive_max_count(static_cast<size_t>(std::max(1, options.keep_alive_max_count)));
  http.set_payload_max_length(options.max_body_bytes);
}

// The gate's refusal as a reply; the body, if any, was not read: the client must not reuse the
// connection.
void send_rejection(httplib::Response& res, const Rejection& rejection) {
  send(res, Api::error(rejection.status, rejection.code, rejection.message));
  if (!rejection.allow.empty()) res.set_header("Allow", rejection.allow);
  res.set_header("Connection", "close");
}

// The gate sees every request after its headers, before any body is read or any file served.
void install_gate(httplib::Server& http, const HttpOptions& options) {
  GateOptions gate;
  gate.bound_host = options.host;
  gate.port = options.port;
  gate.extra_hosts = options.allow_hosts;
  gate.max_body_bytes = options.max_body_bytes;
  http.set_pre_routing_handler([gate](const httplib::Request& req, httplib::Response& res) {
    try {
      const auto rejection = check_request(head_of(req), gate);
      if (!rejection) return httplib::Server::HandlerResponse::Unhandled;
      send_rejection(res, *rejection);
    } catch (...) {
      send_fallback(res);
    }
    return httplib::Server::HandlerResponse::Handled;
  });
  // "Expect: 100-continue" is answered before routing: run the gate there too, so that a refused
  // body is never invited.
  http.set_expect_100_continue_handler([gate](const httplib::Request& req, httplib::Response& res) {
    try {
      const auto rejection = check_request(head_of(req), gate);
      if (!rejection) return 100;
      send_rejection(res, *rejection);
      return rejection->status;
    } catch (...) {
      send_fallback(res);
      return 500;
    }
  });
}

// Every route is also in the gate's table (gate.cc), which answers a wrong method with 405 and
// Allow; a route missing there would answer 404 to a GET instead, so the server refuses to start.
void check_in_gate_table(std::string_view path, std::string_view method) {
  for (const Route& route : api_routes())
    if (route.path == path && route.method == method) return;
  throw std::logic_error("route " + std::string(method) + " " + std::string(path) +
                         " is missing from api_routes() in gate.cc");
}

// The API's routes: two GETs, and POSTs whose body is read within max_body_bytes.
void add_routes(httplib::Server& http, Api& api, size_t max_body) {
  check_in_gate_table("/api/model", "GET");
  check_in_gate_table("/api/health", "GET");
  http.Get("/api/model", [&api](const httplib::Request&, httplib::Response& res) { send(res, api.model_info()); });
  http.Get("/api/health", [&api](const httplib::Request&, httplib::Response& res) { send(res, api.health()); });
  const auto post = [&](const char* path, Endpoint endpoint) {
    check_in_gate_table(path, "POST");
    http.Post(path, [&api, endpoint, max_body](const httplib::Request&, httplib::Response& res,
                                               const httplib::ContentReader& reader) {
      std::string body;
      if (auto refused = read_body(reader, max_body, body)) {
        send(res, *refused);
        return;
      }
      send(res, (api.*endpoint)(body));
    });
  };
  post("/api/run", &Api::run);
  post("/api/attention", &Api::attention);
  post("/api/tile", &Api::tile);
  post("/api/overview", &Api::overview);
  post("/api/decompose", &Api::decompose);
  post("/api/generate", &Api::generate);
  post("/api/link", &Api::link);
  post("/api/ablate", &Api::ablate);
  post("/api/importance", &Api::importance);
}

// The API's JSON error for a status that never reached a handler.
HttpReply status_error(const httplib::Request& req, int status) {
  if (status == 404)
    return Api::error(404, "not_found",
                      "no such path: " + printable(req.method, 16) + " " + printable(req.path) + " (see docs/api.md)");
  if (status == 413) return Api::error(413, "body_too_large", "request body is over the server's limit");
  if (status == 414) return Api::error(414, "uri_too_long", "the request line is over 8 KiB");
  return Api::error(status, "http_error", "request failed with HTTP status " + std::to_string(status));
}

void install_error_handlers(httplib::Server& http) {
  // Errors that never reached a handler (unknown path, bad request line, a URI over 8 KiB) get the
  // API's JSON shape. cpp-httplib calls this for every status >= 400 OUTSIDE its try/catch, so it
  // must not throw: the decoded path may be any bytes (/%ff), hence printable() and Api::error's
  // replacement of invalid UTF-8.
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    try {
      if (res.body.empty()) send(res, status_error(req, res.status));
    } catch (...) {
      send_fallback(res);
    }
  });
  // A handler that threw (Api catches everything, so this is a bug): a JSON 500, never a crash.
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::string what = "unknown error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send(res, Api::error(500, "internal_error", "internal error (the server keeps running): " + what));
    } catch (...) {
      send_fallback(res);
    }
  });
}

void install_logger(httplib::Server& http) {
  http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    try {
      if (req.path.rfind("/api/", 0) == 0)
        std::fprintf(stderr, "headscope: %s %s -> %d (%zu bytes)\n", printable(req.method, 16).c_str(),
                     printable(req.path).c_str(), res.status, res.body.size());
    } catch (...) {
    }
  });
}

// The built web UI at /, or a line saying that it was not built.
void mount_web(httplib::Server& http, const std::string& web_dir) {
  std::error_code ec;
  const bool has_ui = !web_dir.empty() && std::filesystem::exists(std::filesystem::path(web_dir) / "index.html", ec);
  if (has_ui) {
    if (!http.set_mount_point("/", web_dir)) throw Error("--web-dir " + web_dir + ": cannot serve this folder");
  } else {
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("headscope API is running; the web UI was not built (see web/README.md).\n", "text/plain");
    });
  }
}

}  // namespace

void configure_http(httplib::Server& http, Api& api, const HttpOptions& options) {
  set_connection_limits(http, options);
  install_gate(http, options);
  add_routes(http, api, options.max_body_bytes);
  install_error_handlers(http);
  if (options.log_requests) install_logger(http);
  mount_web(http, options.web_dir);
}

}  // namespace headscope::server
