// costmodel/ranking.hpp
#pragma once
#include <string>
#include <vector>

namespace tiletune::costmodel {

//! Training labels: each candidate's speed relative to the fastest of its group, in (0, 1];
//! 0 for failures (latency +infinity).
std::vector<float> relative_speed(const std::vector<std::string>& group, const std::vector<double>& latency_s);

//! How well scores (higher = predicted faster) rank measured latencies, averaged over groups
//! (workloads) with at least two successful candidates.
struct RankingMetrics {
  double pairwise_accuracy = 0;  //!< pairs of different latency ordered as measured (failures slowest)
  double spearman = 0;           //!< rank correlation of score and speed, successful candidates
  double top1 = 0;               //!< best latency / latency of the model's first pick (TenSet)
  double top5 = 0;               //!< best latency / best latency among the model's 5 picks
  int groups = 0;
  int samples = 0;
};
//! Metrics of several evaluations, each weighted by its groups.
RankingMetrics combine(const std::vector<RankingMetrics>& parts);

RankingMetrics evaluate_ranking(const std::vector<std::string>& group, const std::vector<double>& latency_s,
                                const std::vector<float>& score);

}  // namespace tiletune::costmodel
