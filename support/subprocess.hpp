// support/subprocess.hpp
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tiletune {

struct ProcessResult {
  int exit_code = -1;   //!< valid when the process exited
  int term_signal = 0;  //!< the signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string output;  //!< stdout and stderr interleaved, truncated to max_output bytes
  double seconds = 0;
  bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
  //! "exit code 3", "killed by SIGSEGV", "timed out after 2.0 s"
  std::string describe() const;
};

//! Runs argv[0] (searched in PATH) in its own process group, no shell involved. On timeout
//! the whole group is killed with SIGKILL. Throws Error(Io) only if the process cannot start:
//! no pipe or fork, or no program to exec ("cannot run PATH: No such file or directory").
//! `niceness` > 0 lowers the child's CPU priority and runs it under SCHED_IDLE (builds:
//! throughput work that must not delay a daemon's answers or a measurement). `memory_bytes` > 0
//! caps the address space of the child and of each process it starts (RLIMIT_AS): a program
//! that needs more fails its allocations instead of taking the machine's memory.
inline constexpr size_t kDefaultMaxOutput = size_t{1} << 20;
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s, size_t max_output = kDefaultMaxOutput,
                          int niceness = 0, std::uint64_t memory_bytes = 0);

//! run_process for a probe whose absence is an answer (`cc --version`): a program that cannot
//! start gives a result that is not ok(), not an error.
ProcessResult probe_process(const std::vector<std::string>& argv, double timeout_s);

//! Path of the running executable's folder (from /proc/self/exe).
std::string executable_dir();

}  // namespace tiletune
