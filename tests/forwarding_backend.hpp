// tests/forwarding_backend.hpp: a backend that forwards everything to another one; tests
// derive from it to change one thing (the emitted source).
#pragma once
#include <memory>
#include <string>

#include "codegen/backend.hpp"

namespace tiletune::test {

class ForwardingBackend : public codegen::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<codegen::Backend> inner) : inner_(std::move(inner)) {}
  //! Artifacts are loaded (in the measuring worker) by the inner backend.
  std::string runtime() const override { return inner_->runtime(); }
  const codegen::TargetInfo& target() const override { return inner_->target(); }
  std::string source_extension() const override { return inner_->source_extension(); }
  std::string build(const std::string& src, const std::string& out) const override { return inner_->build(src, out); }
  std::unique_ptr<codegen::Kernel> load(const std::string& path, const codegen::KernelShape& shape) const override {
    return inner_->load(path, shape);
  }
  std::string emit(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config) const override {
    return inner_->emit(w, nest, config);
  }

 protected:
  std::unique_ptr<codegen::Backend> inner_;
};

}  // namespace tiletune::test
