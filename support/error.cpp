#include "support/error.hpp"

namespace tiletune {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidInput:
      return "invalid_input";
    case ErrorKind::NotFound:
      return "not_found";
    case ErrorKind::Io:
      return "io";
    case ErrorKind::Database:
      return "database";
    case ErrorKind::Build:
      return "build";
    case ErrorKind::Internal:
      return "internal";
    case ErrorKind::Unauthorized:
      return "unauthorized";
    case ErrorKind::Forbidden:
      return "forbidden";
    case ErrorKind::Conflict:
      return "conflict";
    case ErrorKind::TooLarge:
      return "payload_too_large";
    case ErrorKind::Unavailable:
      return "unavailable";
  }
  return "internal";
}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace tiletune
