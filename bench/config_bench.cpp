// tiletune-config-bench: given configs of one library op, timed side by side in one process,
// alternating call by call, with each config's median and 10th percentile. For deciding between
// schedules (or a seed rule) where the machine's noise moves separate runs more than the
// difference: every config sees the same moments of the machine.
//
//   build/tiletune-config-bench depthwise_conv2d_p1 --sizes N=1,C=144,H=56,W=56,R=3,S=3
//       --config '{"stages":[...],"version":1}' --config '...'    (one command line)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "aligned.hpp"
#include "codegen/backend.hpp"
#include "ir/parse.hpp"
#include "measure/protocol.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "support/files.hpp"

using namespace tiletune;

int main(int argc, char** argv) {
  CLI::App app{"tiletune-config-bench: configs of one op timed side by side, alternating"};
  std::string op, sizes, dir = "/tmp/tiletune-config-bench";
  std::vector<std::string> configs;
  int calls = 400;
  app.add_option("op", op, "library op, or path of a .tile file holding one op")->required();
  app.add_option("--sizes", sizes, "sizes, like M=512,N=512,K=512")->required();
  app.add_option("--config", configs, "a config as JSON (repeatable)")->required();
  app.add_option("--calls", calls, "timed calls per config")->capture_default_str();
  app.add_option("--dir", dir, "scratch folder (emptied first)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto be = codegen::make_backend("cpu");
    const auto& traits = be->target().traits;
    // As the CLI reads it: a file is a .tile file, anything else a library op (whose error lists them).
    std::string text = is_file(op) ? read_text_file(op) : ops::op_text(op);
    ir::Workload w = ir::bind(ir::parse_op(text), ir::parse_sizes(sizes));

    // The tensors every config runs on (inputs as the measuring worker fills them), and a
    // workspace as large as the largest config needs.
    std::vector<std::unique_ptr<bench::Aligned>> tensors;
    codegen::KernelShape shape;
    int input = 0;
    for (auto& b : w.buffers) {
      if (b.role == ir::Buffer::Role::Temp) continue;
      tensors.push_back(std::make_unique<bench::Aligned>(b.elements()));
      shape.tensor_floats.push_back(b.elements());
      if (b.role == ir::Buffer::Role::Input) measure::fill_input(b.dtype, tensors.back()->p, b.elements(), 7, input++);
    }
    std::vector<float*> args;
    for (auto& t : tensors) args.push_back(t->p);
    std::vector<std::unique_ptr<codegen::Kernel>> kernels;
    std::int64_t workspace_floats = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
      auto s = ir::Schedule::from_json(configs[i]);
      auto nest = ir::lower(w, s, traits);
      std::string base = dir + "/config" + std::to_string(i);
      std::ofstream(base + ".cpp") << be->emit(w, nest, s.to_json());
      if (std::string log = be->build(base + ".cpp", base + ".so"); !log.empty()) {
        std::fprintf(stderr, "config %zu does not build:\n%s\n", i, log.c_str());
        return 1;
      }
      shape.workspace_floats = nest.workspace_floats;
      workspace_floats = std::max(workspace_floats, nest.workspace_floats);
      kernels.push_back(be->load(base + ".so", shape));
    }
    bench::Aligned workspace(workspace_floats + 16);
    std::vector<std::vector<double>> times(kernels.size());
    for (auto& k : kernels)  // untimed: constant inputs packed, pages and threads warm
      k->run(args.data(), workspace.p, codegen::Kernel::kUpload | codegen::Kernel::kDownload);
    for (int call = 0; call < calls; ++call)
      for (size_t i = 0; i < kernels.size(); ++i) times[i].push_back(kernels[i]->run(args.data(), workspace.p, 0));
    std::printf("%-8s %12s %12s  config\n", "config", "median us", "p10 us");
    for (size_t i = 0; i < kernels.size(); ++i) {
      std::sort(times[i].begin(), times[i].end());
      std::printf("%-8zu %12.1f %12.1f  %s\n", i, times[i][times[i].size() / 2] * 1e6,
                  times[i][times[i].size() / 10] * 1e6, configs[i].c_str());
    }
    return 0;
  } catch (const Error& e) {  // a bad op, sizes or config: say which, as the CLI does
    std::fprintf(stderr, "tiletune-config-bench: %s\n", e.what());
    return 2;
  }
}
