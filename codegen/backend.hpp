// codegen/backend.hpp
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ir/loop_nest.hpp"

namespace tiletune::codegen {

//! Where kernels run: the backend on one device with one toolchain.
struct TargetInfo {
  std::string backend;           //!< "cpu"
  std::string key;               //!< hash of fingerprint_json: records are shared per key
  std::string family;            //!< device identity without the toolchain: lookup fallback
  std::string fingerprint_json;  //!< device, ISA, cores, compiler, flags, codegen version
  ir::TargetTraits traits;
  std::string device;  //!< BackendOptions::device it was made with: a measuring worker opens the same
};

//! The device family of an in-tree backend's device: hash of {"backend", "device"}, the part of
//! the fingerprint without the toolchain.
std::string device_family(const std::string& backend, const nlohmann::json& device);
//! The family a stored fingerprint implies, when it is an in-tree backend's (it names its
//! "backend" and "device"); nullopt for a plug-in's, whose family the plug-in chooses.
std::optional<std::string> family_from_fingerprint(const std::string& fingerprint_json);

//! Target traits as JSON (stored with the target, so that a remote target can be searched) and
//! back; missing fields keep their defaults, Error(InvalidInput) on malformed text.
std::string traits_to_json(const ir::TargetTraits& t);
ir::TargetTraits traits_from_json(const std::string& json);

//! The memory a kernel works on, in floats: each tensor (inputs, then outputs, in
//! declaration order) and the workspace (LoopNest::workspace_floats).
struct KernelShape {
  std::vector<std::int64_t> tensor_floats;
  std::int64_t workspace_floats = 0;
};

//! A loaded kernel, callable in the measuring process.
class Kernel {
 public:
  enum Flags : unsigned {
    kUpload = 1,    //!< the inputs changed since the last run (a device copies them in)
    kDownload = 2,  //!< the caller reads the outputs after this run (a device copies them out)
  };
  virtual ~Kernel() = default;
  //! Runs once on host tensors and returns the seconds the device spent on it (a device with
  //! its own memory times the kernels, not the copies, and a CPU kernel with a prepare entry
  //! point packs its constant inputs under kUpload, untimed). Throws Error on failure.
  virtual double run(float* const* tensors, float* workspace, unsigned flags) = 0;
};

//! The symbols of a kernel a caller links against, with their C declarations. The CPU's are
//! unique per kernel and take the caller's thread count in a second entry; the measuring worker
//! always loads `tt_kernel`.
struct CallAbi {
  std::string entry_point = "tt_kernel";
  std::string signature;                               //!< "" where the source's kernel says it (GPU)
  std::string threads_entry_point, threads_signature;  //!< "" where the caller cannot choose
  //! ENTRY_prepare(tensors, workspace, threads): packs the op's constant inputs into the
  //! workspace, to be called before the first call and whenever they change; the calls then
  //! keep that workspace. "" when the kernel packs nothing constant (or the backend has none).
  std::string prepare_entry_point, prepare_signature;
};

//! What a backend can do. Implementations live in their .cpp and are made by name.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  //! Describes this machine's device and toolchain; computed once per backend object.
  virtual const TargetInfo& target() const = 0;
  //! Source text of the kernel for a lowered workload: deterministic, human-readable.
  virtual std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) const = 0;
  //! How a caller calls this workload's kernel under this config (the README's kernel ABI),
  //! `nest` lowered for the target its source is generated for (see emit_for).
  virtual CallAbi call_abi(const ir::Workload& /*w*/, const ir::LoopNest& /*nest*/,
                           const std::string& /*config_json*/) const {
    return CallAbi{};
  }
  //! Source for another target of this backend (a record measured elsewhere: its thread count,
  //! its SIMD width), `nest` lowered for `traits`. By default the nest says all there is.
  virtual std::string emit_for(const ir::TargetTraits& /*traits*/, const ir::Workload& w, const ir::LoopNest& nest,
                               const std::string& config_json) const {
    return emit(w, nest, config_json);
  }
  //! File name extension of emitted source (".cpp").
  virtual std::string source_extension() const = 0;
  //! Compiles `source_path` into `artifact_path`. Returns "" on success, else the compiler log.
  virtual std::string build(const std::string& source_path, const std::string& artifact_path) const = 0;
  //! The backend whose load() runs this backend's artifacts in a measuring worker; a backend
  //! that decorates another (fault injection, a vendor wrapper) returns the inner one's name.
  virtual std::string runtime() const { return name(); }
  //! Loads a built artifact for tensors of `shape`. Throws Error(Io) if it cannot, and
  //! Error(Unavailable) when the device is missing.
  virtual std::unique_ptr<Kernel> load(const std::string& artifact_path, const KernelShape& shape) const = 0;
};

//! Error(InvalidInput) naming `who` and the op's first typed tensor unless the workload is
//! f32 throughout (ir::Workload::f32_only): for backends whose kernels compute f32 only.
//! With `halves`, bf16 and f16 tensors are allowed too (stored in 16 bits, computed in f32).
void require_f32_only(const ir::Workload& w, const std::string& who, bool halves = false);

//! The backend used when none is named (CLI, REST requests).
inline constexpr const char* kDefaultBackend = "cpu";

struct BackendOptions {
  int threads = 0;       //!< 0: all cores
  std::string compiler;  //!< "" : the backend's default
  std::string device;    //!< backend-specific choice of device ("" : the first one)
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

//! Registers a backend under a name; in-tree backends register in register_builtin_backends(),
//! plug-ins in load_backend_plugin(), which records `origin` (the plug-in's path) so that a
//! measuring worker can load the same plug-in.
void register_backend(const std::string& name, const std::string& description, BackendFactory factory,
                      const std::string& origin = "");
void register_builtin_backends();
//! The plug-in a backend came from; "" for an in-tree one. Error(InvalidInput) if unknown.
std::string backend_origin(const std::string& name);
//! Loads a backend plug-in (include/tiletune/backend_plugin.h) and registers it; returns its
//! name. A file that cannot be loaded, a missing entry point, another ABI version or a failing
//! initialisation is Error(InvalidInput) that says which. Loading the same file again is a no-op.
std::string load_backend_plugin(const std::string& path);
//! Makes a backend by name; an unknown name is Error(InvalidInput) listing the known ones.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});
std::vector<std::pair<std::string, std::string>> list_backends();  //!< name, description

}  // namespace tiletune::codegen
