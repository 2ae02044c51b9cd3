#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "codegen/backend.hpp"
#include "support/error.hpp"

namespace tiletune::codegen {

std::string traits_to_json(const ir::TargetTraits& t) {
  return nlohmann::json{{"vector_lanes", t.vector_lanes}, {"vector_registers", t.vector_registers},
                        {"threads", t.threads},           {"l1_bytes", t.l1_bytes},
                        {"l2_bytes", t.l2_bytes},         {"l3_bytes", t.l3_bytes}}
      .dump();
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
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::InvalidInput, std::string("target traits: ") + e.what());
  }
  if (t.vector_lanes < 1 || t.vector_lanes > 1024 || t.vector_registers < 1 || t.threads < 1 || t.threads > 4096)
    throw_error(ErrorKind::InvalidInput, "target traits out of range: " + text);
  return t;
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options);  // cpu_backend.cpp

namespace {
struct Entry {
  std::string description;
  BackendFactory factory;
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

void register_backend(const std::string& name, const std::string& description, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[name] = {description, std::move(factory)};
}

void register_builtin_backends() {
  register_backend("cpu", "C++ for this CPU, built by the system compiler with OpenMP", make_cpu_backend);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  ensure_builtins();
  BackendFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto it = registry().find(name);
    if (it == registry().end()) {
      std::string known;
      for (auto& [n, e] : registry()) known += (known.empty() ? "" : ", ") + n;
      throw_error(ErrorKind::InvalidInput, "unknown backend '" + name + "'; known backends: " + known);
    }
    factory = it->second.factory;
  }
  return factory(options);
}

std::vector<std::pair<std::string, std::string>> list_backends() {
  ensure_builtins();
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [n, e] : registry()) out.emplace_back(n, e.description);
  return out;
}

}  // namespace tiletune::codegen
