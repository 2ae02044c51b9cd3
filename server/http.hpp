// server/http.hpp
#pragma once
#include <memory>
#include <string>

#include "server/service.hpp"

namespace tiletune::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;             //!< 0: any free port (see HttpServer::port)
  std::string token;        //!< bearer token; "" leaves every route open
  bool open_reads = false;  //!< GET routes need no token
  std::size_t max_body_bytes = 32 << 20;
};

//! The REST API of schemas/openapi.yaml over a Service, served by Boost.Beast (an event loop whose
//! threads also answer lookups; writes run on a pool; idle connections hold no thread). Errors are JSON
//! {"error": {"code", "message"}} with the status of server/http_status.hpp; bad input is
//! never a 500.
class HttpServer {
 public:
  HttpServer(Service& service, HttpOptions options);
  ~HttpServer();
  //! Binds the socket; Error(Io) if it cannot. Returns the port.
  int bind();
  int port() const;
  //! Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiletune::server
