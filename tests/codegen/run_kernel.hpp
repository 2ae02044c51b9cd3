// tests/codegen/run_kernel.hpp — one kernel run in the test process, on any backend
#pragma once
#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/dtype.hpp"
#include "ir/loop_nest.hpp"
#include "measure/protocol.hpp"

namespace tiletune::test {

//! Tensors as raw memory, inputs then outputs, with their types: one float per element, so
//! that f32 tensors are plain vectors and narrower types fit.
struct Tensors {
  std::vector<std::vector<float>> mem;
  std::vector<ir::DType> type;
  double at(size_t t, std::int64_t i) const { return ir::load_element(type[t], mem[t].data(), i); }
};

//! Runs a schedule of `w` on `be` in this process, on the measuring worker's deterministic
//! inputs (seed 7), generated for `be`'s target or for `traits` (another SIMD width). Outputs
//! and workspace start NaN, so that an element a kernel skips shows.
inline Tensors run_kernel(const codegen::Backend& be, const ir::Workload& w, const ir::Schedule& s, const TempDir& dir,
                          const std::optional<ir::TargetTraits>& traits = std::nullopt) {
  ir::LoopNest nest = ir::lower(w, s, traits ? *traits : be.target().traits);
  std::string name =
      be.name() + "-" + w.key + "-" + s.key() + (traits ? "-" + std::to_string(traits->vector_lanes) : "");
  std::string src = dir.file(name + be.source_extension()), lib = dir.file(name + ".so");
  std::ofstream(src) << (traits ? be.emit_for(*traits, w, nest, s.to_json()) : be.emit(w, nest, s.to_json()));
  std::string log = be.build(src, lib);
  REQUIRE_MESSAGE(log.empty(), log);
  codegen::KernelShape shape;
  for (auto& b : w.buffers)
    if (b.role != ir::Buffer::Role::Temp) shape.tensor_floats.push_back(b.elements());
  shape.workspace_floats = nest.workspace_floats;
  auto kernel = be.load(lib, shape);
  Tensors t;
  int index = 0;
  for (auto& b : w.buffers) {
    if (b.role == ir::Buffer::Role::Temp) continue;
    t.mem.emplace_back(b.elements(), NAN);  // room for an element of any type
    t.type.push_back(b.dtype);
    if (b.role == ir::Buffer::Role::Input) measure::fill_input(b.dtype, t.mem.back().data(), b.elements(), 7, index++);
  }
  std::vector<float*> args;
  for (auto& v : t.mem) args.push_back(v.data());
  std::vector<float> workspace(nest.workspace_floats + 16, NAN);
  kernel->run(args.data(), workspace.data(), codegen::Kernel::kUpload | codegen::Kernel::kDownload);
  return t;
}

}  // namespace tiletune::test
