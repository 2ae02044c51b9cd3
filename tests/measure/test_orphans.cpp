// What a killed tuner leaves behind: its children die with it, and the next one cleans the
// half-written files of the cache.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "helpers.hpp"
#include "measure/measure.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
namespace fs = std::filesystem;

namespace {

//! Whether a process whose command line contains `marker` is running.
bool running(const std::string& marker) {
  for (auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (auto& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(marker) != std::string::npos) return true;
  }
  return false;
}

//! The pid of a process that has exited.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST_CASE("orphans: a process run by a killed parent dies with it") {
  // A duration no other process uses marks the child.
  const std::string seconds = "37.4" + std::to_string(getpid() % 1000), marker = "sleep " + seconds;
  pid_t parent = fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    run_process({"sleep", seconds}, 120);
    _exit(0);
  }
  bool started = false;
  for (int i = 0; i < 100 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    started = running(marker);
  }
  REQUIRE(started);
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gone = !running(marker);
  }
  CHECK(gone);
}

TEST_CASE("orphans: half-written files of dead writers are removed, a live writer's are kept") {
  test::TempDir dir;
  std::string cache = dir.path.string();
  fs::create_directories(cache + "/kernels/ab");
  fs::create_directories(cache + "/reference");
  pid_t dead = dead_pid();
  std::string pid_dead = std::to_string(dead), pid_live = std::to_string(getpid());
  auto touch = [](const std::string& path) { std::ofstream(path) << "x"; };
  std::string dead_so = cache + "/kernels/ab/k1.tmp." + pid_dead + "-17-0.so";
  std::string dead_req = cache + "/kernels/k2.so.req." + pid_dead + "-17-1.json";
  std::string dead_ref = cache + "/reference/r.bin.tmp." + pid_dead + "-17-2";
  std::string live_so = cache + "/kernels/k3.tmp." + pid_live + "-5-0.so";
  std::string artifact = cache + "/kernels/k4.so";
  std::string odd = cache + "/kernels/k5.tmp.notapid-1.so";
  for (auto& p : {dead_so, dead_req, dead_ref, live_so, artifact, odd}) touch(p);
  CHECK(measure::remove_orphans(cache) == 3);
  CHECK_FALSE(fs::exists(dead_so));
  CHECK_FALSE(fs::exists(dead_req));
  CHECK_FALSE(fs::exists(dead_ref));
  CHECK(fs::exists(live_so));
  CHECK(fs::exists(artifact));
  CHECK(fs::exists(odd));
  CHECK(measure::remove_orphans(cache + "/missing") == 0);
}
