// The proof that the mapping means what ONNX means, over ONNX's whole test corpus (Debian's
// libonnx-testdata): every model whose nodes all map is run through its tasks' naive kernels
// on the shipped inputs and compared with the shipped outputs. Counts by op type go to the
// log (and to $TT_ONNX_CORPUS_REPORT as JSON when set); a wrong result fails the test.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/onnx_models.hpp"
#include "support/error.hpp"

using namespace tiletune;
using namespace tiletune::test;

namespace {

const std::string kCorpus = "/usr/share/libonnx-testdata/data/";

struct Counts {
  int correct = 0, wrong = 0, not_mapped = 0, no_kernel = 0, not_run = 0;
};

}  // namespace

TEST_CASE("onnx corpus: every model that maps computes ONNX's recorded outputs") {
  if (!std::filesystem::exists(kCorpus)) TT_SKIP("libonnx-testdata is not installed");
  TempDir dir;
  std::map<std::string, Counts> by_type;
  nlohmann::json wrong = nlohmann::json::array(), reasons = nlohmann::json::object();
  std::vector<std::filesystem::path> tests;
  for (const char* set : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    for (auto& e : std::filesystem::directory_iterator(kCorpus + set))
      if (std::filesystem::exists(e.path() / "model.onnx")) tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  for (auto& path : tests) {
    std::string name = path.parent_path().filename().string() + "/" + path.filename().string();
    models::detail::Graph g;
    models::Imported m;
    std::string type = "?";
    try {
      g = models::detail::read_onnx((path / "model.onnx").string(), {});
      m = models::detail::map_graph(g);
    } catch (const Error& e) {
      ++by_type["(not read)"].not_mapped;
      reasons[name] = e.what();
      continue;
    }
    // A model is counted under its first compute node's type (node tests have one node).
    for (auto& n : g.nodes)
      if (n.type != "Constant") {
        type = n.type;
        break;
      }
    Counts& c = by_type[type];
    bool unmapped = false, layout = false;
    for (auto& s : m.skipped) {
      unmapped |= !s.layout_only;
      layout |= s.layout_only;
      if (!s.layout_only) reasons[name] = s.op_type + ": " + s.reason;
    }
    if (unmapped) {
      ++c.not_mapped;
      continue;
    }
    if (m.tasks.empty()) {
      ++c.no_kernel;
      continue;
    }
    // Inputs as shipped; a model whose kernels are separated by layout-only nodes, or whose
    // inputs are not f32, is not run here.
    std::map<std::string, std::vector<float>> values;
    bool runnable = !layout;
    for (size_t i = 0; i < g.inputs.size() && runnable; ++i) {
      auto pb = path / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
      if (!std::filesystem::exists(pb)) {
        runnable = false;
        break;
      }
      auto t = models::detail::read_tensor_pb(pb.string());
      std::int64_t n = 1;
      for (auto d : t.first) n *= d;
      if (static_cast<std::int64_t>(t.second.size()) != n) runnable = false;
      values[g.inputs[i]] = t.second;
    }
    auto out_pb = path / "test_data_set_0" / "output_0.pb";
    if (!runnable || !std::filesystem::exists(out_pb)) {
      ++c.not_run;
      continue;
    }
    run_model(g, m, values, dir);
    auto want = models::detail::read_tensor_pb(out_pb.string()).second;
    const auto& got = values[g.outputs.at(0)];
    double worst = want.size() == got.size() ? 0 : INFINITY;
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
      if (std::isnan(want[i]) && std::isnan(got[i])) continue;
      if (want[i] == got[i]) continue;  // infinities
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (1 + std::fabs(want[i])));
    }
    if (worst < 1e-3) {
      ++c.correct;
    } else {
      ++c.wrong;
      wrong.push_back({{"test", name}, {"error", worst}, {"op_text", m.tasks[0].op_text}});
    }
  }
  Counts total;
  auto line = [](const std::string& type, const Counts& c) {
    std::printf("%-28s %8d %6d %11d %10d %8d\n", type.c_str(), c.correct, c.wrong, c.not_mapped, c.no_kernel,
                c.not_run);
  };
  std::printf("%-28s %8s %6s %11s %10s %8s\n", "op type", "correct", "wrong", "not mapped", "no kernel", "not run");
  for (auto& [type, c] : by_type) {
    line(type, c);
    total.correct += c.correct;
    total.wrong += c.wrong;
    total.not_mapped += c.not_mapped;
    total.no_kernel += c.no_kernel;
    total.not_run += c.not_run;
  }
  line("total", total);
  if (const char* report = std::getenv("TT_ONNX_CORPUS_REPORT")) {
    nlohmann::json counts;
    for (auto& [type, c] : by_type)
      counts[type] = {{"correct", c.correct},
                      {"wrong", c.wrong},
                      {"not_mapped", c.not_mapped},
                      {"no_kernel", c.no_kernel},
                      {"not_run", c.not_run}};
    std::ofstream(report) << nlohmann::json{{"counts", counts}, {"wrong", wrong}, {"not_mapped", reasons}}.dump(2);
  }
  for (auto& w : wrong) CHECK_MESSAGE(false, w.dump(2));
  CHECK(total.correct > 0);
}
