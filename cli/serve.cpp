// `tiletune serve`: the daemon. Boost.Asio waits for SIGTERM/SIGINT; Boost.Beast serves (server/http.cpp).
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "server/http.hpp"
#include "server/service.hpp"
#include "support/error.hpp"

namespace tiletune::cli {

namespace {

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

}  // namespace

std::string read_token(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_error(ErrorKind::Io, "cannot read the token file " + path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) throw_error(ErrorKind::InvalidInput, "the token file " + path + " is empty");
  return token;
}

int run_serve(const CommonOptions& c, const tuner::TuneOptions& t, const ServeOptions& s, server::ServiceOptions so) {
  auto colon = s.listen.rfind(':');
  if (colon == std::string::npos)
    throw_error(ErrorKind::InvalidInput, "--listen wants HOST:PORT, got '" + s.listen + "'");
  server::HttpOptions http;
  http.host = s.listen.substr(0, colon);
  try {
    http.port = std::stoi(s.listen.substr(colon + 1));
  } catch (const std::exception&) {
    throw_error(ErrorKind::InvalidInput, "--listen wants HOST:PORT, got '" + s.listen + "'");
  }
  http.token = !s.token_file.empty() ? read_token(s.token_file) : s.token;
  http.open_reads = s.open_reads;
  if (s.max_body_mb > 0) http.max_body_bytes = s.max_body_mb << 20;
  if (!loopback(http.host) && http.token.empty())
    throw_error(ErrorKind::InvalidInput,
                "listening on " + http.host + " beyond this machine needs a token (--token-file)");

  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e level=%l %v");
  so.db_path = c.db;
  so.job_defaults = t;
  so.job_defaults.measure.cache_dir = c.cache_dir;
  so.backend = c.backend_options;
  server::Service service(so);
  server::HttpServer server(service, http);
  int port = server.bind();
  service.start();

  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    spdlog::info("event=shutdown signal={} note=\"in-flight batch finishes, its job is queued again\"", signo);
    server.stop();
  });
  std::thread signal_thread([&] { signals_io.run(); });

  std::cout << "tiletune: listening on http://" << http.host << ":" << port << " database " << c.db
            << (http.token.empty() ? " (no token: every route open)" : "") << std::endl;
  spdlog::info("event=listening host={} port={} db={}", http.host, port, c.db);
  server.run();
  service.stop();
  signals_io.stop();
  signal_thread.join();
  spdlog::info("event=stopped");
  return kOk;
}

}  // namespace tiletune::cli
