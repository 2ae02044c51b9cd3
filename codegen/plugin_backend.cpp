// Backend plug-ins: a shared library filling a tt_plugin table (include/tiletune/backend_plugin.h)
// becomes a Backend in the same registry as the in-tree ones.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "codegen/backend.hpp"
#include "ir/program_json.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"
#include "tiletune/backend_plugin.h"

namespace tiletune::codegen {

namespace {

constexpr size_t kMessageBytes = 16384;

//! A message buffer for one call; what() is the plug-in's text, or a default when it wrote none.
struct Message {
  char text[kMessageBytes] = {};
  std::string what(const std::string& fallback) const {
    std::string s(text, strnlen(text, kMessageBytes));
    return s.empty() ? fallback : s;
  }
};

//! The program minor version a plug-in reads: what it declares, up to this tiletune's; 0 for a
//! table from before abi_minor (a smaller struct_size), whose fields past its size are zero.
std::uint32_t minor(const tt_plugin& p) {
  if (p.struct_size < offsetof(tt_plugin, abi_minor) + sizeof p.abi_minor) return 0;
  return std::min<std::uint32_t>(p.abi_minor, TT_PLUGIN_ABI_MINOR);
}

class PluginKernel : public Kernel {
 public:
  PluginKernel(const tt_plugin& p, void* kernel) : p_(p), kernel_(kernel) {}
  ~PluginKernel() override { p_.unload(kernel_); }
  double run(float* const* tensors, float* workspace, unsigned flags) override {
    Message m;
    double seconds = 0;
    if (p_.run(kernel_, tensors, workspace, flags, &seconds, m.text, kMessageBytes) != 0)
      throw_error(ErrorKind::Internal, std::string(p_.name) + " plug-in: " + m.what("running the kernel failed"));
    // A time that is not a positive number would rank the candidate first.
    if (!(seconds > 0) || !std::isfinite(seconds))
      throw_error(ErrorKind::Internal,
                  std::string(p_.name) + " plug-in: run reported " + std::to_string(seconds) + " seconds");
    return seconds;
  }

 private:
  const tt_plugin& p_;
  void* kernel_;
};

class PluginBackend : public Backend {
 public:
  PluginBackend(const tt_plugin& p, const BackendOptions& options) : p_(p) {
    Message m;
    nlohmann::json o = {{"threads", options.threads}, {"compiler", options.compiler}, {"device", options.device}};
    self_ = p_.create(o.dump().c_str(), m.text, kMessageBytes);
    if (!self_)
      throw_error(ErrorKind::InvalidInput, name() + " plug-in failed to initialise: " + m.what("create returned NULL"));
    device_ = options.device;
  }
  ~PluginBackend() override { p_.destroy(self_); }

  std::string name() const override { return p_.name; }
  std::string source_extension() const override { return p_.source_extension; }

  const TargetInfo& target() const override {
    std::call_once(once_, [this] {
      std::lock_guard<std::mutex> lock(calls_);
      tt_target t{};
      Message m;
      if (p_.describe(self_, &t, m.text, kMessageBytes) != 0 || !t.fingerprint_json)
        throw_error(ErrorKind::Unavailable,
                    name() + " plug-in cannot describe its target: " + m.what("describe failed"));
      // The backend's name is part of the fingerprint: two plug-ins never share records.
      target_.backend = name();
      target_.device = device_;
      target_.fingerprint_json =
          nlohmann::json({{"backend", name()}, {"plugin", std::string(t.fingerprint_json)}}).dump();
      target_.key = hash_hex(target_.fingerprint_json);
      target_.family = hash_hex(name() + "\n" + (t.family_json ? t.family_json : t.fingerprint_json));
      target_.traits.vector_lanes = t.vector_lanes;
      target_.traits.vector_registers = t.vector_registers;
      target_.traits.threads = t.threads;
      target_.traits.max_group_size = t.max_group_size;
      target_.traits.local_bytes = t.local_bytes;
      if (t.l1_bytes > 0) target_.traits.l1_bytes = t.l1_bytes;
      if (t.l2_bytes > 0) target_.traits.l2_bytes = t.l2_bytes;
      if (t.l3_bytes > 0) target_.traits.l3_bytes = t.l3_bytes;
      // The same limits a stored target must meet.
      target_.traits = traits_from_json(traits_to_json(target_.traits));
    });
    return target_;
  }

  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) const override {
    // Padded reads and element types came with ABI 1.1: a plug-in reading 1.0 would read past
    // a padded input's border or treat bytes as floats, so such ops are refused by name.
    if (minor(p_) < 1) {
      const std::string who = name() + " plug-in (ABI version 1.0)";
      for (auto& b : w.buffers)
        if (b.pad)
          throw_error(ErrorKind::InvalidInput, who + " cannot emit op '" + w.op.name + "': input '" + b.name +
                                                   "' is padded, and padded reads came with plug-in ABI 1.1");
      require_f32_only(w, who);
    }
    Message m;
    std::string program = ir::program_to_json(w, nest, config_json);
    std::lock_guard<std::mutex> lock(calls_);
    char* text = p_.emit(self_, program.c_str(), m.text, kMessageBytes);
    // A config the plug-in cannot express is an invalid config for this backend.
    if (!text)
      throw_error(ErrorKind::InvalidInput, name() + " plug-in cannot emit this config: " + m.what("emit failed"));
    std::string source(text);
    p_.free_text(text);
    return source;
  }

  std::string build(const std::string& source_path, const std::string& artifact_path) const override {
    Message m;
    if (p_.build(self_, source_path.c_str(), artifact_path.c_str(), m.text, kMessageBytes) == 0) return "";
    return m.what(name() + " plug-in: build failed without a log");
  }

  std::unique_ptr<Kernel> load(const std::string& artifact_path, const KernelShape& shape) const override {
    Message m;
    std::lock_guard<std::mutex> lock(calls_);
    void* k =
        p_.load(self_, artifact_path.c_str(), shape.tensor_floats.data(),
                static_cast<std::int32_t>(shape.tensor_floats.size()), shape.workspace_floats, m.text, kMessageBytes);
    if (!k) throw_error(ErrorKind::Io, name() + " plug-in cannot load " + artifact_path + ": " + m.what("load failed"));
    return std::make_unique<PluginKernel>(p_, k);
  }

 private:
  const tt_plugin& p_;
  void* self_ = nullptr;
  std::string device_;
  mutable std::once_flag once_;
  mutable TargetInfo target_;
  //! The header promises an instance one caller at a time (build excepted); the daemon's
  //! request threads and its job thread share one instance.
  mutable std::mutex calls_;
};

//! Plug-ins stay loaded for the life of the process: their tables back registered backends.
struct Loaded {
  tt_plugin table{};
  std::string name;
};
std::mutex plugins_mutex;
std::map<std::string, Loaded>& plugins() {
  static std::map<std::string, Loaded> p;
  return p;
}

}  // namespace

std::string load_backend_plugin(const std::string& given) {
  std::lock_guard<std::mutex> lock(plugins_mutex);
  // One library, however it is named: ./x.so and /abs/x.so are the same plug-in.
  std::error_code ec;
  std::string path = std::filesystem::exists(given, ec) ? std::filesystem::canonical(given, ec).string() : given;
  if (path.empty()) path = given;
  auto found = plugins().find(path);
  if (found != plugins().end()) return found->second.name;
  void* handle = nullptr;
  auto fail = [&](const std::string& why) {
    if (handle) dlclose(handle);
    throw_error(ErrorKind::InvalidInput, "backend plug-in " + given + ": " + why);
  };
  handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) fail(std::string("cannot be loaded: ") + dlerror());
  auto init = reinterpret_cast<tt_plugin_init_fn>(dlsym(handle, TT_PLUGIN_ENTRY));
  if (!init) fail(std::string("has no entry point ") + TT_PLUGIN_ENTRY + " (is it a tiletune backend plug-in?)");
  Loaded loaded;
  Message m;
  if (init(TT_PLUGIN_ABI_VERSION, &loaded.table, m.text, kMessageBytes) != 0)
    fail("failed to initialise: " + m.what("tt_plugin_init returned an error"));
  const tt_plugin& t = loaded.table;
  if (t.abi_version != TT_PLUGIN_ABI_VERSION)
    fail("was built for plug-in ABI version " + std::to_string(t.abi_version) + "; this tiletune speaks version " +
         std::to_string(TT_PLUGIN_ABI_VERSION) + ": rebuild it against this tiletune's backend_plugin.h");
  if (t.struct_size < offsetof(tt_plugin, abi_minor))
    fail("fills a smaller tt_plugin table than ABI version 1 defines");
  if (!t.name || !std::regex_match(t.name, std::regex("[a-z0-9_-]{1,64}")))
    fail("names itself '" + std::string(t.name ? t.name : "") + "'; a backend name is 1-64 of [a-z0-9_-]");
  std::string name = t.name;
  const char* missing = !t.create             ? "create"
                        : !t.destroy          ? "destroy"
                        : !t.describe         ? "describe"
                        : !t.emit             ? "emit"
                        : !t.free_text        ? "free_text"
                        : !t.build            ? "build"
                        : !t.load             ? "load"
                        : !t.run              ? "run"
                        : !t.unload           ? "unload"
                        : !t.source_extension ? "source_extension"
                                              : nullptr;
  if (missing) fail("leaves " + std::string(missing) + " unset in its tt_plugin table");
  for (auto& [name_, e] : list_backends())
    if (name_ == name && backend_origin(name) != path) fail("registers backend '" + name + "', which is already taken");
  Loaded& stored = plugins()[path] = loaded;
  register_backend(
      name, t.description ? t.description : "plug-in " + path,
      [&table = stored.table](const BackendOptions& options) {
        return std::make_unique<PluginBackend>(table, options);
      },
      path);
  stored.name = name;
  return name;
}

}  // namespace tiletune::codegen
