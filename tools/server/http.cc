// headscope server — the Boost.Beast transport (see http.h).
//
// One Session per connection, on its own strand. A request goes through these steps, each with
// its own deadline (one timer per session; when it fires the socket's pending operation is
// cancelled, so the deadline covers the whole step however many reads it takes):
//
//   wait      until the first byte of a request (keep-alive or idle timeout; the session counts as
//             idle here and may be shed when the server is full)
//   head      the request line and header fields, bounded in bytes and fields while they are
//             parsed (head timeout → 408); then the path is decoded and the gate runs
//   body      a POST's body, counted while it arrives (body timeout → 408, over the limit → 413)
//   handle    light endpoints and files on the I/O thread, heavy ones on the handler pool
//   write     the reply (write timeout), then the next request (pipelined bytes are already in the
//             buffer) or, after a refusal, a bounded linger and close.
#include "server/http.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "headscope/error.h"
#include "server/gate.h"
#include "server/static_files.h"

namespace headscope::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Millis = std::chrono::milliseconds;

// Bytes asked of the socket per read, and the most the read buffer may hold (a head is at most
// max_header_bytes; the rest is what a client pipelined behind it).
constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kMaxBufferedBytes = 128 << 10;

// Parses one request: its head into a RequestHead while it is parsed (the request line and the
// number of fields bounded, Beast's header_limit bounding the whole head), and a POST's body into
// a string of at most max_body bytes, chunked or not.
class RequestParser : public http::basic_parser<true> {
 public:
  explicit RequestParser(const HttpOptions& o)
      : max_line_(o.max_request_line_bytes), max_fields_(o.max_header_fields), max_body_(o.max_body_bytes) {
    header_limit(static_cast<std::uint32_t>(o.max_header_bytes));
    body_limit(boost::none);  // counted in take(), so that the refusal is a 413 of ours
  }

  RequestHead head;
  std::string target;
  std::string body;
  bool line_too_long = false, too_many_fields = false, body_too_large = false, unknown_method = false;

 private:
  void on_request_impl(http::verb verb, beast::string_view method, beast::string_view t, int, error_code& ec) override {
    head.method = std::string(method);
    target = std::string(t);
    if (method.size() + t.size() + 10 > max_line_) {  // "METHOD target HTTP/1.1"
      line_too_long = true;
      ec = http::error::header_limit;
    } else if (verb == http::verb::unknown) {
      unknown_method = true;
      ec = http::error::bad_method;
    }
  }
  void on_response_impl(int, beast::string_view, int, error_code& ec) override { ec = http::error::bad_version; }
  void on_field_impl(http::field, beast::string_view name, beast::string_view value, error_code& ec) override {
    if (static_cast<int>(head.headers.size()) >= max_fields_) {
      too_many_fields = true;
      ec = http::error::header_limit;
      return;
    }
    head.headers.emplace_back(std::string(name), std::string(value));
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(beast::string_view data, error_code& ec) override { return take(data, ec); }
  void on_chunk_header_impl(std::uint64_t, beast::string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, beast::string_view data, error_code& ec) override { return take(data, ec); }
  void on_finish_impl(error_code&) override {}

  size_t take(beast::string_view data, error_code& ec) {
    if (body.size() + data.size() > max_body_) {
      body_too_large = true;
      ec = http::error::body_limit;
      return 0;
    }
    body.append(data.data(), data.size());
    return data.size();
  }

  const size_t max_line_;
  const int max_fields_;
  const size_t max_body_;
};

// The API's endpoints: light ones answer on the I/O thread, heavy ones on the handler pool.
struct Endpoint {
  std::string_view path;
  std::string_view method;
  HttpReply (*call)(Api&, std::string_view body);
  bool heavy;
};

const std::vector<Endpoint>& endpoints() {
  static const std::vector<Endpoint> table = {
      {"/api/model", "GET", [](Api& a, std::string_view) { return a.model_info(); }, false},
      {"/api/health", "GET", [](Api& a, std::string_view) { return a.health(); }, false},
      {"/api/run", "POST", [](Api& a, std::string_view b) { return a.run(b); }, true},
      {"/api/attention", "POST", [](Api& a, std::string_view b) { return a.attention(b); }, true},
      {"/api/tile", "POST", [](Api& a, std::string_view b) { return a.tile(b); }, true},
      {"/api/overview", "POST", [](Api& a, std::string_view b) { return a.overview(b); }, true},
      {"/api/decompose", "POST", [](Api& a, std::string_view b) { return a.decompose(b); }, true},
      {"/api/generate", "POST", [](Api& a, std::string_view b) { return a.generate(b); }, true},
      {"/api/link", "POST", [](Api& a, std::string_view b) { return a.link(b); }, true},
      {"/api/ablate", "POST", [](Api& a, std::string_view b) { return a.ablate(b); }, true},
      {"/api/importance", "POST", [](Api& a, std::string_view b) { return a.importance(b); }, true},
      {"/api/patch", "POST", [](Api& a, std::string_view b) { return a.patch(b); }, true},
      {"/api/logit_lens", "POST", [](Api& a, std::string_view b) { return a.logit_lens(b); }, true},
      {"/api/head_lens", "POST", [](Api& a, std::string_view b) { return a.head_lens(b); }, true},
      {"/api/tokenize", "POST", [](Api& a, std::string_view b) { return a.tokenize(b); }, true},
      {"/api/saliency", "POST", [](Api& a, std::string_view b) { return a.saliency(b); }, true},
      {"/api/composition", "POST", [](Api& a, std::string_view b) { return a.composition(b); }, true},
      {"/api/head_map", "POST", [](Api& a, std::string_view b) { return a.head_map(b); }, true},
  };
  return table;
}

// Every endpoint is also in the gate's table (gate.cc), which answers a wrong method with 405 and
// Allow; one missing there would answer 404 to a GET instead, so the server refuses to start.
void check_endpoints_in_gate_table() {
  for (const Endpoint& e : endpoints()) {
    bool found = false;
    for (const Route& route : api_routes()) found = found || (route.path == e.path && route.method == e.method);
    if (!found)
      throw std::logic_error("route " + std::string(e.method) + " " + std::string(e.path) +
                             " is missing from api_routes() in gate.cc");
  }
}

const Endpoint* find_endpoint(const RequestHead& head) {
  const std::string_view method = head.method == "HEAD" ? "GET" : std::string_view(head.method);
  for (const Endpoint& e : endpoints())
    if (e.path == head.path && e.method == method) return &e;
  return nullptr;
}

bool is_api_path(std::string_view path) { return path == "/api" || path.rfind("/api/", 0) == 0; }

// A handler's reply, or a JSON 500 if it threw (Api catches everything, so that is a bug).
HttpReply call_endpoint(const Endpoint& e, Api& api, std::string_view body) noexcept {
  try {
    return e.call(api, body);
  } catch (const std::exception& ex) {
    return Api::error(500, "internal_error", std::string("internal error (the server keeps running): ") + ex.what());
  } catch (...) {
    return Api::error(500, "internal_error", "internal error (the server keeps running)");
  }
}

class Session;

// What the sessions share: options, the gate, the API, the files, and the table of open sessions
// (for the connection cap).
struct ServerCore {
  HttpOptions options;
  GateOptions gate;
  std::vector<Api*> apis;  // [0] answers unless the request names another (header Headscope-Model)
  std::unique_ptr<StaticFiles> files;
  std::mutex mutex;
  std::map<uint64_t, std::weak_ptr<Session>> sessions;
  uint64_t next_id = 0;
  // Declared after the table: sessions still queued in the context unregister when it is destroyed.
  asio::io_context ioc;
  std::unique_ptr<asio::thread_pool> pool;  // joined before the context goes
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  std::atomic<bool> running{false};

  void accept();
  void admit(tcp::socket socket);
  void forget(uint64_t id) {
    std::lock_guard lock(mutex);
    sessions.erase(id);
  }
};

}  // namespace
}  // namespace headscope::server

namespace headscope::server {
namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerCore& core, uint64_t id)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), buffer_(kMaxBufferedBytes), core_(core), id_(id) {}
  ~Session() { core_.forget(id_); }

  void start() {
    guarded([&] { wait_for_request(core_.options.head_timeout); });
  }
  // The server is full and this session is idle: make room (on the session's strand).
  void shed() {
    guarded([&] {
      if (idle_) close();
    });
  }
  bool idle() const { return idle_; }
  tcp::socket::executor_type executor() { return socket_.get_executor(); }

 private:
  // Runs one step; anything it throws (out of memory) closes this connection only.
  template <typename F>
  void guarded(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      close();
    }
  }

  // ---- deadlines: one timer; when it fires, the pending operation on the socket is cancelled ----
  void arm(Millis timeout) {
    const uint64_t generation = ++timer_generation_;
    timed_out_ = false;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->timer_generation_) return;
      self->timed_out_ = true;
      error_code ignored;
      self->socket_.cancel(ignored);
    });
  }
  void disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  // ---- reading ----
  void wait_for_request(Millis timeout) {
    idle_ = true;
    if (buffer_.size() > 0) return read_head();  // pipelined behind the previous request
    arm(timeout);
    socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      self->guarded([&] {
        self->disarm();
        if (ec) return self->close();  // closed by the client, idle too long, or shed
        self->buffer_.commit(n);
        self->read_head();
      });
    });
  }

  void read_head() {
    idle_ = false;
    parser_.emplace(core_.options);
    arm(core_.options.head_timeout);
    http::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->guarded([&] {
        self->disarm();
        if (ec) return self->read_failed(ec, "head");
        self->on_head();
      });
    });
  }

  void on_head() {
    RequestHead& head = parser_->head;
    const std::optional<std::string> path = decode_target_path(parser_->target);
    if (!path)
      return refuse(Api::error(400, "bad_path",
                               "the request path \"" + printable(parser_->target) +
                                   "\" is not a path starting with '/' or holds a control byte (raw or %-encoded)"));
    head.path = *path;
    if (const std::optional<Rejection> rejection = check_request(head, core_.gate)) {
      HttpReply reply = Api::error(rejection->status, rejection->code, rejection->message);
      if (!rejection->allow.empty()) reply.headers.emplace_back("Allow", rejection->allow);
      return refuse(std::move(reply));
    }
    if (parser_->is_done()) return handle();
    // A POST (the gate lets no other method carry a body): invite it if asked, after the gate.
    bool expects_continue = false;
    for (std::string_view v : head.values("Expect")) expects_continue = expects_continue || v == "100-continue";
    if (!expects_continue) return read_body();
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    arm(core_.options.write_timeout);
    asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](error_code ec, size_t) {
                        self->guarded([&] {
                          self->disarm();
                          if (ec) return self->close();
                          self->read_body();
                        });
                      });
  }

  void read_body() {
    arm(core_.options.body_timeout);
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      self->guarded([&] {
        self->disarm();
        if (self->parser_->body_too_large)
          return self->refuse(Api::error(413, "body_too_large",
                                         "request body is over the limit of " +
                                             std::to_string(self->core_.options.max_body_bytes) +
                                             " bytes; send a shorter text"));
        if (ec) return self->read_failed(ec, "body");
        self->handle();
      });
    });
  }

  // Why the head or the body could not be read, as a reply (or a silent close when the client left).
  void read_failed(error_code ec, const char* part) {
    const HttpOptions& o = core_.options;
    if (ec == asio::error::operation_aborted && timed_out_) {
      const Millis limit = std::string_view(part) == "head" ? o.head_timeout : o.body_timeout;
      return refuse(Api::error(
          408, "request_timeout",
          std::string("the request ") + part + " did not arrive within " + std::to_string(limit.count()) + " ms"));
    }
    if (ec == http::error::end_of_stream || ec.category() != http::make_error_code(http::error::bad_target).category())
      return close();  // the client left (or the socket failed): nobody to answer
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      if (parser_->line_too_long || (parser_->head.method.empty() && !line_ends_within(o.max_request_line_bytes)))
        return refuse(Api::error(414, "uri_too_long",
                                 "the request line is over " + std::to_string(o.max_request_line_bytes) + " bytes"));
      const std::string what = parser_->too_many_fields
                                   ? "more than " + std::to_string(o.max_header_fields) + " header fields"
                                   : "over " + std::to_string(o.max_header_bytes) + " bytes";
      return refuse(Api::error(431, "headers_too_large", "the request head has " + what));
    }
    if (parser_->unknown_method)
      return refuse(Api::error(400, "http_error", "unknown method \"" + printable(parser_->head.method, 16) + "\""));
    refuse(Api::error(400, "http_error", "the request could not be parsed: " + ec.message()));
  }

  // Whether the buffered request line ends within `max` bytes (else it is the line that is too long).
  // Beast parses the request line as soon as it is whole, so this is asked only before that.
  bool line_ends_within(size_t max) const {
    const auto data = buffer_.data();
    const std::string_view bytes(static_cast<const char*>(data.data()), std::min(data.size(), max + 2));
    return bytes.find('\n') != std::string_view::npos;
  }

  // ---- answering ----
  void handle() {
    ++requests_;
    const RequestHead& head = parser_->head;
    if (!is_api_path(head.path)) return send(core_.files->get(head.method, head.path));
    if (head.path == "/api/models" && (head.method == "GET" || head.method == "HEAD")) return send(models_reply());
    const Endpoint* endpoint = find_endpoint(head);
    if (!endpoint) return send(not_found(head.method, head.path));
    Api* api = core_.apis.front();
    if (const std::vector<std::string_view> named = head.values("Headscope-Model"); !named.empty()) {
      size_t k = 0;
      const std::string_view v = named.back();
      const bool digits =
          !v.empty() && v.size() <= 3 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits) k = static_cast<size_t>(std::stoi(std::string(v)));
      if (!digits || k >= core_.apis.size())
        return send(Api::error(400, "bad_model",
                               "header Headscope-Model: \"" + printable(v, 16) +
                                   "\" names no model of this server (0 to " + std::to_string(core_.apis.size() - 1) +
                                   ")"));
      api = core_.apis[k];
    }
    if (!endpoint->heavy) return send(call_endpoint(*endpoint, *api, parser_->body));
    // Off the I/O threads: the handler may compute for seconds; its reply comes back to this strand.
    asio::post(*core_.pool, [self = shared_from_this(), endpoint, api, body = std::move(parser_->body)]() mutable {
      try {
        HttpReply reply = call_endpoint(*endpoint, *api, body);
        asio::post(self->executor(), [self, reply = std::move(reply)]() mutable {
          self->guarded([&] { self->send(std::move(reply)); });
        });
      } catch (...) {
        // Out of memory for the reply's trip back: the session, held by nothing else while its
        // handler runs, is destroyed with this task and its socket closed.
      }
    });
  }

  // GET /api/models: every model this server answers for, by the index a request names it with.
  HttpReply models_reply() const {
    std::string body = "{\"models\":[";
    for (size_t k = 0; k < core_.apis.size(); ++k) {
      const HttpReply info = core_.apis[k]->model_info();
      body += (k ? "," : "") + std::string("{\"index\":") + std::to_string(k) + ",\"model\":" + info.body + "}";
    }
    return {200, "application/json", body + "]}", {}};
  }

  void refuse(HttpReply reply) { send(std::move(reply), /*close_after=*/true); }

  void send(HttpReply reply, bool close_after = false) {
    const bool is_head = parser_ && parser_->head.method == "HEAD";
    keep_alive_ = !close_after && parser_->keep_alive() && requests_ < core_.options.max_requests_per_connection;
    log(reply);
    response_.emplace(static_cast<http::status>(reply.status), 11);
    response_->set(http::field::content_type, reply.content_type);
    response_->set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : reply.headers) response_->insert(name, value);
    response_->keep_alive(keep_alive_);
    response_->body() = std::move(reply.body);
    response_->prepare_payload();
    if (is_head) response_->body().clear();  // Content-Length stays that of the GET
    arm(core_.options.write_timeout);
    http::async_write(socket_, *response_, [self = shared_from_this()](error_code ec, size_t) {
      self->guarded([&] {
        self->disarm();
        self->response_.reset();
        if (ec) return self->close();
        if (!self->keep_alive_) return self->linger();
        self->parser_.reset();
        self->wait_for_request(self->core_.options.keep_alive_timeout);
      });
    });
  }

  void log(const HttpReply& reply) const {
    if (!core_.options.log_requests || !parser_ || !is_api_path(parser_->head.path)) return;
    std::fprintf(stderr, "headscope: %s %s -> %d (%zu bytes)\n", printable(parser_->head.method, 16).c_str(),
                 printable(parser_->head.path).c_str(), reply.status, reply.body.size());
  }

  // ---- closing ----
  // The reply is out: stop sending, read and drop what the client still sends for a while (so that
  // its unread bytes do not turn our close into a reset that destroys the reply), then close.
  void linger() {
    idle_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    parser_.reset();
    buffer_.consume(buffer_.size());
    arm(core_.options.linger_timeout);
    drain(0);
  }
  void drain(size_t dropped) {
    socket_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this(), dropped](error_code ec, size_t n) {
      self->guarded([&] {
        self->buffer_.consume(self->buffer_.size());
        if (ec || dropped + n > limits::kMaxDiscardedBodyBytes) return self->close();
        self->drain(dropped + n);
      });
    });
  }
  void close() noexcept {
    idle_ = false;
    ++timer_generation_;
    error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  ServerCore& core_;
  const uint64_t id_;
  std::optional<RequestParser> parser_;
  std::optional<http::response<http::string_body>> response_;
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  bool keep_alive_ = false;
  int requests_ = 0;
  std::atomic<bool> idle_{true};  // read by the acceptor, when it looks for a session to shed
};

void ServerCore::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;  // stopped
    if (ec) {
      // Out of file descriptors, most likely: try again shortly instead of spinning.
      accept_retry.expires_after(Millis(50));
      accept_retry.async_wait([this](error_code) { accept(); });
      return;
    }
    try {
      admit(std::move(socket));
    } catch (...) {
      // Out of memory for one more session: that connection is closed with its socket.
    }
    accept();
  });
}

// A new connection gets a session; when the server is full, an idle session makes room for it,
// and when none is idle the new connection is closed.
void ServerCore::admit(tcp::socket socket) {
  std::shared_ptr<Session> victim, session;
  {
    std::lock_guard lock(mutex);
    const size_t cap = static_cast<size_t>(std::max(1, options.max_connections));
    for (auto it = sessions.begin(); sessions.size() >= cap && it != sessions.end(); ++it) {
      std::shared_ptr<Session> s = it->second.lock();
      if (s && s->idle()) {
        victim = std::move(s);
        sessions.erase(it);
        break;
      }
    }
    if (sessions.size() >= cap) return;  // `socket` closes as it goes out of scope
    session = std::make_shared<Session>(std::move(socket), *this, next_id);
    sessions.emplace(next_id++, session);
  }
  if (victim) asio::post(victim->executor(), [victim] { victim->shed(); });
  asio::post(session->executor(), [session] { session->start(); });
}

}  // namespace
}  // namespace headscope::server

namespace headscope::server {

struct HttpServer::Impl : ServerCore {
  ~Impl() {
    ioc.stop();
    if (pool) pool->join();
  }
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {}
HttpServer::~HttpServer() = default;

int HttpServer::bind(const std::string& host, int port) {
  try {
    tcp::resolver resolver(impl_->ioc);
    const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive);
    for (const auto& entry : results) {
      error_code ec;
      tcp::acceptor& a = impl_->acceptor;
      if (a.is_open()) a.close(ec);
      a.open(entry.endpoint().protocol(), ec);
      if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec) a.bind(entry.endpoint(), ec);
      if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
      if (!ec) return a.local_endpoint().port();
    }
  } catch (const std::exception&) {
  }
  return -1;
}

void HttpServer::configure(Api& api, const HttpOptions& options) { configure(std::vector<Api*>{&api}, options); }

void HttpServer::configure(std::vector<Api*> apis, const HttpOptions& options) {
  check_endpoints_in_gate_table();
  if (apis.empty() || std::find(apis.begin(), apis.end(), nullptr) != apis.end())
    throw Error("the server needs at least one model");
  Impl& s = *impl_;
  s.options = options;
  s.gate.bound_host = options.host;
  s.gate.port = options.port;
  s.gate.extra_hosts = options.allow_hosts;
  s.gate.max_body_bytes = options.max_body_bytes;
  s.apis = std::move(apis);
  s.files = std::make_unique<StaticFiles>(options.web_dir);
  s.pool = std::make_unique<asio::thread_pool>(static_cast<size_t>(std::max(1, options.handler_threads)));
}

void HttpServer::serve() {
  Impl& s = *impl_;
  if (s.apis.empty()) throw std::logic_error("HttpServer::serve before configure");
  s.accept();
  const auto run = [&s] {
    for (;;) {
      try {
        s.ioc.run();
        return;
      } catch (...) {
        // A callback let something escape (each catches everything): keep serving.
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, s.options.io_threads); ++i) threads.emplace_back(run);
  s.running = true;
  run();
  for (std::thread& t : threads) t.join();
  s.running = false;
}

void HttpServer::stop() {
  asio::post(impl_->ioc, [&s = *impl_] {
    error_code ignored;
    s.acceptor.close(ignored);
  });
  impl_->ioc.stop();
}

bool HttpServer::running() const { return impl_->running; }

}  // namespace headscope::server
