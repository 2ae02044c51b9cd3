// support/error.hpp
#pragma once
#include <stdexcept>
#include <string>

namespace tiletune {

//! What kind of failure ended a request. The CLI maps it to an exit code and the daemon to an
//! HTTP status in exactly one place each (cli/exit_codes.cpp, server/http_status.cpp).
enum class ErrorKind {
  InvalidInput,  //!< malformed op text, unknown size, bad config or JSON: the caller must fix it
  NotFound,      //!< no such op, workload, record or file
  Io,            //!< file system or process failure
  Database,      //!< SQLite refused or the schema is from the future
  Build,         //!< the system compiler failed on code that tiletune generated
  Internal,      //!< a bug in tiletune
  Unauthorized,  //!< a request that needs a token came without one
  Forbidden,     //!< the token is wrong
  Conflict,      //!< the request contradicts the state (cancelling a finished job)
  TooLarge,      //!< a body or batch over the limits
  Unavailable,   //!< the service is shutting down
};

//! The one exception type that crosses module boundaries; `kind` says who is at fault.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

//! Short stable name of a kind ("invalid_input", ...), used in JSON error bodies and logs.
const char* error_kind_name(ErrorKind kind);

[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

}  // namespace tiletune
