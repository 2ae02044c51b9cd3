// The features' names and documentation, in row order (feature_layout.hpp), and the versions
// whose rows are prefixes of this build's.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/feature_layout.hpp"
#include "costmodel/features.hpp"

namespace tiletune::costmodel {

using namespace layout;

namespace {

const std::vector<std::pair<std::string, std::string>> kDocs = {
    {"flops_log", "log2(1 + arithmetic operations of the stage)"},
    {"points_log", "log2 of the iteration points of the stage (all axes)"},
    {"reg_points", "points of the register tile (spatial innermost blocks)"},
    {"vector_lanes_log", "log2(1 + SIMD lanes used); 0 if scalar"},
    {"vector_reduce", "1 if the SIMD axis is a reduction axis"},
    {"accumulators", "accumulators held in registers (vectors, or scalars if not vectorized)"},
    {"register_pressure", "accumulators over the target's vector registers"},
    {"loads_per_update", "distinct loads per reduction step of the micro-kernel, per accumulator"},
    {"reduce_inner_log", "log2 of the micro-kernel's reduction block (product over reduction axes)"},
    {"unroll", "unroll factor of the micro-kernel's reduction loop"},
    {"parallel_log", "log2(1 + iterations of the parallel loops)"},
    {"parallel_balance", "iterations / (threads * ceil(iterations / threads)); 1 is perfectly balanced"},
    {"outer_loops", "number of tile loops around the micro-kernel"},
    {"edge_fraction", "fraction of the points computed by edge tiles (tails)"},
    {"inner_unit_stride", "fraction of accesses unit-stride or invariant along the innermost reduction loop"},
    {"footprint_reg_log", "log2 of bytes touched by one micro-kernel call"},
    {"fit_l1", "fraction of tile loops (innermost outward) whose footprint fits the L1 cache"},
    {"fit_l2", "fraction of tile loops whose footprint fits the L2 cache"},
    {"fit_l3", "fraction of tile loops whose footprint fits the L3 cache"},
    {"footprint_total_log", "log2 of bytes of all buffers the stage touches"},
    {"intensity_reg", "flops per byte touched by one micro-kernel call"},
    {"intensity_l2", "flops per byte at the outermost loop whose footprint fits L2"},
    {"packed", "inputs packed into panels"},
    {"packed_bytes_log", "log2(1 + bytes copied by packing)"},
    {"epilogue", "1 if the next stage is fused at the store"},
    {"inlined", "stages of the op inlined into their consumers"},
    {"fuse_rows_log", "log2(1 + rows per block when all stages share a row loop)"},
    {"stages", "loop nests the op runs"},
    {"temp_bytes_log", "log2(1 + bytes of materialized temporaries and panels)"},
    {"reduction_position", "position of the first reduction tile loop in the order, 0 outermost .. 1 innermost"},
    {"output_stores_log", "log2 of stores of output points (reduction blocks outside the register tile)"},
    {"prefetch", "iterations of the micro-kernel's reduction loop ahead that its vector loads are prefetched"},
    {"parallel_loops", "tile loops collapsed into the parallel loop"},
    {"loop_trips_by_depth",
     "mean over tile loops of depth (1 outermost) times log2(1 + trips): where the long loops sit"},
    {"footprint_curve_log", "mean over tile-loop depths of log2(1 + bytes touched inside them): the footprint curve"},
    {"intensity_curve_0", "flops per byte touched inside the outermost tile loop (the whole stage)"},
    {"intensity_curve_1", "flops per byte touched a third of the way down the tile loops"},
    {"intensity_curve_2", "flops per byte touched two thirds of the way down the tile loops"},
    {"intensity_curve_3", "flops per byte touched by one micro-kernel call"},
    {"roof_compute_log",
     "log2 of the estimated compute cycles (FMA and load issue, lanes used, threads busy, spills) over the "
     "stage's ideal (all lanes and threads): comparable across ops"},
    {"roof_memory_log",
     "log2 of the estimated cycles moving data into L1, L2 and L3 (the blocks that fit each, their "
     "executions, each level's bandwidth) over the stage's ideal compute cycles"},
    {"roof_total_log", "log2 of (max of the two estimates + packing) over the ideal: a roofline estimate of the stage"},
};

//! Appended by version 4, after the per-buffer block.
const std::vector<std::pair<std::string, std::string>> kDocsV4 = {
    {"scatter_stores_log",
     "log2(1 + elements between the output's neighbouring lanes) when the SIMD axis is spatial and not the output's "
     "contiguous one (its vectors are stored lane by lane); 0 otherwise"},
    {"panel_reads", "tensors read strided along the SIMD axis that are copied into panels to feed its vectors"},
    {"row_reads", "tensors read at a constant stride of 2 or more along the SIMD axis (strided window rows)"},
};

//! Appended by version 5, after buffer*_is_output.
const std::vector<std::pair<std::string, std::string>> kDocsV5 = {
    {"roof_lines_log",
     "log2 of roof_memory's cycles with each block's traffic counted in whole cache lines (its contiguous runs "
     "rounded up to lines: what strided and transposed accesses really move), over the stage's bound (roof_bound)"},
    {"line_use_reg", "bytes one micro-kernel call touches over the bytes of the cache lines they lie in"},
    {"line_use_l1",
     "bytes touched over the bytes of their cache lines, in the outermost tile block whose lines fit the L1 cache "
     "(the micro-kernel's if none)"},
    {"line_use_l2", "the same in the outermost tile block whose lines fit the L2 cache"},
    {"load_issue_per_update",
     "loads_per_update with a strided row's vector counted as the lanes it gathers one by one"},
    {"roof_issue_log",
     "log2 of the estimated cycles issuing FMAs, loads (gathers lane by lane, two a cycle) and stores (scatters and "
     "reductions' results lane by lane, one a cycle), threads busy, over the stage's bound"},
    {"roof_bound_log",
     "log2 of (the larger of roof_issue and the traffic in whole cache lines, plus packing) over the stage's bound: "
     "the larger of its ideal compute and moving its unique bytes once from the level that holds them"},
};

//! Appended by version 6, after the per-buffer line block.
const std::vector<std::pair<std::string, std::string>> kDocsV6 = {
    {"parallel_work",
     "the threads' mean share of the stage's points over the largest share, with each parallel loop's last, partial "
     "tile counted at its size and the iterations dealt out as the static schedule does (1/threads when serial)"},
    {"roof_work_log",
     "roof_bound_log with the threads busy in proportion to parallel_work instead of the loop's trips"},
};

//! Appended by version 7.
const std::vector<std::pair<std::string, std::string>> kDocsV7 = {
    {"body_loads_per_update",
     "loads per reduction step of the micro-kernel, per accumulator, of the body alone (loads_per_update also "
     "counts a fused epilogue's reads, which run once per output, and the stage's own value)"},
    {"split_loads_per_update",
     "of body_loads_per_update, the vector loads that straddle one more cache line than their bytes need, by where "
     "their index terms and offsets start them in a line, each axis over its extent (panels start on the line)"},
    {"epilogue_loads_per_output", "loads of a fused epilogue (the stage's own value excepted) per accumulator"},
    {"roof_steps_log",
     "roof_work_log with the micro-kernel's loads those of its body, a straddling vector counted as two"},
};
const std::vector<std::pair<std::string, std::string>> kDocsV8 = {
    {"program_roof_work_log",
     "log2(1 + the cycles of roof_work_log summed over the program's nests over their bounds summed), first row "
     "only: the program's estimated cycles over its bound, where a ratio per nest says nothing of the nest's share "
     "(a fused epilogue's reads count as in roof_work_log)"},
    {"program_roof_steps_log", "the same with the cycles of roof_steps_log"},
};
const std::vector<std::pair<std::string, std::string>> kDocsV9 = {
    {"stage_share",
     "the nest's share of the program's estimated cycles (those of roof_work_log over those of "
     "program_roof_work_log): the dominant pooling reads the row of the largest"},
};

//! The per-buffer features' names: buffer i of the stage, the largest first.
std::vector<std::pair<std::string, std::string>> all_docs() {
  auto docs = kDocs;
  const std::pair<const char*, const char*> per_buffer[] = {
      {"bytes_log", "log2 bytes of it one micro-kernel call touches"},
      {"lines_log", "log2 cache lines (64 B) of it one micro-kernel call touches"},
      {"unique_log", "log2 bytes of it the whole stage touches"},
      {"reuse_type", "0 no reuse, 1 reused across a tile loop it does not depend on, 2 within the register tile"},
      {"reuse_distance_log", "log2 bytes (all buffers) touched between two uses: the reuse loop's body"},
      {"reuse_count_log", "log2 trips of the reuse loop"},
      {"stride_log", "log2(1 + |elements between the neighbours of the micro-kernel's innermost loop|)"},
      {"packed", "1 if copied into panels first"},
  };
  for (int b = 0; b < kTopBuffers; ++b)
    for (auto& [name, doc] : per_buffer)
      docs.push_back({"buffer" + std::to_string(b) + "_" + name,
                      std::string(doc) + " (the stage's buffer " + std::to_string(b) +
                          " by bytes touched, the output included; 0 if it has fewer)"});
  docs.insert(docs.end(), kDocsV4.begin(), kDocsV4.end());
  for (int b = 0; b < kTopBuffers; ++b)
    docs.push_back({"buffer" + std::to_string(b) + "_is_output",
                    "1 if the stage's buffer " + std::to_string(b) + " (as above) is the one it stores"});
  docs.insert(docs.end(), kDocsV5.begin(), kDocsV5.end());
  for (int b = 0; b < kTopBuffers; ++b) {
    const std::string which = " (the stage's buffer " + std::to_string(b) + " as above; 0 if it has fewer)";
    docs.push_back({"buffer" + std::to_string(b) + "_line_use_l1",
                    "bytes of it touched over the bytes of their cache lines, in the block of line_use_l1" + which});
    docs.push_back({"buffer" + std::to_string(b) + "_outer_stride_log",
                    "log2(1 + |elements between the neighbours of the innermost tile loop that iterates|)" + which});
  }
  docs.insert(docs.end(), kDocsV6.begin(), kDocsV6.end());
  docs.insert(docs.end(), kDocsV7.begin(), kDocsV7.end());
  docs.insert(docs.end(), kDocsV8.begin(), kDocsV8.end());
  docs.insert(docs.end(), kDocsV9.begin(), kDocsV9.end());
  return docs;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& feature_docs() {
  static const auto docs = all_docs();
  return docs;
}
std::size_t feature_count() { return kCount; }

bool whole_program_feature(std::size_t i) {
  return std::any_of(std::begin(kProgramFeatures), std::end(kProgramFeatures),
                     [&](Feature f) { return static_cast<std::size_t>(f) == i; });
}

namespace {
//! The versions this build's rows begin with, oldest first: each appended to the one before.
constexpr std::pair<int, std::size_t> kPrefixVersions[] = {
    {3, kScatterStores}, {4, kRoofLines}, {5, kParallelWork}, {6, kBodyLoads}, {7, kProgramRoofWork},
    {8, kStageShare}, {kFeatureVersion, kCount}};
}  // namespace

std::size_t feature_count(int version) {
  for (auto [v, count] : kPrefixVersions)
    if (v == version) return count;
  return 0;
}

int feature_version_of(std::size_t count) {
  for (auto [v, n] : kPrefixVersions)
    if (n == count) return v;
  return 0;
}

}  // namespace tiletune::costmodel
