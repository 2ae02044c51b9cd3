// costmodel/features.hpp
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/loop_nest.hpp"

namespace tiletune::costmodel {

//! Version of the feature set: models record it, and load only where this build's rows begin
//! with their version's features (feature_count(version)).
//! 2: the prefetch distance, parallel loops, where the long loops sit and the footprint curve,
//! so that every knob of ir/knobs.hpp reaches the features.
//! 3: per buffer (the three largest, after Ansor's per-store features) its bytes and cache
//! lines per micro-kernel call, unique bytes, reuse type, distance and count, stride along the
//! innermost loop and packing; the arithmetic-intensity curve at four depths; roofline
//! estimates (compute, memory traffic into each cache level) relative to the stage's ideal.
//! 4: appended how the SIMD axis meets memory (outputs stored lane by lane, reads fed from
//! panels or strided rows) and which of the top buffers is the stored one.
//! 5: appended memory counted in whole cache lines: the roofline's traffic in lines, the share
//! of the bytes of the lines brought in that are used (per stage and per top buffer), and each
//! top buffer's stride along the innermost tile loop.
//! 6: appended the threads' shares of the work with the parallel loops' partial last tiles
//! counted at their size, and the roofline estimate of the busiest thread.
//! 7: appended the micro-kernel's loads per reduction step of its body alone (version 3's count
//! included a fused epilogue's reads), the vectors among them that straddle cache lines, the
//! epilogue's loads per output, and the roofline estimate with those loads.
//! 8: appended the program's roofline estimates (its nests' cycles over their bounds, both
//! summed), which ops of several nests need: a ratio per nest says nothing of the nest's share.
//! 9: appended each nest's share of the program's estimated cycles (by which Pooling::Dominant
//! picks a program's row, and which tells a model scoring each nest apart what the nest weighs).
//! A version that only appends keeps the models of the one before: each reads the prefix of
//! every row that it was trained on (feature_count(version)).
inline constexpr int kFeatureVersion = 9;

//! Names of the features, one line of documentation each, in vector order.
const std::vector<std::pair<std::string, std::string>>& feature_docs();
std::size_t feature_count();
//! Whether feature `i` (in feature_docs' order) is a whole-program one: set in a candidate's first
//! row only, 0 in the others, so that every pooling keeps it.
bool whole_program_feature(std::size_t i);
//! Features of a version this build's rows begin with: a model trained on it reads that prefix
//! of every row. 0 for a version they do not begin with (1 and 2, whose features differ).
std::size_t feature_count(int version);
//! The version whose features are the first `count` of this build's; 0 if none.
int feature_version_of(std::size_t count);

using FeatureRow = std::vector<float>;

//! How a model that reads one fixed-length vector per candidate combines its rows.
//! Sum: each feature summed over the nests (the first models, cpu-simd8's shipped one among them).
//! Max: each feature's largest over the nests, feature by feature, where a sum would mix
//! meanings: most features are per-nest ratios or log2 scales (a sum of log2 flops is the log
//! of a product). Ranked better than sums (docs/cost-models.md, recipes v1 and v2).
//! Dominant: the row of the nest with the largest share of the program's estimated cycles
//! (stage_share, the first of equals), with the first row's whole-program features: one nest's
//! features together, where max pooling joins one nest's vector width to another's strides and
//! a third's loop trips. Ranked ops outside the corpus better than max (docs/cost-models.md,
//! "Which nest stands for a program").
//! PerNest: no pooling: a model scores each nest's row (with the whole-program features, as
//! nest_row_into) and adds the scores, as Ansor's and TenSet's XGBoost do, so that the nests the
//! dominant row leaves out (a small nest done slowly, a centred temporary inlined or not) count.
//! On a corpus of 230 workloads it ranked ops outside it and held-out ops better than the
//! dominant row (docs/cost-models.md, "Each nest scored apart").
//! NestTimes: each nest's row scored apart as PerNest, each score read as minus the log of the
//! nest's time, and the program's time as its nests' times added: -log(sum of exp(-score)).
//! Scores added multiply the nests' times, so that a nest of 1 % of the program moves it as
//! much as the nest of 99 %; times added weigh each nest by its share. New xgb models score so:
//! on the same corpus they rank ops outside it and held-out ops better than PerNest
//! (docs/cost-models.md, "A program's time is its nests' times added").
enum class Pooling { Sum, Max, Dominant, PerNest, NestTimes };
//! Whether a model of this pooling reads one row per nest (PerNest, NestTimes).
constexpr bool per_nest(Pooling how) { return how == Pooling::PerNest || how == Pooling::NestTimes; }

//! Features of one candidate: one row per loop nest it runs (a statement, with what is inlined
//! or fused into it); whole-program features sit in the first row (0 in the others) so that
//! either pooling keeps them. Deterministic; changes with the schedule.
struct Features {
  std::vector<FeatureRow> stages;
  //! The fixed-length vector of the program.
  FeatureRow pooled(Pooling how = Pooling::Sum) const;
  //! The first `width` features of pooled(how) written to row[0, width); Error(InvalidInput)
  //! for a row of another length than feature_count().
  void pool_into(float* row, Pooling how, std::size_t width) const;
  //! The first `width` features of nest `nest`'s row, with the program's whole-program features
  //! (the first row's), to row[0, width): what Pooling::Dominant and PerNest read of a nest.
  void nest_row_into(std::size_t nest, float* row, std::size_t width) const;
};

//! Error(InvalidInput) unless the row has feature_count() features.
void check_feature_row(const FeatureRow& row);

//! Features of a lowered candidate. Footprints are compared with the target's cache sizes.
Features extract_features(const ir::Workload& w, const ir::LoopNest& nest, const ir::TargetTraits& t);
//! Lowers and extracts; throws Error(InvalidInput) if the schedule is invalid for the workload.
Features featurize(const ir::Workload& w, const ir::Schedule& s, const ir::TargetTraits& t);

//! Features of many schedules, on all cores; an entry is nullopt where the schedule is invalid.
std::vector<std::optional<Features>> featurize_all(const ir::Workload& w, const std::vector<ir::Schedule>& schedules,
                                                   const ir::TargetTraits& t);

}  // namespace tiletune::costmodel
