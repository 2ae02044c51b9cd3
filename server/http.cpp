#include "server/http.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "server/http_status.hpp"
#include "server/schemas.hpp"
#include "support/error.hpp"

namespace tiletune::server {

using nlohmann::json;

namespace {

constexpr int kHttpThreads = 128;       //!< connections served at once
constexpr int kKeepAliveSeconds = 2;    //!< an idle keep-alive connection is closed after this
constexpr int kReadTimeoutSeconds = 5;  //!< a request that does not arrive whole in this time is dropped

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

json parse_body(const httplib::Request& req) {
  // Every way a body can fail to parse (syntax, a number out of double's range like 1e400) is
  // the caller's error, with nlohmann's position.
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("malformed JSON body: ") + e.what());
  }
}

int int_param(const httplib::Request& req, const char* name, int fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  try {
    std::size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= 0 && n <= 1LL << 53) return static_cast<int>(std::min<long long>(n, 1 << 30));
  } catch (const std::exception&) {
  }
  throw_error(ErrorKind::InvalidInput, std::string("query parameter ") + name + " must be a non-negative integer");
}

}  // namespace

struct HttpServer::Impl {
  Service& service;
  HttpOptions options;
  httplib::Server http;
  int port = 0;

  enum class Access { Open, Read, Write };

  Impl(Service& s, HttpOptions o) : service(s), options(std::move(o)) {}

  void authorize(const httplib::Request& req, Access access) const {
    if (access == Access::Open || options.token.empty()) return;
    if (access == Access::Read && options.open_reads) return;
    const std::string header = req.get_header_value("Authorization");
    if (header.empty())
      throw_error(ErrorKind::Unauthorized, "this route needs a bearer token (Authorization: Bearer TOKEN)");
    // The scheme is case-insensitive (RFC 9110 11.1); the token is not.
    const std::string scheme = "bearer ";
    bool bearer = header.size() > scheme.size() &&
                  std::equal(scheme.begin(), scheme.end(), header.begin(),
                             [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
    if (!bearer || !same_token(header.substr(scheme.size()), options.token))
      throw_error(ErrorKind::Forbidden, "the bearer token is not accepted");
  }

  //! Every route goes through here: authorization, the one error-to-status mapping, JSON
  //! bodies, metrics and the log line.
  template <typename F>
  void route(const char* method, const std::string& pattern, const std::string& name, Access access, F handler) {
    // `too_large`: the body went past the limit and was not read whole.
    auto wrapped = [this, name, access, handler, method](const httplib::Request& req, httplib::Response& res,
                                                         bool too_large) {
      auto t0 = std::chrono::steady_clock::now();
      try {
        authorize(req, access);
        if (too_large)
          throw_error(ErrorKind::TooLarge,
                      "request body over the size limit of " + std::to_string(options.max_body_bytes) + " bytes");
        handler(req, res);
      } catch (const Error& e) {
        res.status = http_status_for(e.kind());
        res.set_content(error_body(e.kind(), e.what()), "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(error_body(ErrorKind::Internal, e.what()), "application/json");
      }
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      service.observe_request(name, res.status, seconds);
      if (res.status >= 400 || std::string(method) != "GET")
        spdlog::info("event=request method={} route={} status={} ms={:.3f} remote={}", method, name, res.status,
                     seconds * 1e3, req.remote_addr);
    };
    auto whole = [wrapped](const httplib::Request& req, httplib::Response& res) { wrapped(req, res, false); };
    std::string m = method;
    if (m == "GET")
      http.Get(pattern, whole);
    else if (m == "POST")
      // Bodies are JSON whatever their Content-Type: `curl -d @page.json` sends a large record
      // page as form-urlencoded, which httplib would otherwise cap at 8 KiB and parse as
      // parameters. Reading through a content reader takes the raw bytes, within the body limit.
      http.Post(pattern, [this, wrapped](const httplib::Request& req, httplib::Response& res,
                                         const httplib::ContentReader& reader) {
        httplib::Request with_body = req;
        with_body.body.clear();
        bool too_large = false;
        bool read = reader([&](const char* data, std::size_t n) {
          too_large = with_body.body.size() + n > options.max_body_bytes;
          if (!too_large) with_body.body.append(data, n);
          return !too_large;
        });
        // httplib refuses a declared length over the limit itself (413) before any byte is read.
        wrapped(with_body, res, too_large || (!read && res.status == 413));
      });
    else if (m == "DELETE")
      http.Delete(pattern, whole);
  }

  static void reply(httplib::Response& res, const json& body, int status = 200) {
    res.status = status;
    res.set_content(dump(body), "application/json");
  }

  void routes() {
    route("GET", "/healthz", "healthz", Access::Open, [](auto&, auto& res) { reply(res, {{"status", "ok"}}); });
    route("GET", "/metrics", "metrics", Access::Read,
          [this](auto&, auto& res) { res.set_content(service.metrics(), "text/plain; version=0.0.4"); });
    route("GET", "/openapi.yaml", "openapi", Access::Open,
          [](auto&, auto& res) { res.set_content(schema_file("openapi.yaml"), "application/yaml"); });
    // The bodies' schemas, which openapi.yaml references.
    route("GET", "/api.schema.json", "api_schema", Access::Open,
          [](auto&, auto& res) { res.set_content(schema_file("api.schema.json"), "application/schema+json"); });
    route("POST", "/v1/tune", "tune", Access::Write, [this](const httplib::Request& req, httplib::Response& res) {
      json out = service.submit(parse_body(req));
      reply(res, out, out["created"].get<bool>() ? 201 : 200);
    });
    route("GET", "/v1/jobs", "jobs", Access::Read, [this](const httplib::Request& req, httplib::Response& res) {
      reply(res, service.jobs(req.get_param_value("state"), int_param(req, "limit", 100)));
    });
    route("GET", R"(/v1/jobs/([^/]+))", "job", Access::Read,
          [this](const httplib::Request& req, httplib::Response& res) { reply(res, service.job(req.matches[1])); });
    route("DELETE", R"(/v1/jobs/([^/]+))", "cancel", Access::Write,
          [this](const httplib::Request& req, httplib::Response& res) { reply(res, service.cancel(req.matches[1])); });
    route("GET", "/v1/best", "best", Access::Read, [this](const httplib::Request& req, httplib::Response& res) {
      if (!req.has_param("workload") || !req.has_param("target"))
        throw_error(ErrorKind::InvalidInput, "GET /v1/best needs ?workload=KEY&target=KEY (or POST op text and sizes)");
      reply(res, service.best(req.get_param_value("workload"), req.get_param_value("target")));
    });
    route("POST", "/v1/best", "best_for", Access::Read, [this](const httplib::Request& req, httplib::Response& res) {
      reply(res, service.best_for(parse_body(req)));
    });
    route("GET", "/v1/records", "records", Access::Read, [this](const httplib::Request& req, httplib::Response& res) {
      reply(res, service.records(req.get_param_value("workload"), req.get_param_value("target"),
                                 int_param(req, "after", 0), int_param(req, "limit", 1000)));
    });
    route("POST", "/v1/records", "import", Access::Write, [this](const httplib::Request& req, httplib::Response& res) {
      reply(res, service.import_records(parse_body(req)));
    });
    route("POST", "/v1/workers", "register_worker", Access::Write,
          [this](const httplib::Request& req, httplib::Response& res) {
            reply(res, service.register_worker(parse_body(req)), 201);
          });
    route("POST", R"(/v1/workers/([^/]+)/lease)", "lease", Access::Write,
          [this](const httplib::Request& req, httplib::Response& res) {
            auto task = service.lease(req.matches[1]);
            if (task)
              reply(res, *task);
            else
              res.status = 204;  // nothing to measure now
          });
    route("POST", R"(/v1/leases/([^/]+))", "lease_results", Access::Write,
          [this](const httplib::Request& req, httplib::Response& res) {
            reply(res, service.complete_lease(req.matches[1], parse_body(req)));
          });
    route("GET", "/v1/ops", "ops", Access::Read, [this](auto&, auto& res) { reply(res, service.ops()); });
    route("GET", "/v1/targets", "targets", Access::Read, [this](auto&, auto& res) { reply(res, service.targets()); });

    // What httplib answers itself (unknown route, oversized body) gets the same JSON shape.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty() && res.body.front() == '{') return;
      ErrorKind kind = res.status == 413   ? ErrorKind::TooLarge
                       : res.status == 404 ? ErrorKind::NotFound
                                           : ErrorKind::InvalidInput;
      std::string message = res.status == 413   ? "request body over the size limit"
                            : res.status == 404 ? "no route " + req.method + " " + req.path + " (see /openapi.yaml)"
                                                : "malformed request";
      res.set_content(error_body(kind, message), "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content(error_body(ErrorKind::Internal, "unexpected failure"), "application/json");
    });
    http.set_payload_max_length(options.max_body_bytes);
    http.set_keep_alive_max_count(1000000);
    http.set_tcp_nodelay(true);  // small answers must not wait for delayed ACKs (40 ms)
    // cpp-httplib gives each connection a pool thread for as long as it is open: an idle
    // keep-alive connection holds one until the keep-alive timeout, a half-open one until the
    // read timeout. Short timeouts and a pool wider than the clients a daemon serves keep new
    // requests from waiting behind them (this is not yet an event loop: see the README's limits).
    http.set_keep_alive_timeout(kKeepAliveSeconds);
    http.set_read_timeout(kReadTimeoutSeconds, 0);
    http.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  }
};

HttpServer::HttpServer(Service& service, HttpOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  auto& m = *impl_;
  if (m.options.port == 0) {
    m.port = m.http.bind_to_any_port(m.options.host);
  } else {
    m.port = m.http.bind_to_port(m.options.host, m.options.port) ? m.options.port : -1;
  }
  if (m.port <= 0)
    throw_error(ErrorKind::Io, "cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) +
                                   " (in use, or not an address of this machine)");
  return m.port;
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
  if (impl_->http.is_running()) impl_->http.stop();
}

}  // namespace tiletune::server
