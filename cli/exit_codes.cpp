#include "cli/exit_codes.hpp"

namespace tiletune::cli {

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidInput:
      return kUsage;
    case ErrorKind::NotFound:
      return kNotFound;
    case ErrorKind::Io:
      return kIoError;
    case ErrorKind::Database:
      return kDatabaseError;
    case ErrorKind::Build:
      return kBuildError;
    case ErrorKind::Internal:
      return kInternalError;
    case ErrorKind::Unauthorized:
    case ErrorKind::Forbidden:
      return kDenied;
    case ErrorKind::Conflict:
    case ErrorKind::TooLarge:
      return kUsage;
    case ErrorKind::Unavailable:
      return kIoError;
  }
  return kInternalError;
}

const char* exit_code_help() {
  return "Exit codes: 0 ok, 1 no correct kernel found, 2 bad arguments or op text, 3 not found,\n"
         "4 I/O or network error, 5 database error, 6 build error, 7 token missing or refused, 70 internal error.";
}

}  // namespace tiletune::cli
