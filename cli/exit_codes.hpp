// cli/exit_codes.hpp
#pragma once
#include "support/error.hpp"

namespace tiletune::cli {

//! The exit codes of the tiletune command, documented in `tiletune --help`.
enum ExitCode : int {
  kOk = 0,
  kNoResult = 1,  //!< the command ran but found no correct kernel
  kUsage = 2,     //!< bad arguments, op text, sizes or config
  kNotFound = 3,  //!< no such op, suite, file or record
  kIoError = 4,
  kDatabaseError = 5,
  kBuildError = 6,  //!< the compiler failed where it must not (the reference kernel)
  kDenied = 7,      //!< a daemon refused the token
  kInternalError = 70,
};

//! The one place where an error becomes an exit code.
int exit_code_for(ErrorKind kind);

//! Text for --help listing the codes.
const char* exit_code_help();

}  // namespace tiletune::cli
