// headscope server — the request gate (see gate.h).
#include "server/gate.h"

#include <algorithm>
#include <cctype>

#include "headscope/limits.h"

namespace headscope::server {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "name", "name:port", "[v6]" or "[v6]:port" → host (without brackets) and port (-1 if absent).
// std::nullopt for anything else (an unbracketed IPv6 address, an empty name, a bad port).
std::optional<std::pair<std::string_view, int>> split_host_port(std::string_view s) {
  std::string_view host, rest;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    rest = s.substr(close + 1);
  } else {
    const size_t colon = s.find(':');
    host = s.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
  }
  if (host.empty()) return std::nullopt;
  if (rest.empty()) return std::pair{host, -1};
  rest.remove_prefix(1);  // ':'
  if (!all_digits(rest) || rest.size() > 5) return std::nullopt;
  const int port = std::stoi(std::string(rest));
  if (port > 65535) return std::nullopt;
  return std::pair{host, port};
}

std::string_view unbracket(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') return host.substr(1, host.size() - 2);
  return host;
}

bool host_allowed(std::string_view host, const GateOptions& options) {
  if (is_loopback_host(host) || iequals(host, unbracket(options.bound_host))) return true;
  return std::any_of(options.extra_hosts.begin(), options.extra_hosts.end(),
                     [&](const std::string& h) { return iequals(host, unbracket(h)); });
}

Rejection reject(int status, std::string code, std::string message) {
  return Rejection{status, std::move(code), std::move(message), {}};
}

std::optional<Rejection> check_host(const RequestHead& r, const GateOptions& options) {
  const auto hosts = r.values("Host");
  if (hosts.size() != 1)
    return reject(400, "bad_host",
                  "the request must carry exactly one Host header (it has " + std::to_string(hosts.size()) + ")");
  const auto parsed = split_host_port(trim(hosts.front()));
  if (!parsed || !host_allowed(parsed->first, options))
    return reject(403, "forbidden_host",
                  "Host \"" + std::string(hosts.front()) +
                      "\" is not this server's name: open it as http://127.0.0.1 or http://localhost (or start "
                      "serve with --allow-host NAME)");
  return std::nullopt;
}

std::optional<Rejection> check_origin(const RequestHead& r, const GateOptions& options) {
  const auto origins = r.values("Origin");
  if (origins.empty()) return std::nullopt;  // not sent by a browser for same-origin GETs, nor by curl
  const std::string_view origin = trim(origins.front());
  const auto refuse = [&] {
    return reject(403, "forbidden_origin",
                  "requests from origin \"" + std::string(origin) +
                      "\" are refused: only pages served by this server (" +
                      "http://127.0.0.1:" + std::to_string(options.port) + "/) may call the API");
  };
  if (origins.size() != 1) return refuse();
  constexpr std::string_view kScheme = "http://";
  if (origin.size() <= kScheme.size() || !iequals(origin.substr(0, kScheme.size()), kScheme)) return refuse();
  const auto parsed = split_host_port(origin.substr(kScheme.size()));
  if (!parsed || !host_allowed(parsed->first, options)) return refuse();
  const int port = parsed->second < 0 ? 80 : parsed->second;
  if (port != options.port) return refuse();
  return std::nullopt;
}

std::optional<Rejection> check_method(const RequestHead& r) {
  const bool is_api = r.path == "/api" || r.path.rfind("/api/", 0) == 0;
  std::string allow;
  bool known = false;
  if (is_api) {
    for (const Route& route : api_routes()) {
      if (route.path != r.path) continue;
      known = true;
      if (route.method == r.method || (route.method == "GET" && r.method == "HEAD")) return std::nullopt;
      allow = route.method == "GET" ? "GET, HEAD" : std::string(route.method);
    }
    if (!known) return std::nullopt;  // unknown API path: the router answers 404
  } else {
    if (r.method == "GET" || r.method == "HEAD") return std::nullopt;
    allow = "GET, HEAD";
  }
  Rejection out =
      reject(405, "method_not_allowed",
             r.method + " is not allowed on " + (is_api ? r.path : "the web UI's files") + "; use " + allow);
  out.allow = allow;
  return out;
}

std::optional<Rejection> check_body(const RequestHead& r, const GateOptions& options) {
  const size_t max_body = options.max_body_bytes > 0 ? options.max_body_bytes : limits::kMaxRequestBodyBytes;
  const auto lengths = r.values("Content-Length");
  const auto transfer = r.values("Transfer-Encoding");
  const auto encodings = r.values("Content-Encoding");
  const bool post = r.method == "POST";

  if (lengths.size() > 1)
    return reject(400, "bad_content_length", "the request has more than one Content-Length header");
  if (!lengths.empty() && (!all_digits(trim(lengths.front())) || trim(lengths.front()).size() > 18))
    return reject(400, "bad_content_length", "Content-Length \"" + std::string(lengths.front()) + "\" is not a number");
  const size_t length = lengths.empty() ? 0 : std::stoull(std::string(trim(lengths.front())));
  const bool chunked = transfer.size() == 1 && iequals(trim(transfer.front()), "chunked");
  if (!transfer.empty() && !chunked)
    return reject(400, "bad_transfer_encoding",
                  "Transfer-Encoding \"" + std::string(transfer.front()) +
                      "\" is not supported; send the body with a Content-Length");
  if (chunked && !lengths.empty())
    return reject(400, "bad_transfer_encoding", "the request has both Content-Length and Transfer-Encoding; send one");

  if (!post) {
    if (chunked || length > 0)
      return reject(400, "unexpected_body", r.method + " requests carry no body; send the request without one");
    return std::nullopt;
  }
  if (length > max_body)
    return reject(
        413, "body_too_large",
        "request body is " + std::to_string(length) + " bytes; the limit is " + std::to_string(max_body) + " bytes");
  if (lengths.empty() && !chunked)
    return reject(411, "length_required", "a POST needs a Content-Length header (or chunked transfer encoding)");
  for (std::string_view e : encodings)
    if (!iequals(trim(e), "identity"))
      return reject(415, "unsupported_encoding",
                    "Content-Encoding \"" + std::string(e) + "\" is not accepted; send the JSON uncompressed");
  const auto types = r.values("Content-Type");
  std::string_view type = types.empty() ? std::string_view() : types.front();
  type = trim(type.substr(0, type.find(';')));
  if (types.size() != 1 || !iequals(type, "application/json"))
    return reject(415, "unsupported_media_type",
                  "a POST body must be sent with Content-Type: application/json (got \"" +
                      std::string(types.empty() ? std::string_view("none") : types.front()) + "\")");
  return std::nullopt;
}

}  // namespace

std::vector<std::string_view> RequestHead::values(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [key, value] : headers)
    if (iequals(key, name)) out.push_back(value);
  return out;
}

const std::vector<Route>& api_routes() {
  static const std::vector<Route> routes = {
      {"/api/model", "GET", false},       {"/api/health", "GET", false},    {"/api/run", "POST", true},
      {"/api/attention", "POST", true},   {"/api/decompose", "POST", true}, {"/api/generate", "POST", true},
      {"/api/tile", "POST", true},        {"/api/overview", "POST", true},  {"/api/ablate", "POST", true},
      {"/api/importance", "POST", true},  {"/api/link", "POST", true},      {"/api/patch", "POST", true},
      {"/api/logit_lens", "POST", true},  {"/api/head_lens", "POST", true}, {"/api/tokenize", "POST", true},
      {"/api/composition", "POST", true}, {"/api/head_map", "POST", true},  {"/api/models", "GET", false},
      {"/api/saliency", "POST", true},
  };
  return routes;
}

bool is_loopback_host(std::string_view host) {
  host = unbracket(host);
  return iequals(host, "localhost") || host == "127.0.0.1" || host == "::1";
}

std::optional<Rejection> check_request(const RequestHead& request, const GateOptions& options) {
  if (auto r = check_host(request, options)) return r;
  if (auto r = check_origin(request, options)) return r;
  if (auto r = check_method(request)) return r;
  // "Range: bytes=0-,0-,0-,..." would ask a server that builds multipart replies for thousands of
  // copies of an 18 MB attention block; a single range is ignored (the whole reply is sent).
  for (std::string_view range : request.values("Range"))
    if (range.find(',') != std::string_view::npos || request.values("Range").size() > 1)
      return reject(416, "range_not_satisfiable", "only a single byte range is served; ask for one range at a time");
  return check_body(request, options);
}

}  // namespace headscope::server
