// tiletune-compile-bench: how long a candidate kernel takes to compile with the CPU backend's
// precompiled system headers (Backend::build) and without them (the same compiler and flags,
// the headers parsed each time), side by side in one run, alternating kernel by kernel.
//
//   build/tiletune-compile-bench --kernels 8
//
// Kernels are random schedules of each op's space on this machine. Prints the median compile of
// each op both ways and their ratio, and what making the precompiled header cost once.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/backend.hpp"
#include "ir/parse.hpp"
#include "ops/library.hpp"
#include "support/subprocess.hpp"
#include "tuner/space.hpp"

using namespace tiletune;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tiletune-compile-bench: a kernel's compile with and without precompiled headers"};
  int kernels = 8;
  std::string compiler = "g++", dir = "/tmp/tiletune-compile-bench";
  std::vector<std::string> ops = {"matmul:M=512,N=512,K=512", "conv2d_p1:N=1,C=64,H=56,W=56,K=64,R=3,S=3",
                                  "depthwise_conv2d_s2p1:N=1,C=96,H=112,W=112,R=3,S=3", "softmax:N=512,D=1024",
                                  "max_pool2d_p1:N=1,C=64,H=112,W=112"};
  app.add_option("--kernels", kernels, "random schedules per op")->capture_default_str();
  app.add_option("--op", ops, "OP:SIZES to compile (library ops)")->capture_default_str();
  app.add_option("--compiler", compiler, "the CPU backend's compiler")->capture_default_str();
  app.add_option("--dir", dir, "scratch folder (emptied first)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  codegen::BackendOptions options;
  options.compiler = compiler;
  auto be = codegen::make_backend("cpu", options);
  const auto& target = be->target();
  // The flags the backend compiles with, as its target records them.
  std::vector<std::string> plain_argv{compiler};
  std::istringstream flags(nlohmann::json::parse(target.fingerprint_json)["flags"].get<std::string>());
  for (std::string f; flags >> f;) plain_argv.push_back(f);

  tuner::Rng rng(7);
  // One random kernel of `w`, compiled both ways: {plain seconds, Backend::build seconds}.
  auto compile_both = [&](const ir::Workload& w, const tuner::Space& space) {
    ir::Schedule s = space.sample(rng);
    std::string base = dir + "/" + w.key + "-" + s.key();
    std::ofstream(base + ".cpp") << be->emit(w, ir::lower(w, s, target.traits), s.to_json());
    std::vector<std::string> argv = plain_argv;
    argv.insert(argv.end(), {"-o", base + ".plain.so", base + ".cpp"});
    auto t0 = std::chrono::steady_clock::now();
    ProcessResult r = run_process(argv, 300);
    const double plain_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    std::string log = be->build(base + ".cpp", base + ".so");
    const double built_s = seconds_since(t0);
    if (!r.ok() || !log.empty()) {
      std::fprintf(stderr, "compile failed: %s%s\n", r.output.c_str(), log.c_str());
      std::exit(1);
    }
    return std::pair{plain_s, built_s};
  };
  auto workload_of = [](const std::string& spec) {
    auto colon = spec.find(':');
    return ir::bind(ir::parse_op(ops::op_text(spec.substr(0, colon))), ir::parse_sizes(spec.substr(colon + 1)));
  };
  {  // The first build makes the precompiled header: timed apart, not counted.
    auto w = workload_of(ops.front());
    std::printf("first build, making the precompiled header: %.2f s\n",
                compile_both(w, tuner::Space(w, target.traits)).second);
  }
  std::printf("%-52s %8s %12s %12s %8s\n", "op", "kernels", "plain s", "precomp s", "ratio");
  for (auto& spec : ops) {
    auto w = workload_of(spec);
    tuner::Space space(w, target.traits);
    std::vector<double> plain, precompiled;
    for (int i = 0; i < kernels; ++i) {
      auto [plain_s, built_s] = compile_both(w, space);
      plain.push_back(plain_s);
      precompiled.push_back(built_s);
    }
    std::printf("%-52s %8d %12.3f %12.3f %8.2f\n", spec.substr(0, 52).c_str(), kernels, median(plain),
                median(precompiled), median(plain) / median(precompiled));
  }
  return 0;
}
