// tests/faulty_backend.hpp: a backend that injects faults into the CPU backend's kernels.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "codegen/backend.hpp"
#include "forwarding_backend.hpp"

namespace tiletune::test {

//! Emits the CPU backend's source with a fault chosen per config: "crash", "abort", "hang",
//! "wrong", "build", "slow_first" (the first call in a process spins for 200 ms), "slow_start" (the
//! first two calls do), "slow" (every call spins for 2 ms) or "" (none).
class FaultyBackend : public ForwardingBackend {
 public:
  explicit FaultyBackend(std::function<std::string(const std::string&)> fault)
      : ForwardingBackend(codegen::make_backend("cpu")), fault_(std::move(fault)) {}
  std::string name() const override { return "faulty"; }

  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config) const override {
    std::string src = inner_->emit(w, nest, config);
    std::string fault = fault_(config);
    std::string entry = "float* tt_workspace) {\n";
    size_t body = src.find(entry) + entry.size();
    int inputs = 0;
    for (auto& b : w.buffers) inputs += b.role == ir::Buffer::Role::Input;
    if (fault == "crash") src.insert(body, "  *(volatile int*)16 = 1;\n");
    if (fault == "abort") src.insert(body, "  __builtin_trap();\n");
    if (fault == "hang") src.insert(body, "  for (volatile int tt_spin = 1; tt_spin;) {}\n");
    if (fault == "build") src.insert(body, "  this is not C++;\n");
    if (fault == "slow_first" || fault == "slow_start")
      src.insert(body,
                 "  static int tt_cold = " + std::string(fault == "slow_first" ? "1" : "2") +
                     ";\n  if (tt_cold > 0) {\n    --tt_cold;\n"
                     "    double tt_until = omp_get_wtime() + 0.2;\n    while (omp_get_wtime() < tt_until) {}\n  }\n");
    if (fault == "slow")
      src.insert(
          body,
          "  {\n    double tt_until = omp_get_wtime() + 0.002;\n    while (omp_get_wtime() < tt_until) {}\n  }\n");
    if (fault == "wrong") src.insert(src.rfind('}'), "  tt_tensors[" + std::to_string(inputs) + "][0] += 1.0f;\n");
    return src;
  }

 private:
  std::function<std::string(const std::string&)> fault_;
};

}  // namespace tiletune::test
