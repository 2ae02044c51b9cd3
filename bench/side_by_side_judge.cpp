#include "bench/side_by_side_judge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "db/store.hpp"
#include "support/stats.hpp"

namespace tiletune::bench {
namespace {

//! Side-by-side sessions of `rivals` (measure::Measurer::side_by_side), each rival's times
//! over them combined as db::time_of combines a record's sessions (the geometric mean of each
//! session's median: a session on a slower machine shifts all alike). A rival that fails in a
//! session is left out; a session whose worker failed every rival alike (it died or hung: they
//! share one) is lost instead. Empty where no session timed any.
std::map<std::string, double> time_in_turns(measure::Measurer& timer, const std::vector<ir::Schedule>& rivals,
                                            int sessions, const std::string& what) {
  std::vector<std::vector<double>> times(rivals.size());
  std::vector<std::vector<std::size_t>> counts(rivals.size());
  std::set<std::size_t> failed;
  for (int session = 1; session <= sessions; ++session) {
    auto results = timer.side_by_side(rivals);
    if (std::none_of(results.begin(), results.end(), [](auto& r) { return r.ok(); })) {
      std::cerr << what << ": session " << session << " lost"
                << (results.empty() ? "" : " (" + results.front().error_message + ")") << "\n";
      continue;
    }
    double best = INFINITY;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        if (failed.insert(i).second)
          std::cerr << what << ": " << rivals[i].key() << " failed side by side: " << results[i].error_message << "\n";
        continue;
      }
      times[i].insert(times[i].end(), results[i].times_s.begin(), results[i].times_s.end());
      counts[i].push_back(results[i].times_s.size());
      best = std::min(best, results[i].median_s());
    }
    std::fprintf(stderr, "%s: session %d of %zu, fastest %.4f ms\n", what.c_str(), session, rivals.size(), best * 1e3);
  }
  std::map<std::string, double> out;
  for (std::size_t i = 0; i < rivals.size(); ++i)
    if (!failed.count(i) && !times[i].empty())
      out[rivals[i].key()] = db::time_of(times[i], nlohmann::json{{db::kSessionsParam, counts[i]}}.dump());
  return out;
}

//! Front-runners: contenders within this of the fastest in the screening session. Within one
//! session, configs of one op moved against each other by up to 7 % (atb_sigmoid's 16 fastest
//! in two sessions), so one at 1.25x is not within 5 % of the best.
constexpr double kFrontSpread = 1.25;

// Why three steps: a best picked and judged by the same times is the luckiest of its near-ties
// as often as the fastest (atb_sigmoid's seed config: out of the goal in one session, the best
// in the next; three sessions of 177 contenders reached the goal on it in 3 trials in one run
// and never in the next).
}  // namespace

Judgement judge(const codegen::Backend& backend, const ir::Workload& w, const measure::MeasureOptions& options,
                const std::vector<ir::Schedule>& contenders, int sessions, const std::string& op) {
  measure::Measurer timer(backend, w, options);
  const auto screen = time_in_turns(timer, contenders, 1, op + " screening");
  if (screen.empty()) return {};
  double fastest = INFINITY;
  for (auto& [key, t] : screen) fastest = std::min(fastest, t);
  std::vector<ir::Schedule> front;
  for (auto& c : contenders)
    if (auto it = screen.find(c.key()); it != screen.end() && it->second <= kFrontSpread * fastest) front.push_back(c);
  const int pick_sessions = std::max(1, sessions / 2);
  const auto pick =
      time_in_turns(timer, front, pick_sessions, op + " picking the best of " + std::to_string(front.size()));
  const auto judged = time_in_turns(timer, front, std::max(1, sessions - pick_sessions), op + " judging");
  Judgement out;
  double best = INFINITY;
  for (auto& [key, t] : pick)
    if (t < best && judged.count(key)) {
      best = t;
      out.best = key;
    }
  if (out.best.empty()) return {};
  std::vector<double> shift;
  for (auto& [key, t] : judged) {
    out.time[key] = t;
    shift.push_back(t / screen.at(key));
  }
  const double to_judged = median_of(shift);
  for (auto& [key, t] : screen) out.time.emplace(key, t * to_judged);
  return out;
}

}  // namespace tiletune::bench
