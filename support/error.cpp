#include "support/error.hpp"

namespace tiletune {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidInput: return "invalid_input";
    case ErrorKind::NotFound: return "not_found";
    case ErrorKind::Io: return "io";
    case ErrorKind::Database: return "database";
    case ErrorKind::Build: return "build";
    case ErrorKind::Internal: return "internal";
  }
  return "internal";
}

void throw_error(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace tiletune
