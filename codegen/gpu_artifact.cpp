// The launch records of emitted GPU source and the built-artifact file (see gpu_kernel.hpp): the
// formats the OpenCL and CUDA backends write and read back.
#include <fstream>
#include <nlohmann/json.hpp>

#include "codegen/gpu_kernel.hpp"
#include "support/error.hpp"
#include "support/files.hpp"

namespace tiletune::codegen {

namespace {

constexpr const char* kLaunchTag = "// tt-launch: ";
constexpr const char* kArtifactMagic = "TTGPU1\n";

//! Launches as one line of JSON: what read_launches parses back.
std::string launches_json(const std::vector<Launch>& launches) {
  nlohmann::json j = nlohmann::json::array();
  for (auto& l : launches) j.push_back({{"kernel", l.kernel}, {"groups", l.groups}, {"items", l.items}});
  return j.dump();
}

}  // namespace

std::string launch_line(const std::vector<Launch>& launches) { return kLaunchTag + launches_json(launches); }

std::vector<Launch> read_launches(const std::string& source) {
  std::vector<Launch> out;
  if (source.rfind(kLaunchTag, 0) == 0) {
    size_t from = std::string(kLaunchTag).size();
    auto j = nlohmann::json::parse(source.substr(from, source.find('\n') - from), nullptr, false);
    try {
      if (j.is_array())
        for (auto& l : j) {
          Launch launch{l.at("kernel").get<std::string>(), l.at("groups").get<std::int64_t>(),
                        l.at("items").get<std::int64_t>()};
          if (launch.groups < 1 || launch.items < 1 || launch.kernel.empty())
            throw_error(ErrorKind::InvalidInput, "a kernel launch needs a name and positive groups and items");
          out.push_back(launch);
        }
    } catch (const nlohmann::json::exception& e) {
      throw_error(ErrorKind::InvalidInput, std::string("malformed kernel launches: ") + e.what());
    }
  }
  if (out.empty())
    throw_error(ErrorKind::InvalidInput,
                "the source records no kernel launches (first line '" + std::string(kLaunchTag) + "...')");
  return out;
}

void write_gpu_artifact(const std::string& path, const GpuArtifact& artifact) {
  std::ofstream out(path, std::ios::binary);
  out << kArtifactMagic << launches_json(artifact.launches) << "\n" << artifact.binary;
  if (!out) throw_error(ErrorKind::Io, "cannot write " + path);
}

GpuArtifact read_gpu_artifact(const std::string& path) {
  std::string text = read_text_file(path);
  std::string magic = kArtifactMagic;
  auto eol = text.find('\n', magic.size());
  if (text.rfind(magic, 0) != 0 || eol == std::string::npos)
    throw_error(ErrorKind::Io, "cannot read kernel artifact " + path + ": missing or not a tiletune GPU artifact");
  GpuArtifact a;
  try {
    a.launches = read_launches(kLaunchTag + text.substr(magic.size(), eol - magic.size()) + "\n");
  } catch (const Error& e) {
    throw_error(ErrorKind::Io, "kernel artifact " + path + ": " + e.what());
  }
  a.binary = text.substr(eol + 1);
  return a;
}

}  // namespace tiletune::codegen
