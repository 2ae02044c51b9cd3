// The README's daemon commands, run as written (the port, and the ids the README leaves to the
// reader, filled in): a compiler engineer starts from them.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "helpers.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using nlohmann::json;

namespace {

//! The indented command lines of the README section that starts with `heading`.
std::vector<std::string> commands(const std::string& heading) {
  std::string readme = test::source_file("README.md");
  std::size_t at = readme.find("\n" + heading + "\n");
  REQUIRE(at != std::string::npos);
  std::size_t end = readme.find("\n## ", at + 1);
  std::istringstream section(readme.substr(at, end - at));
  std::vector<std::string> out;
  for (std::string line; std::getline(section, line);)
    if (line.rfind("    ", 0) == 0) out.push_back(line.substr(4));
  return out;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("readme: the daemon's commands work as the README writes them") {
  auto lines = commands("## The daemon");
  REQUIRE(lines.size() >= 10);
  test::TempDir dir;
  std::ofstream(dir.file("token.txt")) << "readme-token\n";
  const std::string port = std::to_string(free_port());
  auto localize = [&](std::string line) {
    line = replace_all(line, "localhost:8080", "127.0.0.1:" + port);
    line = replace_all(line, "127.0.0.1:8080", "127.0.0.1:" + port);
    return replace_all(line, "build/tiletune", std::string(TILETUNE_BINARY_DIR) + "/tiletune");
  };
  REQUIRE(lines[0].rfind("build/tiletune serve", 0) == 0);
  pid_t daemon = fork();
  REQUIRE(daemon >= 0);
  if (daemon == 0) {
    if (chdir(dir.path.c_str()) != 0) _exit(127);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl("/bin/sh", "sh", "-c", ("exec " + localize(lines[0])).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // The daemon goes when the test ends, however it ends.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{daemon};
  std::string token_line;
  for (auto& l : lines)
    if (l.rfind("T=", 0) == 0) token_line = l;
  REQUIRE(!token_line.empty());
  // Runs one README line in the README's shell setting: in the folder of token.txt, with $T.
  auto sh = [&](const std::string& line) {
    return run_process({"bash", "-c", "cd '" + dir.path.string() + "' && " + token_line + " && " + localize(line)}, 60);
  };
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    up = sh("curl -s localhost:8080/healthz").output.find("ok") != std::string::npos;
  }
  REQUIRE(up);
  std::map<std::string, std::string> ids;  // what the README leaves to the reader
  int run = 0;
  for (auto& line : lines) {
    if (line.rfind("curl", 0) != 0) continue;
    std::string filled = line.substr(0, line.find("  #"));  // the README's comments
    for (auto& [name, value] : ids) filled = replace_all(filled, name, value);
    if (filled.find("JOB_ID") != std::string::npos || filled.find("KEY") != std::string::npos) continue;
    CAPTURE(filled);
    // Each curl also reports its status, on stderr, which a redirected body does not take.
    auto r = sh(replace_all(filled, "curl ", "curl -s -w '%{stderr}\\nHTTP %{http_code}\\n' "));
    CHECK(r.ok());
    std::smatch status;
    std::string out = r.output;
    REQUIRE(std::regex_search(out, status, std::regex("HTTP (\\d+)")));
    int code = std::stoi(status[1]);
    CAPTURE(out);
    // Nothing is tuned yet, so a lookup may say 404; nothing else may fail.
    CHECK((code < 400 || (code == 404 && filled.find("/v1/best") != std::string::npos)));
    ++run;
    if (filled.find("/v1/tune") != std::string::npos) {
      json answer = json::parse(out.substr(0, out.rfind("\nHTTP")));
      ids["JOB_ID"] = answer["job"]["id"];
    }
    if (filled.find("/v1/records") != std::string::npos && filled.find("-d @") != std::string::npos)
      CHECK(json::parse(out.substr(0, out.rfind("\nHTTP"))).contains("imported"));
  }
  CHECK(ids.count("JOB_ID") == 1);  // the job lines ran with the id the tune line returned
  CHECK(run >= 7);                  // every curl line but the one that needs keys of a measured kernel
}
