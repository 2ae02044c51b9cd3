#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "codegen/backend.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"

namespace tiletune::codegen {

std::string traits_to_json(const ir::TargetTraits& t) {
  return nlohmann::json{{"vector_lanes", t.vector_lanes},
                        {"vector_registers", t.vector_registers},
                        {"threads", t.threads},
                        {"l1_bytes", t.l1_bytes},
                        {"l2_bytes", t.l2_bytes},
                        {"l3_bytes", t.l3_bytes},
                        {"max_group_size", t.max_group_size},
                        {"local_bytes", t.local_bytes}}
      .dump();
}

void require_f32_only(const ir::Workload& w, const std::string& who, bool halves) {
  auto allowed = [&](ir::DType t) {
    return t == ir::DType::F32 || (halves && (t == ir::DType::BF16 || t == ir::DType::F16));
  };
  std::string what;
  for (auto& b : w.buffers)
    if (!allowed(b.dtype)) {
      what = "has the " + std::string(ir::dtype_name(b.dtype)) + " tensor '" + b.name + "'";
      break;
    }
  if (what.empty() && !w.computes_in(ir::DType::F32)) what = "computes in i32";  // i32 arithmetic runs on the cpu only
  if (what.empty()) return;
  throw_error(ErrorKind::InvalidInput, who + " runs " + (halves ? "f32, bf16 and f16" : "f32") + " ops only, and op '" +
                                           w.op.name + "' " + what + " (typed ops run on the cpu backend)");
}

std::string device_family(const std::string& backend, const nlohmann::json& device) {
  return hash_hex(nlohmann::json({{"backend", backend}, {"device", device}}).dump());
}

std::optional<std::string> family_from_fingerprint(const std::string& fingerprint_json) {
  nlohmann::json fp = nlohmann::json::parse(fingerprint_json, nullptr, false);
  if (!fp.is_object() || !fp.contains("device") || !fp.contains("backend") || !fp["backend"].is_string())
    return std::nullopt;
  return device_family(fp["backend"].get<std::string>(), fp["device"]);
}

ir::TargetTraits traits_from_json(const std::string& text) {
  ir::TargetTraits t;
  if (text.empty()) return t;
  try {
    auto j = nlohmann::json::parse(text);
    t.vector_lanes = j.value("vector_lanes", t.vector_lanes);
    t.vector_registers = j.value("vector_registers", t.vector_registers);
    t.threads = j.value("threads", t.threads);
    t.l1_bytes = j.value("l1_bytes", t.l1_bytes);
    t.l2_bytes = j.value("l2_bytes", t.l2_bytes);
    t.l3_bytes = j.value("l3_bytes", t.l3_bytes);
    t.max_group_size = j.value("max_group_size", t.max_group_size);
    t.local_bytes = j.value("local_bytes", t.local_bytes);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("target traits: ") + e.what());
  }
  if (t.vector_lanes < 1 || t.vector_lanes > 1024 || t.vector_registers < 1 || t.threads < 1 || t.threads > 4096 ||
      t.max_group_size < 0 || t.max_group_size > 65536 || t.local_bytes < 0)
    throw_error(ErrorKind::InvalidInput, "target traits out of range: " + text);
  return t;
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);     // cpu_backend.cpp
std::unique_ptr<Backend> make_opencl_backend(const BackendOptions& options);  // opencl_backend.cpp
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);    // cuda_backend.cpp

namespace {
struct Entry {
  std::string description;
  BackendFactory factory;
  std::string origin;
};
std::mutex registry_mutex;
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, register_builtin_backends);
}
}  // namespace

void register_backend(const std::string& name, const std::string& description, BackendFactory factory,
                      const std::string& origin) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[name] = {description, std::move(factory), origin};
}

void register_builtin_backends() {
  register_backend("cpu", "C++ for this CPU, built by the system compiler with OpenMP", make_cpu_backend);
  register_backend("opencl", "OpenCL C for the first OpenCL device (a GPU if there is one; PoCL runs it on CPUs)",
                   make_opencl_backend);
  register_backend("cuda", "CUDA C for NVIDIA GPUs, built by nvcc, run through the CUDA driver", make_cuda_backend);
}

namespace {
Entry find(const std::string& name) {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (auto& [n, e] : registry()) known += (known.empty() ? "" : ", ") + n;
    throw_error(ErrorKind::InvalidInput, "unknown backend '" + name + "'; known backends: " + known +
                                             " (a plug-in backend needs --backend-plugin PATH.so)");
  }
  return it->second;
}
}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  return find(name).factory(options);
}

std::string backend_origin(const std::string& name) { return find(name).origin; }

std::vector<std::pair<std::string, std::string>> list_backends() {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [n, e] : registry()) out.emplace_back(n, e.description);
  return out;
}

}  // namespace tiletune::codegen
