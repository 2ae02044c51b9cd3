// server/http_status.hpp
#pragma once
#include "support/error.hpp"

namespace tiletune::server {

//! The one place where an error becomes an HTTP status (the CLI's is cli/exit_codes.cpp).
int http_status_for(ErrorKind kind);

}  // namespace tiletune::server
