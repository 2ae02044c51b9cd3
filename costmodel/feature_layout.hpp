// costmodel/feature_layout.hpp: where each feature sits in a row (internal to costmodel/: the
// extraction in features.cpp writes these slots, feature_docs.cpp names them in the same order).
#pragma once

namespace tiletune::costmodel::layout {

constexpr int kIntensityCurveSteps = 4;
constexpr int kTopBuffers = 3;
//! Per buffer access (after Ansor's per-store buffer features): offsets within a buffer's block.
enum BufferFeature {
  kBufBytes,       // log2 bytes of it one micro-kernel call touches
  kBufLines,       // log2 cache lines of it one micro-kernel call touches
  kBufUnique,      // log2 bytes of it the whole stage touches
  kBufReuseType,   // 0 none, 1 across a tile loop, 2 within the register tile
  kBufReuseDist,   // log2 bytes touched between two uses (the reuse loop's body)
  kBufReuseCount,  // log2 trips of the reuse loop
  kBufStride,      // log2(1 + |elements between neighbours of the innermost loop|)
  kBufPacked,      // 1 if copied into panels first
  kBufferFeatures
};
//! Per buffer, appended by version 5.
enum BufferLineFeature {
  kBufLineUseL1,    // bytes of it used over the bytes of the cache lines it brings, in the L1 block
  kBufOuterStride,  // log2(1 + |elements between neighbours of the innermost tile loop|)
  kBufferLineFeatures
};

enum Feature {
  kFlops,
  kPoints,
  kRegPoints,
  kVectorLanes,
  kVectorReduce,
  kAccumulators,
  kRegisterPressure,
  kLoadsPerUpdate,
  kReduceInner,
  kUnroll,
  kParallel,
  kParallelBalance,
  kOuterLoops,
  kEdgeFraction,
  kInnerUnitStride,
  kFootprintReg,
  kFitL1,
  kFitL2,
  kFitL3,
  kFootprintTotal,
  kIntensityReg,
  kIntensityL2,
  kPacked,
  kPackedBytes,
  kEpilogue,
  kInlined,
  kFuseRows,
  kStages,
  kTempBytes,
  kReductionPosition,
  kOutputStores,
  kPrefetch,
  kParallelLoops,
  kLoopTrips,
  kFootprintCurve,
  kIntensityCurve,  // kIntensityCurveSteps features
  kRoofCompute = kIntensityCurve + kIntensityCurveSteps,
  kRoofMemory,
  kRoofTotal,
  kBuffers,  // kTopBuffers x kBufferFeatures, the largest buffer first
  // Version 4 appends (a version-3 model reads the prefix it was trained on):
  kScatterStores = kBuffers + kTopBuffers * kBufferFeatures,
  kPanelReads,
  kRowReads,
  kBufferIsOutput,  // kTopBuffers features: which of the top buffers the stage stores
  // Version 5 appends: memory in whole cache lines (strided and transposed accesses waste them),
  // gathers and scatters lane by lane, against an ideal that moves the data once.
  kRoofLines = kBufferIsOutput + kTopBuffers,
  kLineUseReg,
  kLineUseL1,
  kLineUseL2,
  kLoadIssue,
  kRoofIssue,
  kRoofBound,
  kBufferLines,  // kTopBuffers x kBufferLineFeatures, the buffers of kBuffers in their order
  // Version 6 appends the threads' shares of the work, counted with the last, partial tiles.
  kParallelWork = kBufferLines + kTopBuffers * kBufferLineFeatures,
  kRoofWork,
  // Version 7 appends the micro-kernel's loads as its reduction loop issues them: the body's
  // alone (a fused epilogue's run once per output) and the vectors that straddle cache lines.
  kBodyLoads,
  kSplitLoads,
  kEpilogueLoads,
  kRoofSteps,
  // Version 8 appends whole-program rooflines (first row only): the nests' cycles summed over
  // their bounds summed, the program's estimate over its bound, where a per-nest ratio pooled by
  // max lets a small nest's stand for all.
  kProgramRoofWork,
  kProgramRoofSteps,
  // Version 9 appends the nest's share of the program's estimated cycles (the cycles of
  // kRoofWork over the program's), by which Pooling::Dominant picks the row that stands for it.
  kStageShare,
  kCount
};

//! The whole-program features: set in the first row only (0 in the others), so that every
//! pooling keeps them.
inline constexpr Feature kProgramFeatures[] = {kInlined, kFuseRows, kStages, kTempBytes, kProgramRoofWork,
                                               kProgramRoofSteps};

static_assert(kCount == 94, "name the features in feature_docs.cpp and raise kFeatureVersion with them");

}  // namespace tiletune::costmodel::layout
