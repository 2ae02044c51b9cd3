// codegen/gpu_kernel.hpp — internal to codegen/: what the work-group backends (OpenCL, CUDA)
// share: one emitter for both C dialects, and the artifact that carries a built program with
// the launches it needs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <mutex>

#include "codegen/backend.hpp"
#include "ir/loop_nest.hpp"

namespace tiletune::codegen {

enum class GpuDialect { OpenCL, Cuda };

//! One kernel launch: a 1-D grid of `groups` work-groups of `items` work-items each.
struct Launch {
  std::string kernel;
  std::int64_t groups = 1;
  std::int64_t items = 1;
};

//! Source of one kernel per stage (launched in stage order), each taking every tensor (inputs,
//! then outputs) and the workspace. A spatial axis tiled {G, r} gives work-groups of G points
//! and work-items of r points (the register tile); tiled {r}, work-groups of one item of r
//! points. Reduction loops run in each item in the config's order; a pack stages the input
//! tile a work-group reads in one step of them in local memory. A vectorized axis computes in
//! vector types (OpenCL); with `split_vectors` (always for CUDA, which has no vector arithmetic)
//! the math stays scalar and only aligned loads and stores move 4 floats at a time. The first
//! line records the launches (read_launches).
std::string emit_gpu_kernel(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json,
                            GpuDialect dialect, bool split_vectors = false);

//! The first line of emitted source (a comment): its launches, for read_launches.
std::string launch_line(const std::vector<Launch>& launches);
//! The launches recorded in emitted source; Error(InvalidInput) if there are none.
std::vector<Launch> read_launches(const std::string& source);

//! A built program: its launches and the device binary, in one file.
struct GpuArtifact {
  std::vector<Launch> launches;
  std::string binary;
};
void write_gpu_artifact(const std::string& path, const GpuArtifact& artifact);
GpuArtifact read_gpu_artifact(const std::string& path);  //!< Error(Io) if unreadable or malformed

//! What the OpenCL and CUDA backends share: the emitter in their dialect and a target that is
//! described once, on first use (a measuring worker that only loads never pays for it).
class WorkGroupBackend : public Backend {
 public:
  WorkGroupBackend(const BackendOptions& options, std::string name, std::string extension, GpuDialect dialect)
      : options_(options), name_(std::move(name)), extension_(std::move(extension)), dialect_(dialect) {}
  std::string name() const override { return name_; }
  std::string source_extension() const override { return extension_; }
  const TargetInfo& target() const override {
    std::call_once(once_, [this] {
      target_.backend = name_;
      target_.device = options_.device;
      describe(target_);
    });
    return target_;
  }
  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json) const override {
    require_f32_only(w, "the " + name() + " backend", true);
    return emit_gpu_kernel(w, nest, config_json, dialect_);
  }

 protected:
  //! Fills the fingerprint, keys and traits; throws Error(Unavailable) without a device.
  virtual void describe(TargetInfo& t) const = 0;
  BackendOptions options_;

 private:
  std::string name_, extension_;
  GpuDialect dialect_;
  mutable std::once_flag once_;
  mutable TargetInfo target_;
};

}  // namespace tiletune::codegen
