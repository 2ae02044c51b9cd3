// tests/server/daemon_harness.hpp: a daemon in this process (Service + HttpServer on a free
// loopback port) and a raw HTTP client for it.
#pragma once
#include <httplib.h>

#include <thread>

#include "helpers.hpp"
#include "server/http.hpp"
#include "server/service.hpp"

namespace tiletune::test {

struct DaemonOptions {
  std::string token = "tok";
  bool open_reads = false;
  std::size_t max_body = 1 << 20;
  bool start_jobs = true;     //!< false: jobs are accepted and stay queued
  double slice_seconds = 60;  //!< ServiceOptions::slice_seconds
};

class InProcessDaemon {
 public:
  explicit InProcessDaemon(const std::string& db, DaemonOptions o = {})
      : service_(service_options(db, o)), http_(service_, http_options(o)) {
    port_ = http_.bind();
    if (o.start_jobs) service_.start();
    thread_ = std::thread([this] { http_.run(); });
  }
  ~InProcessDaemon() {
    http_.stop();
    thread_.join();
    service_.stop();
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  server::Service& service() { return service_; }
  //! A client that sends the token (or another one, or none).
  httplib::Client client(const std::string& token = "tok") const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (!token.empty()) c.set_bearer_token_auth(token.c_str());
    return c;
  }

 private:
  static server::ServiceOptions service_options(const std::string& db, const DaemonOptions& o) {
    server::ServiceOptions s;
    s.slice_seconds = o.slice_seconds;
    s.db_path = db;
    s.job_defaults.measure.cache_dir = kernel_cache();
    s.job_defaults.measure.timeout_s = 2;
    s.job_defaults.measure.min_seconds = 0.002;
    s.job_defaults.batch_size = 4;
    s.lease_seconds = 2;
    s.unclaimed_seconds = 2;
    return s;
  }
  static server::HttpOptions http_options(const DaemonOptions& o) {
    server::HttpOptions h;
    h.token = o.token;
    h.open_reads = o.open_reads;
    h.max_body_bytes = o.max_body;
    return h;
  }
  server::Service service_;
  server::HttpServer http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace tiletune::test
