// codegen/backend.hpp
#pragma once
#include <functional>
#include <memory>
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
};

//! Target traits as JSON (stored with the target, so that a remote target can be searched) and
//! back; missing fields keep their defaults, Error(InvalidInput) on malformed text.
std::string traits_to_json(const ir::TargetTraits& t);
ir::TargetTraits traits_from_json(const std::string& json);

//! A loaded kernel, callable in the measuring process.
class Kernel {
 public:
  virtual ~Kernel() = default;
  //! tensors: inputs then outputs in declaration order; workspace: LoopNest::workspace_floats.
  virtual void run(float* const* tensors, float* workspace) = 0;
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
  //! File name extension of emitted source (".cpp").
  virtual std::string source_extension() const = 0;
  //! Compiles `source_path` into `artifact_path`. Returns "" on success, else the compiler log.
  virtual std::string build(const std::string& source_path, const std::string& artifact_path) const = 0;
  //! The backend whose load() runs this backend's artifacts in a measuring worker; a backend
  //! that decorates another (fault injection, a vendor wrapper) returns the inner one's name.
  virtual std::string runtime() const { return name(); }
  //! Loads a built artifact. Throws Error(Io) if it cannot.
  virtual std::unique_ptr<Kernel> load(const std::string& artifact_path) const = 0;
};

struct BackendOptions {
  int threads = 0;           //!< 0: all cores
  std::string compiler;      //!< "" : the backend's default
};

using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendOptions&)>;

//! Registers a backend under a name; in-tree backends register in register_builtin_backends().
void register_backend(const std::string& name, const std::string& description, BackendFactory factory);
void register_builtin_backends();
//! Makes a backend by name; an unknown name is Error(InvalidInput) listing the known ones.
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options = {});
std::vector<std::pair<std::string, std::string>> list_backends();  //!< name, description

}  // namespace tiletune::codegen
