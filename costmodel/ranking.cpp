#include "costmodel/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace tiletune::costmodel {

namespace {

std::map<std::string, std::vector<std::size_t>> by_group(const std::vector<std::string>& group) {
  std::map<std::string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < group.size(); ++i) out[group[i]].push_back(i);
  return out;
}

//! Ranks 1..n with ties given their average rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  double n = static_cast<double>(a.size());
  double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - ma) * (b[i] - mb);
    va += (a[i] - ma) * (a[i] - ma);
    vb += (b[i] - mb) * (b[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

}  // namespace

std::vector<float> relative_speed(const std::vector<std::string>& group, const std::vector<double>& latency_s) {
  std::vector<float> out(group.size(), 0.0f);
  for (auto& [name, idx] : by_group(group)) {
    double best = INFINITY;
    for (auto i : idx) best = std::min(best, latency_s[i]);
    for (auto i : idx)
      if (std::isfinite(latency_s[i]) && latency_s[i] > 0) out[i] = static_cast<float>(best / latency_s[i]);
  }
  return out;
}

RankingMetrics combine(const std::vector<RankingMetrics>& parts) {
  RankingMetrics m;
  for (auto& p : parts) {
    m.pairwise_accuracy += p.pairwise_accuracy * p.groups;
    m.spearman += p.spearman * p.groups;
    m.top1 += p.top1 * p.groups;
    m.top5 += p.top5 * p.groups;
    m.groups += p.groups;
    m.samples += p.samples;
  }
  if (m.groups > 0) {
    m.pairwise_accuracy /= m.groups;
    m.spearman /= m.groups;
    m.top1 /= m.groups;
    m.top5 /= m.groups;
  }
  return m;
}

RankingMetrics evaluate_ranking(const std::vector<std::string>& group, const std::vector<double>& latency_s,
                                const std::vector<float>& score) {
  std::vector<RankingMetrics> per_group;
  for (auto& [name, idx] : by_group(group)) {
    std::vector<std::size_t> ok;
    for (auto i : idx)
      if (std::isfinite(latency_s[i])) ok.push_back(i);
    if (ok.size() < 2) continue;
    double agree = 0, pairs = 0;
    for (std::size_t a = 0; a < idx.size(); ++a)
      for (std::size_t b = a + 1; b < idx.size(); ++b) {
        double la = latency_s[idx[a]], lb = latency_s[idx[b]];
        if (la == lb) continue;  // equal (or both failed): no order to get right
        pairs += 1;
        float sa = score[idx[a]], sb = score[idx[b]];
        if (sa == sb)
          agree += 0.5;
        else
          agree += (la < lb) == (sa > sb);
      }
    std::vector<double> speed, s;
    for (auto i : ok) {
      speed.push_back(-latency_s[i]);
      s.push_back(score[i]);
    }
    double best = -*std::max_element(speed.begin(), speed.end());
    std::vector<std::size_t> picks = idx;
    std::stable_sort(picks.begin(), picks.end(), [&](auto a, auto b) { return score[a] > score[b]; });
    auto top = [&](std::size_t k) {
      double found = INFINITY;
      for (std::size_t i = 0; i < k && i < picks.size(); ++i) found = std::min(found, latency_s[picks[i]]);
      return std::isfinite(found) ? best / found : 0.0;
    };
    per_group.push_back({pairs > 0 ? agree / pairs : 1, pearson(ranks(speed), ranks(s)), top(1), top(5), 1,
                         static_cast<int>(idx.size())});
  }
  return combine(per_group);
}

}  // namespace tiletune::costmodel
