// tests/server/daemon_process.hpp: `tiletune serve` as a child process, and waiting on its jobs.
#pragma once
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "client/client.hpp"
#include "helpers.hpp"

namespace tiletune::test {

//! `tiletune serve` in a child process; its output goes to a file the test reads for the port.
class DaemonProcess {
 public:
  DaemonProcess(const std::string& db, const std::string& log, const char* lease_seconds = "120",
                std::vector<std::string> more = {})
      : log_(log) {
    std::string exe = std::string(TILETUNE_BINARY_DIR) + "/tiletune";
    std::vector<std::string> args = {exe,           "serve",           "--db",       db,        "--listen",
                                     "127.0.0.1:0", "--token",         "tok",        "--cache", kernel_cache(),
                                     "--min-time",  "0.002",           "--timeout",  "5",       "--batch",
                                     "4",           "--lease-seconds", lease_seconds};
    args.insert(args.end(), more.begin(), more.end());
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(exe.c_str(), argv.data());
      _exit(127);
    }
    // Wait for "listening on http://127.0.0.1:PORT" (LibTorch makes the start take a second).
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < end && port_ == 0) {
      std::ifstream in(log);
      std::string line;
      while (std::getline(in, line)) {
        auto at = line.find("listening on http://127.0.0.1:");
        if (at != std::string::npos) port_ = std::stoi(line.substr(at + 30));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(port_ > 0);
  }
  ~DaemonProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  //! Waits until a line of the daemon's log contains `needle`; false when the time ran out first.
  bool wait_for_log(const std::string& needle, double timeout_s) const {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    do {
      std::ifstream in(log_);
      std::string line;
      while (std::getline(in, line))
        if (line.find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < end);
    return false;
  }
  pid_t pid() const { return pid_; }
  void kill_hard() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  //! SIGTERM, then the exit status (or -1 if it did not exit within the time).
  int terminate(double timeout_s) {
    kill(pid_, SIGTERM);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

inline client::Job wait_for(client::Client& c, const std::string& id, std::function<bool(const client::Job&)> until,
                            double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  client::Job j = c.job(id);
  while (!until(j) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    j = c.job(id);
  }
  return j;
}

}  // namespace tiletune::test
