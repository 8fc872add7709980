// libFuzzer target: raw bytes sent to the explorer's real HTTP server — the Beast transport bound
// and configured by bind_http / configure_http exactly as `headscope serve` does, the request gate, the API handlers
// and the default model behind them — over a loopback socket. One input is one connection: the bytes are sent, the
// write side is closed and the reply read. Besides crashes and sanitizer reports, a reply with a 5xx status other than
// the queue's deliberate 503 is a finding: every bad request must be answered with a 4xx.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "fuzz_support.h"
#include "headscope/model.h"
#include "server/api.h"
#include "server/http.h"
#include "server/run_cache.h"

namespace {

struct Served {
  std::unique_ptr<headscope::Model> model;
  std::unique_ptr<headscope::server::RunCache> cache;
  std::unique_ptr<headscope::server::Api> api;
  headscope::server::HttpServer http;
  int port = -1;
};

Served* served = nullptr;

void start() {
  using namespace headscope;
  served = new Served;
  served->model = Model::load(fuzz::default_model_dir());
  server::ApiLimits limits;
  limits.max_tokens = 128;
  served->cache = std::make_unique<server::RunCache>(*served->model, 2, size_t{256} << 20, limits.max_tokens);
  served->api = std::make_unique<server::Api>(*served->model, *served->cache, limits);
  served->port = server::bind_http(served->http, "127.0.0.1", 0);
  if (served->port < 0) std::abort();
  server::HttpOptions options;
  options.port = 8080;  // the port the seeds' Host and Origin headers name; the gate checks that
  options.log_requests = false;
  options.head_timeout = std::chrono::milliseconds(300);
  options.body_timeout = std::chrono::milliseconds(1000);
  options.keep_alive_timeout = std::chrono::milliseconds(1000);
  options.linger_timeout = std::chrono::milliseconds(300);
  options.handler_threads = 8;
  server::configure_http(served->http, *served->api, options);
  std::thread([] { served->http.serve(); }).detach();
  while (!served->http.running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(served->port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Closed with a reset (linger 0), so that tens of thousands of inputs do not leave as many
  // connections in TIME_WAIT and run the loopback's ephemeral ports out. A connection that cannot
  // be made for a while (the kernel's queue full) is retried; a server that never answers again is
  // a finding.
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) std::abort();
    const linger reset{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
    const int err = errno;
    ::close(fd);
    fd = -1;
    if (attempt == 200) {
      std::fprintf(stderr, "http_fuzzer: cannot connect to the server: %s\n", std::strerror(err));
      std::abort();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (a refused request); that is an answer
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // Every status line the server wrote: 5xx other than 503 means a request reached an error the
  // server did not expect. The replies are read one after the other (status line, head, a body of
  // Content-Length bytes), so that "HTTP/1.1 " inside a body (an error message quoting a header) is
  // not taken for a status line.
  size_t at = 0;
  while (at + 12 <= reply.size() && reply.compare(at, 9, "HTTP/1.1 ") == 0) {
    const int status = std::atoi(reply.substr(at + 9, 3).c_str());
    if (status >= 500 && status != 503) {
      std::fprintf(stderr, "http_fuzzer: the server answered %d:\n%s\n", status, reply.substr(at, 400).c_str());
      std::abort();
    }
    const size_t head_end = reply.find("\r\n\r\n", at);
    if (head_end == std::string::npos) break;
    std::string head = reply.substr(at, head_end - at);
    for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const size_t length_at = head.find("\r\ncontent-length:");
    if (length_at == std::string::npos) break;
    at = head_end + 4 + std::strtoull(head.c_str() + length_at + 17, nullptr, 10);
  }
  return 0;
}
