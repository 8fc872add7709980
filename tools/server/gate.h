// headscope server — the request gate: which requests the server agrees to read at all.
//
// `headscope serve` is a desktop tool on loopback, but every web page the user opens can send
// requests to it. The gate runs on the request line and headers only, before any body is read:
//
//   Host     must name this machine (127.0.0.1, localhost, [::1]), the bound host, or a host given
//            with --allow-host; any port. A page on attacker.example that rebinds its DNS name to
//            127.0.0.1 sends "Host: attacker.example" and is refused (403), so it cannot read the API.
//   Origin   when present, must be http://HOST:PORT of this server (HOST as above, PORT the bound
//            port): a cross-site fetch or form is refused (403) before anything is computed.
//   method   a known path with another method → 405 with Allow; non-API paths are GET/HEAD only.
//   body     POST needs Content-Type: application/json (415; also stops cross-site "simple"
//            requests, which cannot send it without a CORS preflight the server never grants),
//            no Content-Encoding (415: gzip or br would inflate past the limit), a Content-Length
//            or chunked transfer (411), and at most the body limit (413).
//   Range    at most one byte range (416), refused before anything is computed or read; the
//            server never sends a multipart reply (docs/api.md).
//
// A pure function over the request head, so that it is tested without sockets.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headscope::server {

struct RequestHead {
  std::string method;  // "GET", "POST", ...
  std::string path;    // decoded path, without the query
  std::vector<std::pair<std::string, std::string>> headers;

  // Every value of header `name` (case-insensitive), in order.
  std::vector<std::string_view> values(std::string_view name) const;
};

struct GateOptions {
  std::string bound_host = "127.0.0.1";  // the address given to --host
  int port = 8080;                       // the bound port
  std::vector<std::string> extra_hosts;  // --allow-host: other names this server may be called by
  size_t max_body_bytes = 0;             // 0: the default of limits.h
};

struct Rejection {
  int status = 400;
  std::string code;     // machine-readable, as in the API's errors
  std::string message;  // one line: what was wrong and what to do
  std::string allow;    // 405 only: the methods the path accepts ("GET, HEAD")
};

// The endpoints of docs/api.md: path, method, and whether it is heavy (waits for a compute slot).
struct Route {
  std::string_view path;
  std::string_view method;
  bool heavy;
};
const std::vector<Route>& api_routes();

// Whether `host` (a name or address, IPv6 with or without brackets) is a loopback name.
bool is_loopback_host(std::string_view host);

// std::nullopt: the request may proceed. Otherwise the reply to send instead, body unread.
std::optional<Rejection> check_request(const RequestHead& request, const GateOptions& options);

}  // namespace headscope::server
