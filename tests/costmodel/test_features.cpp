#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "codegen/backend.hpp"
#include "costmodel/features.hpp"
#include "helpers.hpp"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::library_workload;

namespace {
const ir::TargetTraits kAvx512{16, 32, 2};

std::vector<float> features_of(const ir::Workload& w, const ir::Schedule& s) {
  return costmodel::featurize(w, s, kAvx512).pooled();
}

float feature(const std::vector<float>& v, const std::string& name) {
  const auto& docs = costmodel::feature_docs();
  for (size_t i = 0; i < docs.size(); ++i)
    if (docs[i].first == name) return v[i];
  FAIL("no feature " << name);
  return 0.0f;
}
}  // namespace

TEST_CASE("features: one documented feature per slot, each named once") {
  CHECK(costmodel::feature_docs().size() == costmodel::feature_count());
  std::set<std::string> names;
  for (auto& [name, doc] : costmodel::feature_docs()) {
    CAPTURE(name);
    CHECK(names.insert(name).second);
    CHECK(doc.size() > 10);
  }
  // The version moves with the set: tests/fixtures holds a model of version 1, which has 31.
  CHECK((costmodel::kFeatureVersion == 1) == (costmodel::feature_count() == 31));
  // Versions that only appended are read as prefixes; the ones before 3 changed the set.
  CHECK(costmodel::feature_count(costmodel::kFeatureVersion) == costmodel::feature_count());
  CHECK(costmodel::feature_count(3) == 66);
  CHECK(costmodel::feature_count(3) < costmodel::feature_count());
  CHECK(costmodel::feature_version_of(66) == 3);
  CHECK(costmodel::feature_count(4) == 72);
  CHECK(costmodel::feature_version_of(72) == 4);
  CHECK(costmodel::feature_count(4) < costmodel::feature_count());
  CHECK(costmodel::feature_count(5) == 85);
  CHECK(costmodel::feature_version_of(85) == 5);
  CHECK(costmodel::feature_count(5) < costmodel::feature_count());
  CHECK(costmodel::feature_count(6) == 87);
  CHECK(costmodel::feature_version_of(87) == 6);
  CHECK(costmodel::feature_count(6) < costmodel::feature_count());
  CHECK(costmodel::feature_count(7) == 91);
  CHECK(costmodel::feature_version_of(91) == 7);
  CHECK(costmodel::feature_count(7) < costmodel::feature_count());
  CHECK(costmodel::feature_count(8) == 93);
  CHECK(costmodel::feature_version_of(93) == 8);
  CHECK(costmodel::feature_count(8) < costmodel::feature_count());
  CHECK(costmodel::feature_version_of(costmodel::feature_count()) == costmodel::kFeatureVersion);
  for (int old : {0, 1, 2, costmodel::kFeatureVersion + 1}) CHECK(costmodel::feature_count(old) == 0);
  CHECK(costmodel::feature_version_of(31) == 0);
}

TEST_CASE("features: how the SIMD axis meets memory, and which buffer is stored") {
  auto w = ir::bind(ir::parse_op("op tr(X: f32[N, D]) -> Y: f32[D, N] {\n  Y[d, n] = X[n, d]\n}"),
                    ir::parse_sizes("N=64,D=48"));
  // Along n the stores are contiguous and X's lanes come from panels; along d, X is read
  // contiguously and Y's lanes are stored N apart, one by one.
  auto along_n = features_of(w, ir::Schedule::from_json(
                                    R"({"version":1,"stages":[{"stage":"Y","tile":{"d":[1],"n":[64]},)"
                                    R"("order":["d.0","n.0"],"vectorize":"n","pack":["X"]}]})"));
  auto along_d = features_of(w, ir::Schedule::from_json(
                                    R"({"version":1,"stages":[{"stage":"Y","tile":{"d":[48],"n":[1]},)"
                                    R"("order":["n.0","d.0"],"vectorize":"d"}]})"));
  auto scalar = features_of(w, ir::naive_schedule(w));
  CHECK(feature(along_n, "scatter_stores_log") == 0);
  CHECK(feature(along_n, "panel_reads") == 1);
  CHECK(feature(along_d, "scatter_stores_log") == doctest::Approx(std::log2(65.0)));
  CHECK(feature(along_d, "panel_reads") == 0);
  for (auto* f : {&along_n, &along_d, &scalar}) {
    CHECK(feature(*f, "row_reads") == 0);
    // X and Y are as large: by name, X is buffer 0 and the stored Y buffer 1.
    CHECK(feature(*f, "buffer0_is_output") == 0);
    CHECK(feature(*f, "buffer1_is_output") == 1);
    CHECK(feature(*f, "buffer2_is_output") == 0);
  }
  CHECK(feature(scalar, "scatter_stores_log") == 0);
  CHECK(feature(scalar, "panel_reads") == 0);
  // A stride-2 window vectorized along its output reads strided rows of its input.
  auto conv = library_workload("depthwise_conv2d_s2p1", "N=1,C=8,H=20,W=36,R=3,S=3");
  auto rows = features_of(conv, ir::Schedule::from_json(
                                    R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"c":[1],"y":[1],"x":[16],)"
                                    R"("r":[3],"s":[3]},"order":["n.0","c.0","y.0","x.0","r.0","s.0"],"vectorize":"x"}]})"));
  CHECK(feature(rows, "row_reads") == 1);
  CHECK(feature(rows, "panel_reads") == 0);
  CHECK(feature(rows, "scatter_stores_log") == 0);
}

TEST_CASE("features: panel and row reads are the code generators' (ir::strided_reads, strided_row_reads)") {
  // The features count them from the reads they resolved to axes; the library's ops with
  // sampled configs (strided windows, transposes, reductions along the SIMD axis) keep the
  // two counts the same.
  int vectorized = 0, strided = 0;
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    auto w = test::library_test_workload(name);
    tuner::Space space(w, kAvx512);
    tuner::Rng rng(11);
    for (int i = 0; i < 12; ++i) {
      ir::Schedule s = space.sample(rng);
      float panels = 0, rows = 0;
      for (auto& sn : ir::lower(w, s, kAvx512).stages) {
        if (sn.vector_axis.empty()) continue;
        ++vectorized;
        const auto all = ir::strided_reads(sn.body, sn.vector_axis).size(),
                   row = ir::strided_row_reads(sn.body, sn.vector_axis).size();
        panels += static_cast<float>(all - row);
        rows += static_cast<float>(row);
        strided += all > 0;
      }
      auto f = features_of(w, s);
      CHECK(feature(f, "panel_reads") == panels);
      CHECK(feature(f, "row_reads") == rows);
    }
  }
  CHECK(vectorized > 100);
  CHECK(strided > 10);
}

TEST_CASE("features: deterministic, finite, and changed by the schedule") {
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    auto w = test::library_test_workload(name);
    tuner::Space space(w, kAvx512);
    tuner::Rng rng(5);
    ir::Schedule naive = ir::naive_schedule(w);
    auto base = features_of(w, naive);
    CHECK(base.size() == costmodel::feature_count());
    CHECK(base == features_of(w, naive));
    int different = 0;
    for (int i = 0; i < 10; ++i) {
      ir::Schedule s = space.sample(rng);
      auto f = features_of(w, s);
      for (float x : f) CHECK(std::isfinite(x));
      CHECK(f == features_of(w, s));
      different += f != base;
    }
    CHECK(different >= 8);
  }
}

TEST_CASE("features: footprints are judged against the target's cache sizes") {
  auto w = library_workload("matmul", "M=256,N=256,K=256");
  auto s = ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[64,4],"n":[64,32],"k":[64]},)"
                                   R"("order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n"}]})");
  ir::TargetTraits small = kAvx512, big = kAvx512;
  small.l1_bytes = small.l2_bytes = small.l3_bytes = 1024;
  big.l1_bytes = big.l2_bytes = big.l3_bytes = std::int64_t(1) << 40;
  auto nest = ir::lower(w, s, kAvx512);
  auto f_small = costmodel::extract_features(w, nest, small).pooled(),
       f_big = costmodel::extract_features(w, nest, big).pooled();
  CHECK(f_small != f_big);
  CHECK(f_big[16] == 1.0f);  // fit_l1: every loop's footprint fits
  CHECK(f_small[16] == 0.0f);
  auto be = codegen::make_backend("cpu");
  CHECK(be->target().traits.l1_bytes > 0);
  CHECK(be->target().fingerprint_json.find("\"caches\"") != std::string::npos);
}

TEST_CASE("features: a register tile and a vector axis show up where expected") {
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  auto tiled = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6],"n":[64],"k":[64]},"order":["m.0","n.0","k.0"],)"
      R"("vectorize":"n","unroll":0,"parallel":1}]})");
  auto f = features_of(w, tiled);
  auto naive = features_of(w, ir::naive_schedule(w));
  auto at = [](const std::vector<float>& v, const std::string& name) {
    const auto& docs = costmodel::feature_docs();
    for (size_t i = 0; i < docs.size(); ++i)
      if (docs[i].first == name) return v[i];
    FAIL("no feature " << name);
    return 0.0f;
  };
  CHECK(at(f, "reg_points") == 6 * 64);
  CHECK(at(naive, "reg_points") == 1);
  CHECK(at(f, "accumulators") == 24);
  CHECK(at(f, "vector_lanes_log") > 4);
  CHECK(at(naive, "vector_lanes_log") == 0);
  CHECK(at(f, "edge_fraction") > 0);  // 64 rows in blocks of 6
  CHECK(at(naive, "edge_fraction") == 0);
  CHECK(at(f, "loads_per_update") < at(naive, "loads_per_update"));
}

TEST_CASE("features: one row per loop nest; the rows sum to the program's vector") {
  auto w = library_workload("softmax", "N=32,D=96");
  auto naive = costmodel::featurize(w, ir::naive_schedule(w), kAvx512);
  CHECK(naive.stages.size() == ir::lower(w, ir::naive_schedule(w), kAvx512).stages.size());
  CHECK(naive.stages.size() > 1);
  auto pooled = naive.pooled();
  float sum0 = 0;
  for (auto& row : naive.stages) sum0 += row[0];
  CHECK(pooled[0] == doctest::Approx(sum0));
  // Pooled by max, each feature is its largest over the nests; the whole-program ones (the
  // first row's, 0 in the others) survive either pooling.
  auto most = naive.pooled(costmodel::Pooling::Max);
  for (size_t k = 0; k < most.size(); ++k) {
    float largest = naive.stages[0][k];
    for (auto& row : naive.stages) largest = std::max(largest, row[k]);
    CHECK(most[k] == largest);
  }
  const size_t stages_feature = static_cast<size_t>(
      std::find_if(costmodel::feature_docs().begin(), costmodel::feature_docs().end(),
                   [](auto& d) { return d.first == "stages"; }) -
      costmodel::feature_docs().begin());
  CHECK(most[stages_feature] == static_cast<float>(naive.stages.size()));
  CHECK(pooled[stages_feature] == most[stages_feature]);
  auto bad = ir::naive_schedule(w);
  bad.stages[0].vectorize = "nope";
  CHECK_THROWS_AS(costmodel::featurize(w, bad, kAvx512), Error);
}

TEST_CASE("features: per buffer, the largest first, its stride along the innermost loop and its reuse") {
  auto w = library_workload("matmul", "M=64,N=128,K=32");  // C 32 KiB, B 16 KiB, A 8 KiB
  auto tiled = ir::Schedule::from_json(
      R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6],"n":[64],"k":[32]},"order":["m.0","n.0","k.0"],)"
      R"("vectorize":"n","unroll":0,"parallel":1}]})");
  auto f = features_of(w, tiled);
  auto at = [&](const std::string& name) {
    const auto& docs = costmodel::feature_docs();
    for (size_t i = 0; i < docs.size(); ++i)
      if (docs[i].first == name) return f[i];
    FAIL("no feature " << name);
    return 0.0f;
  };
  CHECK(at("buffer0_unique_log") == doctest::Approx(std::log2(1.0 + 64 * 128 * 4)));  // C
  CHECK(at("buffer2_unique_log") == doctest::Approx(std::log2(1.0 + 64 * 32 * 4)));   // A
  CHECK(at("buffer0_stride_log") == 1.0f);  // C along n: unit stride
  CHECK(at("buffer2_stride_log") == 0.0f);  // A along n: invariant (broadcast)
  CHECK(at("buffer0_reuse_type") == 2.0f);  // C's accumulators stay in registers across k
  CHECK(at("buffer2_reuse_type") == 2.0f);  // A's element serves the 64 columns of the tile
  CHECK(at("buffer1_lines_log") > 0);
  CHECK(at("intensity_curve_3") > 0);
  auto naive = costmodel::featurize(w, ir::naive_schedule(w), kAvx512).pooled();
  CHECK(naive != f);
}

TEST_CASE("features: memory in whole cache lines (version 5)") {
  // Y = X transposed, 512 KiB each. Walking a column of Y (d, the SIMD axis, is Y's strided
  // dimension) uses 4 bytes of each 64-byte line of Y it stores; a 16 x 16 block uses all of them.
  auto w = ir::bind(ir::parse_op("op tr(X: f32[N, D]) -> Y: f32[D, N] {\n  Y[d, n] = X[n, d]\n}"),
                    ir::parse_sizes("N=512,D=256"));
  auto column = features_of(w, ir::Schedule::from_json(
                                   R"({"version":1,"stages":[{"stage":"Y","tile":{"d":[256],"n":[1]},)"
                                   R"("order":["n.0","d.0"],"vectorize":"d"}]})"));
  auto blocked = features_of(w, ir::Schedule::from_json(
                                    R"({"version":1,"stages":[{"stage":"Y","tile":{"d":[16],"n":[16]},)"
                                    R"("order":["n.0","d.0"],"vectorize":"d"}]})"));
  // The micro-kernel of the column reads a row of X (1 KiB, whole lines) and stores 256 lanes of
  // Y 2 KiB apart, one line each: 2 KiB used of 17 KiB brought.
  CHECK(feature(column, "line_use_reg") == doctest::Approx(2.0 / 17));
  CHECK(feature(blocked, "line_use_reg") == doctest::Approx(1.0));
  // The whole stage (1 MiB) does not fit L1; inside one trip of n.0 it does (17 KiB of lines).
  CHECK(feature(column, "line_use_l1") == doctest::Approx(2.0 / 17));
  CHECK(feature(column, "line_use_l2") == doctest::Approx(1.0));  // both buffers whole: 1 MiB fits L2
  // Per buffer (X and Y are as large: X is buffer 0, Y buffer 1).
  CHECK(feature(column, "buffer0_line_use_l1") == doctest::Approx(1.0));
  CHECK(feature(column, "buffer1_line_use_l1") == doctest::Approx(1.0 / 16));
  CHECK(feature(blocked, "buffer1_line_use_l1") == doctest::Approx(1.0));
  // Along n, the innermost tile loop that iterates: X steps a row (256 elements), Y one element.
  CHECK(feature(column, "buffer0_outer_stride_log") == doctest::Approx(std::log2(257.0)));
  CHECK(feature(column, "buffer1_outer_stride_log") == doctest::Approx(1.0));
  // Counted in bytes, the two move alike; counted in whole lines, the column moves more.
  CHECK(feature(column, "roof_memory_log") == doctest::Approx(feature(blocked, "roof_memory_log")));
  CHECK(feature(column, "roof_lines_log") > feature(blocked, "roof_lines_log") + 0.5f);
}

TEST_CASE("features: gathered rows count their lanes; the bound moves the data once (version 5)") {
  // A stride-2 window vectorized along its output gathers its input's rows lane by lane.
  auto conv = library_workload("depthwise_conv2d_s2p1", "N=1,C=8,H=20,W=36,R=3,S=3");
  auto rows = features_of(conv, ir::Schedule::from_json(
                                    R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"c":[1],"y":[1],"x":[16],)"
                                    R"("r":[3],"s":[3]},"order":["n.0","c.0","y.0","x.0","r.0","s.0"],"vectorize":"x"}]})"));
  CHECK(feature(rows, "load_issue_per_update") > feature(rows, "loads_per_update"));
  auto w = library_workload("matmul", "M=64,N=128,K=32");
  auto tiled = features_of(w, ir::Schedule::from_json(
                                  R"({"version":1,"stages":[{"stage":"C","tile":{"m":[6],"n":[64],"k":[32]},)"
                                  R"("order":["m.0","n.0","k.0"],"vectorize":"n"}]})"));
  CHECK(feature(tiled, "load_issue_per_update") == doctest::Approx(feature(tiled, "loads_per_update")));
  for (auto* f : {&rows, &tiled}) {
    CHECK(feature(*f, "roof_bound_log") >= feature(*f, "roof_issue_log"));
    CHECK(feature(*f, "roof_bound_log") >= feature(*f, "roof_lines_log"));
  }
  // A copy has no flops: its bound is moving its bytes, so the same schedule shape at twice
  // the size stays near the same estimate instead of growing with it.
  auto copy = [](const std::string& sizes) {
    auto cw = ir::bind(ir::parse_op("op cp(X: f32[N, D]) -> Y: f32[N, D] {\n  Y[n, d] = X[n, d]\n}"),
                       ir::parse_sizes(sizes));
    return costmodel::featurize(cw, ir::Schedule::from_json(
                                        R"({"version":1,"stages":[{"stage":"Y","tile":{"n":[1],"d":[64]},)"
                                        R"("order":["n.0","d.0"],"vectorize":"d","parallel":1}]})"),
                                kAvx512)
        .pooled();
  };
  auto small = copy("N=256,D=1024"), large = copy("N=512,D=1024");
  CHECK(feature(large, "roof_bound_log") == doctest::Approx(feature(small, "roof_bound_log")).epsilon(0.05));
  CHECK(feature(large, "roof_total_log") > feature(small, "roof_total_log") + 0.5f);
}

TEST_CASE("features: the threads' shares of the work, partial tiles counted at their size (version 6)") {
  // 73 rows in parallel tiles of 72 are two iterations, one per thread: even by their count, but
  // one thread has 72 rows and the other 1. In tiles of 40 (40 and 33 rows): nearly even.
  auto w = library_workload("matmul", "M=73,N=64,K=32");
  auto rows_in = [&](int tile, int parallel) {
    return features_of(w, ir::Schedule::from_json(
                              R"({"version":1,"stages":[{"stage":"C","tile":{"m":[)" + std::to_string(tile) +
                              R"(,8],"n":[16],"k":[32]},"order":["m.0","n.0","k.0","m.1"],"vectorize":"n",)"
                              R"("parallel":)" + std::to_string(parallel) + "}]}"));
  };
  auto uneven = rows_in(72, 1), even = rows_in(40, 1), serial = rows_in(40, 0);
  CHECK(feature(uneven, "parallel_balance") == doctest::Approx(1.0));
  CHECK(feature(uneven, "parallel_work") == doctest::Approx(73.0 / 2 / 72));
  CHECK(feature(even, "parallel_work") == doctest::Approx(73.0 / 2 / 40));
  CHECK(feature(serial, "parallel_work") == doctest::Approx(0.5));
  // The busiest thread's cycles: the uneven split takes about as long as running serially.
  CHECK(feature(uneven, "roof_work_log") > feature(uneven, "roof_bound_log") + 0.9f);
  CHECK(feature(even, "roof_work_log") > feature(even, "roof_bound_log"));
  CHECK(feature(even, "roof_work_log") < feature(even, "roof_bound_log") + 0.2f);
  CHECK(feature(serial, "roof_work_log") == doctest::Approx(feature(serial, "roof_bound_log")));
  // Collapsed loops are dealt out in one run per thread, the last loop fastest: rows in tiles
  // of 32, 32 and 9 by columns in tiles of 32, 32 and 8; the first thread runs five of the nine
  // iterations, (0,0) (0,1) (0,2) (1,0) (1,1), 4,352 of the 5,256 points.
  auto both = features_of(library_workload("matmul", "M=73,N=72,K=32"),
                          ir::Schedule::from_json(
                              R"({"version":1,"stages":[{"stage":"C","tile":{"m":[32,8],"n":[32,16],"k":[32]},)"
                              R"("order":["m.0","n.0","k.0","m.1","n.1"],"vectorize":"n","parallel":2}]})"));
  CHECK(feature(both, "parallel_work") == doctest::Approx(5256.0 / 2 / 4352));
}

TEST_CASE("features: the micro-kernel's loads of its body, and the vectors that straddle cache lines (version 7)") {
  // A convolution with a fused bias and ReLU, vectorized along x: per reduction step the register
  // tile of 4 channels by 2 vectors loads 2 vectors of I and broadcasts 4 of F. Version 3's
  // count added the epilogue's reads of acc (8) and bias (4), which run once per output.
  auto conv = library_workload("conv2d_bias_relu_p1", "N=1,C=8,H=12,W=32,K=8,R=3,S=3");
  auto conv_with = [&](const std::string& tile, const ir::TargetTraits& t = kAvx512) {
    return costmodel::featurize(
               conv,
               ir::Schedule::from_json(
                   R"({"version":1,"stages":[{"stage":"acc","tile":{)" + tile +
                   R"(,"n":[1],"c":[8],"r":[3],"s":[3]},"order":["n.0","k.0","y.0","x.0","c.0","r.0","s.0"],)"
                   R"("vectorize":"x","fuse_epilogue":true},{"stage":"O"}]})"),
               t)
        .pooled();
  };
  auto wide = conv_with(R"("k":[4],"y":[1],"x":[32])");
  CHECK(feature(wide, "body_loads_per_update") == doctest::Approx(6.0 / 8));
  CHECK(feature(wide, "loads_per_update") == doctest::Approx(18.0 / 8));
  CHECK(feature(wide, "epilogue_loads_per_output") == doctest::Approx(4.0 / 8));
  // I[.., x + s - 1] with rows of 32: a 64-byte vector starts 15, 0 or 1 elements into a line,
  // and straddles two lines when s is 0 or 2. F's broadcasts never do.
  CHECK(feature(wide, "split_loads_per_update") == doctest::Approx(2 * (2.0 / 3) / 8));
  // 32-byte vectors start at 0 or 8 in a line, then 15, 0, 1, 7, 8 or 9: they straddle from 9 on.
  const ir::TargetTraits avx2{8, 16, 2};
  auto narrow = conv_with(R"("k":[4],"y":[1],"x":[16])", avx2);
  CHECK(feature(narrow, "split_loads_per_update") == doctest::Approx(2 * (1.0 / 3) / 8));
  // Rows of one channel (k 1, y 8): 16 vectors a step, two thirds of them straddling, for 16 FMAs,
  // where the tile of 8 channels loads 2 for 16. The first is bound by its loads, by about
  // (17 + 16 * 2/3) / 16 = 1.73 times its FMAs; version 3's count had both alike, the
  // epilogue's reads weighing on both.
  auto rows = conv_with(R"("k":[1],"y":[8],"x":[32])"), channels = conv_with(R"("k":[8],"y":[1],"x":[32])");
  CHECK(feature(rows, "split_loads_per_update") == doctest::Approx(2.0 / 3));
  CHECK(feature(rows, "roof_steps_log") > feature(channels, "roof_steps_log") + 0.7f);
  CHECK(feature(rows, "roof_steps_log") < feature(channels, "roof_steps_log") + 0.9f);
  CHECK(feature(rows, "roof_work_log") < feature(channels, "roof_work_log") + 0.2f);
  // A matmul's rows of B start on a line when N is a multiple of the lanes; with N = 100, row k
  // starts 4k elements into one: three rows in four straddle. Panels of B start on lines.
  auto matmul = [&](const std::string& sizes, const std::string& pack) {
    return features_of(
        library_workload("matmul", sizes),
        ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[4],"n":[32],"k":[16]},)"
                                R"("order":["m.0","n.0","k.0"],"vectorize":"n")" +
                                pack + "}]}"));
  };
  auto aligned = matmul("M=64,N=128,K=32", ""), offset = matmul("M=64,N=100,K=32", "");
  auto panels = matmul("M=64,N=100,K=32", R"(,"pack":["B"])");
  CHECK(feature(aligned, "split_loads_per_update") == 0.0f);
  CHECK(feature(aligned, "body_loads_per_update") == doctest::Approx(6.0 / 8));  // 4 of A, 2 of B
  CHECK(feature(offset, "split_loads_per_update") == doctest::Approx(2 * (3.0 / 4) / 8));
  CHECK(feature(panels, "split_loads_per_update") == 0.0f);
  CHECK(feature(panels, "body_loads_per_update") == doctest::Approx(6.0 / 8));
  // A constant offset alone: X[m + 1] starts every vector one element into a line.
  auto shifted = features_of(
      ir::bind(ir::parse_op("op sh(X: f32[N]) -> Y: f32[M] {\n  Y[m] = X[m + 1]\n}"), ir::parse_sizes("N=65,M=64")),
      ir::Schedule::from_json(
          R"({"version":1,"stages":[{"stage":"Y","tile":{"m":[32]},"order":["m.0"],"vectorize":"m"}]})"));
  CHECK(feature(shifted, "body_loads_per_update") == doctest::Approx(1.0));
  CHECK(feature(shifted, "split_loads_per_update") == doctest::Approx(1.0));
  // A strided window's rows are gathered lane by lane: none straddles.
  auto strided = features_of(
      library_workload("depthwise_conv2d_s2p1", "N=1,C=8,H=20,W=36,R=3,S=3"),
      ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"O","tile":{"n":[1],"c":[1],"y":[1],"x":[16],)"
                              R"("r":[3],"s":[3]},"order":["n.0","c.0","y.0","x.0","r.0","s.0"],"vectorize":"x"}]})"));
  CHECK(feature(strided, "split_loads_per_update") == 0.0f);
}

TEST_CASE("features: the program's roofline weighs each nest by its cycles (version 8)") {
  // One nest: the program's estimate is the nest's own.
  auto matmul = library_workload("matmul", "M=64,N=128,K=32");
  auto one = costmodel::featurize(
      matmul,
      ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"C","tile":{"m":[4],"n":[32],"k":[16]},)"
                              R"("order":["m.0","n.0","k.0"],"vectorize":"n"}]})"),
      kAvx512);
  REQUIRE(one.stages.size() == 1);
  auto plus_one = [](float log_ratio) { return std::log2(1 + std::exp2(log_ratio)); };
  CHECK(feature(one.stages[0], "program_roof_work_log") ==
        doctest::Approx(plus_one(feature(one.stages[0], "roof_work_log"))));
  CHECK(feature(one.stages[0], "program_roof_steps_log") ==
        doctest::Approx(plus_one(feature(one.stages[0], "roof_steps_log"))));
  // A projection in SIMD vectors, then each row's max in scalar loops: two nests, each far from
  // its bound in its own way. The program's estimate is their cycles over their bounds, so it
  // lies between the two ratios, nearer the projection's, whose bound is the larger by far; only
  // the first row holds it (either pooling keeps it).
  auto proj_max = ir::bind(ir::parse_op("op proj_max(X: f32[M, K], W: f32[K, N]) -> Y: f32[M] {\n"
                                        "  p[m, n] += X[m, k] * W[k, n]\n  Y[m] max= p[m, n]\n}"),
                           ir::parse_sizes("M=64,N=256,K=128"));
  auto two = costmodel::featurize(
      proj_max,
      ir::Schedule::from_json(R"({"version":1,"stages":[{"stage":"p","tile":{"m":[4],"n":[32],"k":[16]},)"
                              R"("order":["m.0","n.0","k.0"],"vectorize":"n"},)"
                              R"({"stage":"Y","tile":{"m":[1],"n":[1]},"order":["m.0","n.0"]}]})"),
      kAvx512);
  REQUIRE(two.stages.size() == 2);
  for (const char* name : {"work", "steps"}) {
    CAPTURE(name);
    const std::string nest = std::string("roof_") + name + "_log", program = "program_" + nest;
    const float a = plus_one(feature(two.stages[0], nest)), b = plus_one(feature(two.stages[1], nest));
    CHECK(a != doctest::Approx(b));
    const float whole = feature(two.stages[0], program);
    CHECK(whole > std::min(a, b));
    CHECK(whole < std::max(a, b));
    CHECK(std::abs(whole - a) < std::abs(whole - b));  // weighed by the nests' bounds, not a plain mean
    CHECK(feature(two.stages[1], program) == 0.0f);
    for (auto pooling : {costmodel::Pooling::Max, costmodel::Pooling::Sum, costmodel::Pooling::Dominant})
      CHECK(feature(two.pooled(pooling), program) == whole);
  }
}

TEST_CASE("features: each nest's share of the program's cycles, and the dominant nest's row (version 9)") {
  // A scaling, then a projection of what it wrote: the projection's nest, the second, does
  // nearly all the work.
  auto w = ir::bind(ir::parse_op("op scale_proj(X: f32[M, K], W: f32[K, N]) -> Y: f32[M, N] {\n"
                                 "  s[m, k] = X[m, k] * 2.0\n  Y[m, n] += s[m, k] * W[k, n]\n}"),
                    ir::parse_sizes("M=64,N=256,K=128"));
  auto f = costmodel::featurize(w, ir::naive_schedule(w), kAvx512);
  REQUIRE(f.stages.size() == 2);
  const float first = feature(f.stages[0], "stage_share"), second = feature(f.stages[1], "stage_share");
  CHECK(first > 0);
  CHECK(second > 0.9f);
  CHECK(first + second == doctest::Approx(1));
  // The second row, with the first's whole-program features (0 in the others).
  const std::set<std::string> program = {"inlined",        "fuse_rows_log",         "stages",
                                         "temp_bytes_log", "program_roof_work_log", "program_roof_steps_log"};
  const auto dominant = f.pooled(costmodel::Pooling::Dominant);
  const auto& docs = costmodel::feature_docs();
  for (size_t k = 0; k < docs.size(); ++k) {
    CAPTURE(docs[k].first);
    CHECK(costmodel::whole_program_feature(k) == (program.count(docs[k].first) == 1));
    CHECK(dominant[k] == (program.count(docs[k].first) ? f.stages[0][k] : f.stages[1][k]));
    if (program.count(docs[k].first)) CHECK(f.stages[1][k] == 0.0f);
  }
  CHECK(feature(dominant, "stages") == 2.0f);
  // A model of an earlier version reads the prefix of that row.
  std::vector<float> prefix(costmodel::feature_count(8));
  f.pool_into(prefix.data(), costmodel::Pooling::Dominant, prefix.size());
  CHECK(prefix == std::vector<float>(dominant.begin(), dominant.begin() + prefix.size()));
  // One nest: its share is the whole.
  auto matmul = library_workload("matmul", "M=64,N=128,K=32");
  CHECK(feature(costmodel::featurize(matmul, ir::naive_schedule(matmul), kAvx512).stages[0], "stage_share") == 1.0f);
}
