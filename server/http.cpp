#include "server/http.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_status.hpp"
#include "server/schemas.hpp"
#include "server/web_files.hpp"
#include "support/error.hpp"

namespace tiletune::server {

using nlohmann::json;

namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using beast::error_code;

//! Threads running the event loop, which also serve the quick routes (lookups, jobs) on the
//! thread that read the request: one wakeup per request. As many as the cores: on two busy cores
//! 16 of them halved the throughput and doubled the p99 of GET /v1/best (bench/load.sh).
int io_threads() { return std::max(2u, std::thread::hardware_concurrency()); }
//! Routes that write the database (and may wait for its lock) or move record pages run here,
//! so that an import of a large page never holds an event-loop thread.
constexpr int kSlowThreads = 8;
//! A request's header must arrive whole this long after its first byte, and a body must not stall
//! longer (a slow but steady upload is fine). Until then a half-open connection costs a socket.
constexpr auto kRequestTimeout = std::chrono::seconds(10);
//! An idle keep-alive connection is closed after this; a compiler's lookups come in bursts.
constexpr auto kIdleTimeout = std::chrono::seconds(30);
//! A client that stops reading its answer (a large records page) is dropped after this.
constexpr auto kWriteTimeout = std::chrono::seconds(30);
//! After an answer that closes the connection, the unread rest of a body is read and dropped this
//! long: closing with bytes unread makes the kernel send a reset that can discard the answer.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
//! When accept fails (out of descriptors) it is retried after this instead of spinning.
constexpr auto kAcceptRetry = std::chrono::milliseconds(50);
//! Connections open at once (lowered to the descriptor limit); the next ones are accepted and
//! closed at once, an answer the client sees, rather than left waiting in the backlog.
constexpr std::size_t kMaxConnections = 10000;
//! Descriptors left below the process limit for the database, kernel builds and measuring workers.
constexpr rlim_t kSpareDescriptors = 256;
//! Request line plus header fields. The API's are short (a token, hex keys in the query); httplib
//! allowed 8 KiB for a request line too, and std::regex matches a path recursively.
constexpr std::uint32_t kHeaderBytes = 8 << 10;
//! Read at once while waiting for a request: the one buffer an idle connection holds.
constexpr std::size_t kReadChunk = 4 << 10;

//! Serializes without throwing on invalid UTF-8 (a message may quote the caller's bytes).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(ErrorKind kind, const std::string& message) {
  return dump(json{{"error", {{"code", error_kind_name(kind)}, {"message", message}}}});
}

//! Equal-time comparison: how much of a token matched must not show in the response time.
bool same_token(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i % (a.size() + 1)] ^ b[i]);
  return diff == 0;
}

//! %XX escapes, and '+' as a space in a query.
std::string url_decode(std::string_view s, bool plus) {
  auto hex = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10; };
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += plus && s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

struct Request {
  std::string method, path, remote;
  std::map<std::string, std::string> params;  //!< decoded query parameters; the first of repeated ones
  std::vector<std::string> matches;           //!< the route pattern's groups, [0] the whole path
  http::request<http::string_body> message;
  bool too_large = false;  //!< the body went past the limit and was not read

  bool has_param(const std::string& name) const { return params.count(name) > 0; }
  std::string param(const std::string& name) const { return has_param(name) ? params.at(name) : ""; }
};

Request to_request(http::request<http::string_body> message, const std::string& remote, bool too_large) {
  Request req;
  req.method.assign(message.method_string().data(), message.method_string().size());
  std::string_view target(message.target().data(), message.target().size());
  std::size_t q = target.find('?');
  req.path = url_decode(target.substr(0, q), false);
  for (std::string_view query = q == target.npos ? "" : target.substr(q + 1); !query.empty();) {
    std::string_view pair = query.substr(0, query.find('&'));
    std::size_t eq = pair.find('=');
    if (!pair.empty())
      req.params.emplace(url_decode(pair.substr(0, eq), true),
                         eq == pair.npos ? "" : url_decode(pair.substr(eq + 1), true));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
  }
  req.remote = remote;
  req.too_large = too_large;
  req.message = std::move(message);
  return req;
}

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

json parse_body(const Request& req) {
  // Every way a body can fail to parse (syntax, a number out of double's range like 1e400) is
  // the caller's error, with nlohmann's position.
  try {
    return json::parse(req.message.body());
  } catch (const json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("malformed JSON body: ") + e.what());
  }
}

int int_param(const Request& req, const char* name, int fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.param(name);
  try {
    std::size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= 0 && n <= 1LL << 53) return static_cast<int>(std::min<long long>(n, 1 << 30));
  } catch (const std::exception&) {
  }
  throw_error(ErrorKind::InvalidInput, std::string("query parameter ") + name + " must be a non-negative integer");
}

void reply(Response& res, const json& body, int status = 200) {
  res.status = status;
  res.body = dump(body);
}

//! The routes and what every request goes through, without sockets: called on the I/O threads.
class Api {
 public:
  enum class Access { Open, Read, Write };

  Api(Service& service, HttpOptions options) : service_(service), options_(std::move(options)) { routes(); }
  std::size_t max_body_bytes() const { return options_.max_body_bytes; }

  struct Route {
    std::string method, name;
    std::regex pattern;
    Access access;
    std::function<void(const Request&, Response&)> handler;
    //! Runs on the worker pool, not on an event-loop thread: it writes the database (and may
    //! wait for its lock) or moves a page of records.
    bool slow = false;
  };

  //! The route of a request (its path groups put in `req.matches`); nullptr: none.
  const Route* find(Request& req) const {
    for (const Route& route : routes_) {
      std::smatch m;
      if (route.method != req.method || !std::regex_match(req.path, m, route.pattern)) continue;
      req.matches.assign(m.begin(), m.end());
      return &route;
    }
    return nullptr;
  }

  Response handle(const Route* route, const Request& req) const {
    if (route) return serve(*route, req);
    return {404, error_body(ErrorKind::NotFound, "no route " + req.method + " " + req.path + " (see /openapi.yaml)")};
  }

 private:
  void authorize(const Request& req, Access access) const {
    if (access == Access::Open || options_.token.empty()) return;
    if (access == Access::Read && options_.open_reads) return;
    beast::string_view value = req.message[http::field::authorization];
    const std::string header(value.data(), value.size());
    if (header.empty())
      throw_error(ErrorKind::Unauthorized, "this route needs a bearer token (Authorization: Bearer TOKEN)");
    // The scheme is case-insensitive (RFC 9110 11.1); the token is not.
    const std::string scheme = "bearer ";
    bool bearer = header.size() > scheme.size() &&
                  std::equal(scheme.begin(), scheme.end(), header.begin(),
                             [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
    if (!bearer || !same_token(header.substr(scheme.size()), options_.token))
      throw_error(ErrorKind::Forbidden, "the bearer token is not accepted");
  }

  //! Every route goes through here: authorization, the one error-to-status mapping, JSON
  //! bodies, metrics and the log line.
  Response serve(const Route& route, const Request& req) const {
    auto t0 = std::chrono::steady_clock::now();
    Response res;
    try {
      authorize(req, route.access);
      if (req.too_large)
        throw_error(ErrorKind::TooLarge,
                    "request body over the size limit of " + std::to_string(options_.max_body_bytes) + " bytes");
      route.handler(req, res);
    } catch (const Error& e) {
      res = {http_status_for(e.kind()), error_body(e.kind(), e.what())};
    } catch (const std::exception& e) {
      res = {500, error_body(ErrorKind::Internal, e.what())};
    } catch (...) {
      res = {500, error_body(ErrorKind::Internal, "unexpected failure")};
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    service_.observe_request(route.name, res.status, seconds);
    if (res.status >= 400 || req.method != "GET")
      spdlog::info("event=request method={} route={} status={} ms={:.3f} remote={}", req.method, route.name, res.status,
                   seconds * 1e3, req.remote);
    return res;
  }

  template <typename F>
  void route(const char* method, const char* pattern, const char* name, Access access, F handler, bool slow = false) {
    routes_.push_back({method, name, std::regex(pattern), access, std::move(handler), slow || access == Access::Write});
  }

  // POST bodies are JSON whatever their Content-Type: `curl -d @page.json` sends a record page as
  // form-urlencoded.
  void routes() {
    route("GET", "/healthz", "healthz", Access::Open, [](auto&, auto& res) { reply(res, {{"status", "ok"}}); });
    route("GET", "/metrics", "metrics", Access::Read, [this](auto&, auto& res) {
      res = {200, service_.metrics(), "text/plain; version=0.0.4"};
    });
    route("GET", "/openapi.yaml", "openapi", Access::Open, [](auto&, auto& res) {
      res = {200, schema_file("openapi.yaml"), "application/yaml"};
    });
    // The bodies' schemas, which openapi.yaml references.
    route("GET", "/api.schema.json", "api_schema", Access::Open, [](auto&, auto& res) {
      res = {200, schema_file("api.schema.json"), "application/schema+json"};
    });
    route("POST", "/v1/tune", "tune", Access::Write, [this](const Request& req, Response& res) {
      json out = service_.submit(parse_body(req));
      reply(res, out, out["created"].get<bool>() ? 201 : 200);
    });
    route("POST", "/v1/models", "submit_model", Access::Write, [this](const Request& req, Response& res) {
      // The body is the ONNX model's bytes; the rest is in the query.
      json request = json::object();
      for (const char* text : {"inputs", "scheduler", "strategy", "backend", "name"})
        if (req.has_param(text)) request[text] = req.param(text);
      for (const char* number : {"trials", "round"})
        if (req.has_param(number)) request[number] = int_param(req, number, 0);
      json out = service_.submit_model(req.message.body(), request);
      reply(res, out, out["created"].get<bool>() ? 201 : 200);
    });
    route("GET", R"(/v1/models/([^/]+))", "model", Access::Read,
          [this](const Request& req, Response& res) { reply(res, service_.model(req.matches[1])); });
    route("GET", "/v1/jobs", "jobs", Access::Read, [this](const Request& req, Response& res) {
      reply(res, service_.jobs(req.param("state"), int_param(req, "limit", 100)));
    });
    route("GET", R"(/v1/jobs/([^/]+))", "job", Access::Read,
          [this](const Request& req, Response& res) { reply(res, service_.job(req.matches[1])); });
    route("DELETE", R"(/v1/jobs/([^/]+))", "cancel", Access::Write,
          [this](const Request& req, Response& res) { reply(res, service_.cancel(req.matches[1])); });
    route("GET", "/v1/best", "best", Access::Read, [this](const Request& req, Response& res) {
      if (!req.has_param("workload") || !req.has_param("target"))
        throw_error(ErrorKind::InvalidInput, "GET /v1/best needs ?workload=KEY&target=KEY (or POST op text and sizes)");
      reply(res, service_.best(req.param("workload"), req.param("target")));
    });
    route("POST", "/v1/best", "best_for", Access::Read,
          [this](const Request& req, Response& res) { reply(res, service_.best_for(parse_body(req))); });
    route(
        "GET", "/v1/records", "records", Access::Read,
        [this](const Request& req, Response& res) {
          reply(res, service_.records(req.param("workload"), req.param("target"), int_param(req, "after", 0),
                                      int_param(req, "limit", 1000)));
        },
        /*slow=*/true);
    route("POST", "/v1/records", "import", Access::Write,
          [this](const Request& req, Response& res) { reply(res, service_.import_records(parse_body(req))); });
    route("POST", "/v1/workers", "register_worker", Access::Write,
          [this](const Request& req, Response& res) { reply(res, service_.register_worker(parse_body(req)), 201); });
    route("POST", R"(/v1/workers/([^/]+)/lease)", "lease", Access::Write, [this](const Request& req, Response& res) {
      auto task = service_.lease(req.matches[1]);
      if (task)
        reply(res, *task);
      else
        res.status = 204;  // nothing to measure now
    });
    route("POST", R"(/v1/leases/([^/]+))", "lease_results", Access::Write, [this](const Request& req, Response& res) {
      reply(res, service_.complete_lease(req.matches[1], parse_body(req)));
    });
    // The dashboard: its page and scripts are open (they hold no data, and a browser loads
    // them before it has a token); what they draw comes from the read routes below.
    route("GET", "/", "dashboard_page", Access::Open,
          [](auto&, auto& res) { res = {200, web_file("index.html"), "text/html; charset=utf-8"}; });
    route("GET", R"(/ui/([A-Za-z0-9_./-]+))", "dashboard_file", Access::Open, [](const Request& req, Response& res) {
      const std::string& name = req.matches[1];
      if (name.find("..") != std::string::npos) throw_error(ErrorKind::NotFound, "no file '" + name + "'");
      res = {200, web_file(name), web_content_type(name)};
    });
    route(
        "GET", "/v1/dashboard", "dashboard", Access::Read,
        [this](auto&, auto& res) { reply(res, service_.dashboard()); }, /*slow=*/true);
    route(
        "GET", "/v1/dashboard/workload", "dashboard_workload", Access::Read,
        [this](const Request& req, Response& res) {
          if (!req.has_param("workload") || !req.has_param("target"))
            throw_error(ErrorKind::InvalidInput, "GET /v1/dashboard/workload needs ?workload=KEY&target=KEY");
          dashboard::WorkloadQuery q;
          q.workload = req.param("workload");
          q.target = req.param("target");
          q.x = req.param("x");
          q.y = req.param("y");
          q.filters = dashboard::parse_filters(req.param("filter"));
          q.max_points = static_cast<int>(std::clamp<std::int64_t>(int_param(req, "points", 4000), 1, 100000));
          reply(res, service_.dashboard_workload(q));
        },
        /*slow=*/true);
    route(
        "GET", "/v1/dashboard/model", "dashboard_model", Access::Read,
        [this](const Request& req, Response& res) {
          if (!req.has_param("target")) throw_error(ErrorKind::InvalidInput, "GET /v1/dashboard/model needs ?target=KEY");
          reply(res, service_.dashboard_model(req.param("target"), req.param("kind"), req.param("workload")));
        },
        /*slow=*/true);
    route("GET", "/v1/ops", "ops", Access::Read, [this](auto&, auto& res) { reply(res, service_.ops()); });
    route("GET", "/v1/targets", "targets", Access::Read, [this](auto&, auto& res) { reply(res, service_.targets()); });
  }

  Service& service_;
  HttpOptions options_;
  std::vector<Route> routes_;
};

//! One client connection, on its own strand of the I/O thread. Reads a request, hands it to the
//! route, writes the answer; idle, it holds a socket and a small buffer.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const Api& api, net::thread_pool& pool, std::atomic<std::size_t>& open)
      : stream_(std::move(socket)), api_(api), pool_(pool), open_(open) {
    ++open_;
    error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);  // small answers must not wait for delayed ACKs (40 ms)
    remote_ = stream_.socket().remote_endpoint(ec).address().to_string();
  }
  ~Connection() { --open_; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->wait(); });
  }

 private:
  void wait() {
    if (buffer_.size() > 0) return read_header();  // the next request came with the last one
    buffer_.shrink_to_fit();
    stream_.expires_after(kIdleTimeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (ec) return;  // closed by the client, or idle too long
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(kHeaderBytes);
    parser_->body_limit(api_.max_body_bytes());  // a declared Content-Length over it fails here, unread
    stream_.expires_after(kRequestTimeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->refuse(ec);
      if (!beast::iequals(self->parser_->get()[http::field::expect], "100-continue")) return self->read_body();
      // curl asks before sending a large body and would otherwise wait a second.
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(self->stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self](error_code ec, std::size_t) {
                         if (!ec) self->read_body();
                       });
    });
  }

  void read_body() {
    if (parser_->is_done()) return serve(false);
    stream_.expires_after(kRequestTimeout);
    http::async_read_some(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->refuse(ec);
      self->read_body();
    });
  }

  //! A request that cannot be read: answer what the client can fix, drop the rest silently.
  void refuse(error_code ec) {
    if (ec == http::error::body_limit) return serve(true);  // the route still checks the token first
    if (ec == http::error::header_limit) {
      // Still in the request line (nothing parsed, no line end within the limit): 414.
      auto data = buffer_.data();
      std::string_view head(static_cast<const char*>(data.data()), std::min<std::size_t>(data.size(), kHeaderBytes));
      bool line = parser_->get().target().empty() && head.find("\r\n") == head.npos;
      std::string what = line ? "request line" : "request header";
      return respond({line ? 414 : 431,
                      error_body(ErrorKind::InvalidInput, what + " over " + std::to_string(kHeaderBytes) + " bytes")},
                     11, false);
    }
    bool http_error = ec.category() == http::make_error_code(http::error::bad_target).category();
    if (http_error && ec != http::error::end_of_stream && ec != http::error::partial_message)
      respond({400, error_body(ErrorKind::InvalidInput, "malformed request: " + ec.message())}, 11, false);
  }

  void serve(bool too_large) {
    auto message = parser_->release();
    parser_.reset();
    unsigned version = message.version();
    bool keep = !too_large && message.keep_alive();  // HTTP/1.0 closes unless it asks otherwise
    if (too_large) message.body().clear();
    Request req = to_request(std::move(message), remote_, too_large);
    const Api::Route* route = api_.find(req);
    if (!route || !route->slow) return respond(api_.handle(route, req), version, keep);
    // Answered from the pool thread: nothing else of this connection is in flight meanwhile.
    net::post(pool_, [self = shared_from_this(), route, req = std::move(req), version, keep] {
      self->respond(self->api_.handle(route, req), version, keep);
    });
  }

  void respond(Response r, unsigned version, bool keep) {
    res_.version(version);
    res_.result(static_cast<unsigned>(r.status));
    res_.keep_alive(keep);
    if (!r.body.empty()) res_.set(http::field::content_type, r.content_type);
    res_.body() = std::move(r.body);
    if (r.status != 204) res_.prepare_payload();  // a 204 has no Content-Length
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, res_, [self = shared_from_this(), keep](error_code ec, std::size_t) {
      self->res_ = {};  // a records page can be large: an idle connection keeps none of it
      if (ec) return;
      if (keep)
        self->wait();
      else
        self->linger();
    });
  }

  void linger() {
    error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTimeout);
    drain();
  }

  void drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, std::size_t) {
      if (!ec) self->drain();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;  //!< only while a request is read
  http::response<http::string_body> res_;                          //!< only while it is written
  std::string remote_;
  const Api& api_;
  net::thread_pool& pool_;
  std::atomic<std::size_t>& open_;
};

//! Raises the soft limit on open descriptors to the hard one (each connection is one); returns it.
rlim_t raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  rlimit want = lim;
  want.rlim_cur = lim.rlim_max;
  if (lim.rlim_cur < lim.rlim_max && setrlimit(RLIMIT_NOFILE, &want) == 0) return want.rlim_cur;
  return lim.rlim_cur;  // an unlimited hard limit cannot be the soft one on Linux: keep what there is
}

}  // namespace

// Members in this order: connections still in the io_context go with it, before the counter.
struct HttpServer::Impl {
  Impl(Service& service, HttpOptions o) : options(o), api(service, std::move(o)) {}

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (ec) {
        pause.expires_after(kAcceptRetry);
        return pause.async_wait([this](error_code e) {
          if (!e) accept();
        });
      }
      if (open < max_open) std::make_shared<Connection>(std::move(socket), api, pool, open)->start();
      accept();  // over the limit, `socket` closes here
    });
  }

  HttpOptions options;
  Api api;
  std::atomic<std::size_t> open{0};
  std::size_t max_open = kMaxConnections;
  int port = 0;
  net::io_context ioc{io_threads()};  // run by run() and its threads
  tcp::acceptor acceptor{ioc};
  net::steady_timer pause{ioc};
  net::thread_pool pool{kSlowThreads};
};

HttpServer::HttpServer(Service& service, HttpOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  auto& m = *impl_;
  rlim_t limit = raise_descriptor_limit();
  m.max_open = std::min<rlim_t>(kMaxConnections, limit - std::min<rlim_t>(kSpareDescriptors, limit / 2));
  error_code ec;
  tcp::resolver resolver(m.ioc);
  auto endpoints = resolver.resolve(m.options.host, std::to_string(m.options.port), tcp::resolver::passive, ec);
  for (const auto& entry : endpoints) {
    m.acceptor.open(entry.endpoint().protocol(), ec);
    if (!ec) m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) m.acceptor.bind(entry.endpoint(), ec);
    if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (!ec) break;
    m.acceptor.close(ec);
  }
  if (!m.acceptor.is_open())
    throw_error(ErrorKind::Io, "cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) +
                                   " (in use, or not an address of this machine)");
  m.port = m.acceptor.local_endpoint().port();
  return m.port;
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() {
  auto& m = *impl_;
  if (!m.acceptor.is_open()) bind();
  m.accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < io_threads(); ++i) threads.emplace_back([&m] { m.ioc.run(); });
  m.ioc.run();  // until stop(); at once if stop() came first
  for (auto& t : threads) t.join();
  m.pool.join();  // requests in flight finish before the caller stops the Service
  error_code ec;
  m.acceptor.close(ec);
}

// io_context::stop is thread-safe and sticks: run() returns, or returns at once if it comes later.
void HttpServer::stop() { impl_->ioc.stop(); }

}  // namespace tiletune::server
