#include <map>
#include <mutex>

#include "codegen/backend.hpp"
#include "support/error.hpp"

namespace tiletune::codegen {

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
