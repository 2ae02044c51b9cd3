#include "support/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "support/error.hpp"

namespace tiletune {

std::string ProcessResult::describe() const {
  if (timed_out) return "timed out after " + std::to_string(seconds).substr(0, 5) + " s";
  if (term_signal) {
    const char* name = sigabbrev_np(term_signal);
    return std::string("killed by SIG") + (name ? name : std::to_string(term_signal).c_str());
  }
  return "exit code " + std::to_string(exit_code);
}

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s, size_t max_output, int niceness,
                          std::uint64_t memory_bytes) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_error(ErrorKind::Io, std::string("pipe: ") + std::strerror(errno));
  // The child reports a failed exec here (its errno); a successful exec closes the pipe empty.
  int exec_status[2];
  if (pipe2(exec_status, O_CLOEXEC) != 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw_error(ErrorKind::Io, std::string("pipe: ") + std::strerror(err));
  }
  // Everything the child needs is prepared before fork: a child of a threaded process may
  // only make async-signal-safe calls (no malloc) until exec.
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {fds[0], fds[1], exec_status[0], exec_status[1]}) close(fd);
    throw_error(ErrorKind::Io, std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    // The child dies with the thread that waits for it, so a killed daemon or CLI leaves no
    // compiler or measuring worker behind; a parent already gone before this line counts too.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    if (niceness > 0) {
      setpriority(PRIO_PROCESS, 0, niceness);
      // SCHED_IDLE: the child runs only on a core nothing else wants, so a daemon's lookups are
      // not queued behind a compiler (a niced process still takes a share of a busy core).
      sched_param none{};
      sched_setscheduler(0, SCHED_IDLE, &none);
    }
    if (memory_bytes > 0) {
      rlimit cap{static_cast<rlim_t>(memory_bytes), static_cast<rlim_t>(memory_bytes)};
      setrlimit(RLIMIT_AS, &cap);
    }
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execvp(args[0], args.data());
    const int err = errno;
    ssize_t ignored = write(exec_status[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so the group exists before any kill below
  close(fds[1]);
  close(exec_status[1]);
  // A program that cannot start is the caller's environment at fault (a missing or unexecutable
  // file), not a result of the program: an error, where exit code 127 would read as one.
  int exec_errno = 0;
  ssize_t got_status;
  while ((got_status = read(exec_status[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(exec_status[0]);
  if (got_status == static_cast<ssize_t>(sizeof exec_errno)) {
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    throw_error(ErrorKind::Io, "cannot run " + argv[0] + ": " + std::strerror(exec_errno));
  }
  ProcessResult r;
  auto deadline = start + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  bool open_pipe = true;
  while (open_pipe) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) {
      open_pipe = false;
    } else if (r.output.size() < max_output) {
      r.output.append(buf, std::min<size_t>(static_cast<size_t>(got), max_output - r.output.size()));
    }
  }
  close(fds[0]);
  if (r.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  // The pipe closed: the child is exiting. Wait for it, but never forever.
  while (true) {
    pid_t w = waitpid(pid, &status, r.timed_out ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(1000);
  }
  // A kernel may leave grandchildren (OpenMP does not, but be safe): end the group.
  kill(-pid, SIGKILL);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  }
  return r;
}

ProcessResult probe_process(const std::vector<std::string>& argv, double timeout_s) {
  try {
    return run_process(argv, timeout_s);
  } catch (const Error&) {
    return {};
  }
}

std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

}  // namespace tiletune
