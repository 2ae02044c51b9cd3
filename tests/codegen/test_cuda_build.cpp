// The CUDA backend where nvcc is installed, with or without a GPU: kernels of every library op
// compile for sm_80 and sm_90, and the backend finds a device exactly where the machine has one
// (test_cuda_device.cpp runs kernels on it). Every test case needs nvcc and is skipped without.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "measure/measure.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

TEST_CASE("cuda: kernels of every library op compile for sm_80 and sm_90") {
  if (!test::have_nvcc()) TT_SKIP("no nvcc under /usr/local/cuda/bin or on PATH");
  TempDir dir;
  const auto& cases = test::library_test_sizes();
  for (const char* arch : {"sm_80", "sm_90"}) {
    codegen::BackendOptions o;
    o.device = arch;
    auto be = codegen::make_backend("cuda", o);
    CHECK(be->target().fingerprint_json.find(arch) != std::string::npos);
    int built = 0;
    for (auto& [op, sizes] : cases) {
      CAPTURE(arch);
      CAPTURE(op);
      auto w = library_workload(op, sizes);
      tuner::Space space(w, be->target().traits);
      tuner::Rng rng(7);
      for (ir::Schedule s : {ir::naive_schedule(w), space.sample(rng)}) {
        std::string src = dir.file(op + "-" + std::to_string(built) + ".cu");
        std::string bin = dir.file(op + "-" + std::to_string(built++) + ".bin");
        std::ofstream(src) << be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
        std::string log = be->build(src, bin);
        CHECK_MESSAGE(log.empty(), log);
        // A build that reports success wrote its artifact.
        std::error_code ec;
        auto size = std::filesystem::file_size(bin, ec);
        CHECK_MESSAGE((!ec && size > 0), bin << " is missing or empty after a successful build");
      }
    }
  }
}

TEST_CASE("cuda: kernels of bf16 and f16 ops (16-bit storage, f32 math) compile") {
  if (!test::have_nvcc()) TT_SKIP("no nvcc under /usr/local/cuda/bin or on PATH");
  TempDir dir;
  codegen::BackendOptions o;
  o.device = "sm_80";
  auto be = codegen::make_backend("cuda", o);
  int built = 0;
  for (const ir::Workload& w : test::half_workloads()) {
    CAPTURE(w.canonical_text);
    tuner::Space space(w, be->target().traits);
    tuner::Rng rng(7);
    for (ir::Schedule s : {ir::naive_schedule(w), space.sample(rng), space.sample(rng)}) {
      std::string src = dir.file("typed-" + std::to_string(built) + ".cu");
      std::string bin = dir.file("typed-" + std::to_string(built++) + ".bin");
      std::ofstream(src) << be->emit(w, ir::lower(w, s, be->target().traits), s.to_json());
      std::string log = be->build(src, bin);
      CHECK_MESSAGE(log.empty(), log);
    }
  }
}

TEST_CASE("cuda: the backend finds a device exactly where there is one; without, running is a 'no CUDA device' error") {
  if (!test::have_nvcc()) TT_SKIP("no nvcc under /usr/local/cuda/bin or on PATH");
  // A --device that is neither an index nor an arch is refused before the driver is asked.
  codegen::BackendOptions bad;
  bad.device = "gpu0";
  ErrorKind bad_kind{};
  std::string refused = test::error_of([&] { codegen::make_backend("cuda", bad)->target(); }, &bad_kind);
  CHECK(refused.find("device index or an arch") != std::string::npos);
  CHECK(bad_kind == ErrorKind::InvalidInput);
  // Whether there is a device is asked of the driver's files (test::have_cuda_device), not of
  // the backend under test.
  auto local = codegen::make_backend("cuda");
  ErrorKind kind{};
  std::optional<std::string> why = test::try_error_of([&] { local->target(); }, &kind);
  if (test::have_cuda_device()) {
    REQUIRE_MESSAGE(!why.has_value(), "this machine has an NVIDIA GPU, but the CUDA backend says " << why.value_or(""));
    MESSAGE("CUDA device: " << local->target().fingerprint_json);
    CHECK(local->target().fingerprint_json.find("\"sms\"") != std::string::npos);  // the device itself is described
  } else {
    REQUIRE_MESSAGE(why.has_value(), "this machine has no NVIDIA GPU, but the CUDA backend found one");
    CHECK(why->find("no CUDA device") != std::string::npos);
    CHECK(kind == ErrorKind::Unavailable);
    // Built for a given arch, the measuring worker reports the missing device for the candidate.
    codegen::BackendOptions o;
    o.device = "sm_80";
    auto be = codegen::make_backend("cuda", o);
    auto w = library_workload("matmul", "M=8,N=8,K=8");
    measure::MeasureOptions mo;
    mo.cache_dir = test::kernel_cache();
    measure::Measurer m(*be, w, mo);
    CHECK(test::error_of([&] { m.measure({ir::naive_schedule(w)}); }).find("no CUDA device") != std::string::npos);
  }
}
