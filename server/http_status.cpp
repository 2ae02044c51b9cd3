#include "server/http_status.hpp"

namespace tiletune::server {

int http_status_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::InvalidInput:
      return 400;
    case ErrorKind::Unauthorized:
      return 401;
    case ErrorKind::Forbidden:
      return 403;
    case ErrorKind::NotFound:
      return 404;
    case ErrorKind::Conflict:
      return 409;
    case ErrorKind::TooLarge:
      return 413;
    case ErrorKind::Unavailable:
      return 503;
    case ErrorKind::Io:
    case ErrorKind::Database:
    case ErrorKind::Build:
    case ErrorKind::Internal:
      return 500;
  }
  return 500;
}

}  // namespace tiletune::server
