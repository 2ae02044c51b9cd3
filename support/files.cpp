#include "support/files.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "support/error.hpp"

namespace tiletune {

std::string unique_suffix() {
  static const std::uint64_t token = std::random_device{}();
  static std::atomic<std::uint64_t> counter{0};
  return std::to_string(getpid()) + "-" + std::to_string(token % 1000000007) + "-" + std::to_string(counter++);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + unique_suffix();
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.flush()) throw_error(ErrorKind::Io, "cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_error(ErrorKind::Io, "cannot write " + path);
  }
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorKind::Io, "cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tiletune
