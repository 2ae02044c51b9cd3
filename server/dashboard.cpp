// The dashboard's aggregates (see dashboard.hpp): the overview, and one pass over a workload's
// records; the cost model's view is in dashboard_model.cpp.
#include "server/dashboard.hpp"
#include "server/dashboard_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <optional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "support/error.hpp"
#include "tuner/dataset.hpp"

namespace tiletune::server::dashboard {

using nlohmann::json;

namespace {

//! The fastest records are always drawn as points, however many are thinned out.
constexpr int kFastestKept = 100;
constexpr int kTop = 10;
//! Scans kept in memory: the workloads looked at last.
constexpr size_t kKeptScans = 4;
//! A knob with more distinct values than this is left out of the knob table and heatmap
//! (outer tile levels can take hundreds: nothing a person reads as a cell).
constexpr size_t kMostValues = 24;

//! Numbers by value (a tile of 2 before one of 16), other values as text, numbers first.
bool natural_less(const std::string& a, const std::string& b) {
  auto number = [](const std::string& s, double& v) {
    char* end = nullptr;
    v = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);  // "nan" would break the order
  };
  double x, y;
  bool nx = number(a, x), ny = number(b, y);
  if (nx && ny) return x < y || (x == y && a < b);
  if (nx != ny) return nx;
  return a < b;
}


//! A best-so-far line: a point wherever a latency improves on the best before it, and one at
//! the last x (so that a flat tail is drawn to its end).
struct BestSoFar {
  double best = INFINITY;
  std::int64_t last_x = 0;
  json points = json::array();

  void add(std::int64_t x, double seconds) {
    last_x = x;
    if (seconds < best) {
      best = seconds;
      points.push_back({x, best});
    }
  }
  json finish() {
    if (std::isfinite(best) && points.back()[0] != last_x) points.push_back({last_x, best});
    return points;
  }
};

//! One record as the pages draw it; knobs are (knob id, value id) pairs of its Scan.
struct Row {
  std::int64_t trial;
  double median_s;  // +inf for a failure
  double spread;
  std::string error, config_key;
  std::vector<std::pair<int, int>> knobs;
  std::int64_t created_unix_ms;
};

//! A workload's records on a target, parsed once, with the knob names and values interned.
struct Scan {
  std::mutex mu;
  std::int64_t last_id = 0;
  std::vector<Row> rows;
  std::vector<std::string> knob_names;
  std::unordered_map<std::string, int> knob_index;
  std::vector<std::vector<std::string>> values;
  std::vector<std::unordered_map<std::string, int>> value_index;

  void reset() {
    last_id = 0;
    rows.clear();
    knob_names.clear();
    knob_index.clear();
    values.clear();
    value_index.clear();
  }

  //! Appends a page of records, their configs parsed on two threads (the most of a first scan).
  void add(const std::vector<db::Record>& page) {
    std::vector<std::map<std::string, std::string>> knobs(page.size());
    auto parse = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) knobs[i] = knob_values(page[i].config_json);
    };
    auto half = std::async(std::launch::async, parse, page.size() / 2, page.size());
    parse(0, page.size() / 2);
    half.get();
    for (size_t i = 0; i < page.size(); ++i) add(page[i], knobs[i]);
  }

  void add(const db::Record& r, const std::map<std::string, std::string>& knobs) {
    Row row{static_cast<std::int64_t>(rows.size()) + 1, r.median_s(), r.spread(), r.error_class,
            r.config_key, {}, r.created_unix_ms};
    for (auto& [k, v] : knobs) {
      auto [ki, fresh] = knob_index.emplace(k, static_cast<int>(knob_names.size()));
      if (fresh) {
        knob_names.push_back(k);
        values.emplace_back();
        value_index.emplace_back();
      }
      auto& index = value_index[ki->second];
      auto [vi, new_value] = index.emplace(v, static_cast<int>(values[ki->second].size()));
      if (new_value) values[ki->second].push_back(v);
      row.knobs.push_back({ki->second, vi->second});
    }
    rows.push_back(std::move(row));
    last_id = r.id;
  }
};

//! Scans of the workloads looked at last, per store (the daemon's, a report's).
std::shared_ptr<Scan> cached_scan(db::Store& store, const std::string& workload, const std::string& target) {
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::shared_ptr<Scan>>> kept;  // most recent last
  std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(&store)) + "/" + workload + "/" + target;
  std::lock_guard lock(mu);
  auto it = std::find_if(kept.begin(), kept.end(), [&](auto& e) { return e.first == key; });
  std::shared_ptr<Scan> scan = it == kept.end() ? std::make_shared<Scan>() : it->second;
  if (it != kept.end()) kept.erase(it);
  kept.push_back({key, scan});
  if (kept.size() > kKeptScans) kept.erase(kept.begin());
  return scan;
}

//! The workload's records on the target as a Scan, kept between calls: only records newer than
//! the last one seen are read and parsed again (parsing 100,000 configs took most of a second).
std::shared_ptr<Scan> scanned(db::Store& store, const std::string& workload, const std::string& target) {
  std::shared_ptr<Scan> scan = cached_scan(store, workload, target);
  std::lock_guard scan_lock(scan->mu);
  db::RecordQuery q;
  q.workload_key = workload;
  q.target_key = target;
  q.limit = kPage;
  if (!scan->rows.empty()) {
    // Still the same records (another database may sit at the same path or address)?
    db::RecordQuery last = q;
    last.limit = 1;
    last.config_key = scan->rows.back().config_key;
    auto found = store.records(last);
    if (found.empty() || found[0].id != scan->last_id || store.count(q) < static_cast<std::int64_t>(scan->rows.size()))
      scan->reset();
  }
  for (int pass = 0; pass < 2; ++pass) {
    q.after_id = scan->last_id;
    for (;;) {
      auto page = store.records(q);
      scan->add(page);
      if (static_cast<int>(page.size()) < q.limit) break;
      q.after_id = page.back().id;
    }
    // A record committed out of id order (another connection) is missed by reading after the
    // last id: then all are read again, once.
    if (store.count(q) == static_cast<std::int64_t>(scan->rows.size())) break;
    scan->reset();
  }
  return scan;
}

//! The FLOPs of a stored workload; nullopt for an op this version cannot rebuild (its records
//! are still listed, without GFLOP/s).
std::optional<double> flops_of(const db::WorkloadRow& w) {
  try {
    return tuner::workload_from_row(w).flops();
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

json target_json(const db::TargetRow& t) {
  json fp = json::parse(t.fingerprint_json, nullptr, false);
  return {{"key", t.key}, {"backend", t.backend}, {"family", t.family}, {"fingerprint", fp.is_discarded() ? json() : fp}};
}

std::map<std::string, std::string> knob_values(const std::string& config_json) {
  std::map<std::string, std::string> out;
  json c = json::parse(config_json, nullptr, false);
  if (!c.is_object()) return out;
  if (c.contains("fuse_rows")) out["fuse_rows"] = c["fuse_rows"].dump();
  if (!c.contains("stages") || !c["stages"].is_array()) return out;
  for (auto& st : c["stages"]) {
    if (!st.is_object()) continue;
    std::string name = st.contains("stage") && st["stage"].is_string() ? st["stage"].get<std::string>() : "?";
    for (auto& [key, value] : st.items()) {
      if (key == "stage" || key == "order") continue;
      if (key == "tile" && value.is_object()) {
        for (auto& [axis, sizes] : value.items()) {
          out[name + ".tile." + axis] = sizes.dump();
          if (sizes.is_array() && !sizes.empty()) out[name + ".reg." + axis] = sizes.back().dump();
        }
      } else if (value.is_string()) {
        out[name + "." + key] = value.get<std::string>();
      } else if (value.is_array()) {
        std::vector<std::string> items;
        for (auto& v : value) items.push_back(v.is_string() ? v.get<std::string>() : v.dump());
        std::sort(items.begin(), items.end());  // a pack of {A, B} is one value, whatever its order
        std::string joined;
        for (auto& i : items) joined += (joined.empty() ? "" : "+") + i;
        out[name + "." + key] = joined.empty() ? "none" : joined;
      } else {
        out[name + "." + key] = value.dump();
      }
    }
  }
  return out;
}

std::map<std::string, std::string> parse_filters(const std::string& text) {
  std::map<std::string, std::string> out;
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find(';', at), text.size());
    std::string item = text.substr(at, end - at);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw_error(ErrorKind::InvalidInput, "filter '" + item + "' is not KNOB=VALUE (knobs are listed in \"knobs\")");
    out[item.substr(0, eq)] = item.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

namespace {

//! Per database, what the overview counts over all records, kept up to date from the last record
//! read: per (workload, target) its records, failures and newest record; failures by class; the
//! times of the last minute's records.
struct Tally {
  struct Pair {
    std::int64_t records = 0, failures = 0, newest_ms = 0;
  };
  std::mutex mu;
  std::int64_t last_id = 0, records = 0;
  std::map<std::string, std::int64_t> by_class;
  std::map<std::pair<std::string, std::string>, Pair> pairs;  // (workload, target)
  std::deque<std::int64_t> recent_ms;                          // created times, ascending ids

  void reset() {
    last_id = records = 0;
    by_class.clear();
    pairs.clear();
    recent_ms.clear();
  }
};

std::shared_ptr<Tally> tallied(db::Store& store) {
  static std::mutex mu;
  static std::map<std::uintptr_t, std::shared_ptr<Tally>> tallies;
  std::shared_ptr<Tally> t;
  {
    std::lock_guard lock(mu);
    auto& slot = tallies[reinterpret_cast<std::uintptr_t>(&store)];
    if (!slot) slot = std::make_shared<Tally>();
    t = slot;
  }
  std::lock_guard lock(t->mu);
  for (int pass = 0; pass < 2; ++pass) {
    db::RecordQuery all;
    all.limit = kPage;
    all.after_id = t->last_id;
    for (;;) {
      auto page = store.records(all);
      for (auto& r : page) {
        ++t->records;
        Tally::Pair& pair = t->pairs[{r.workload_key, r.target_key}];
        ++pair.records;
        if (!r.ok()) ++pair.failures, ++t->by_class[r.error_class];
        pair.newest_ms = std::max(pair.newest_ms, r.created_unix_ms);
        t->recent_ms.push_back(r.created_unix_ms);
        t->last_id = r.id;
      }
      if (static_cast<int>(page.size()) < all.limit) break;
      all.after_id = page.back().id;
    }
    // Another database at this address, or records committed out of id order (another
    // connection): all are read again, once.
    if (store.count(db::RecordQuery{}) == t->records) break;
    t->reset();
  }
  const std::int64_t keep_from = db::now_unix_ms() - 60'000;
  while (!t->recent_ms.empty() && t->recent_ms.front() < keep_from) t->recent_ms.pop_front();
  return t;
}

}  // namespace

json overview(db::Store& store) {
  json out = {{"workloads", json::array()}, {"targets", json::array()}};
  const std::int64_t minute_ago = db::now_unix_ms() - 60'000;
  std::shared_ptr<Tally> tally = tallied(store);
  std::lock_guard lock(tally->mu);
  // Every (workload, target) with records, from the tally; each one's best from the store.
  const auto targets = store.targets();
  const auto workloads = store.workloads();
  for (auto& t : targets) out["targets"].push_back(target_json(t));
  for (auto& t : targets)
    for (auto& w : workloads) {
      const std::string& key = t.key;
      auto it = tally->pairs.find({w.key, key});
      if (it == tally->pairs.end()) continue;
      const Tally::Pair& pair = it->second;
      db::RecordQuery q{w.key, key};
      q.ok_only = q.fastest_first = true;
      q.limit = 1;
      auto best = store.records(q);
      json row = {{"workload", w.key},    {"op_name", w.op_name},           {"sizes", json::parse(w.sizes_json, nullptr, false)},
                  {"target", key},        {"backend", t.backend},           {"records", pair.records},
                  {"failures", pair.failures}, {"last_unix_ms", pair.newest_ms}};
      if (!best.empty()) {
        row["best_s"] = best[0].median_s();
        if (auto flops = flops_of(w)) row["best_gflops"] = gflops(*flops, best[0].median_s());
      }
      out["workloads"].push_back(row);
    }
  std::int64_t last_minute = 0;
  for (auto ms : tally->recent_ms) last_minute += ms >= minute_ago;
  json by_class = json::object();
  for (auto& [c, n] : tally->by_class) by_class[c] = n;
  out["records"] = tally->records;
  out["failures_by_class"] = by_class;
  out["measurements_last_minute"] = last_minute;
  return out;
}

json workload(db::Store& store, const WorkloadQuery& query) {
  auto wrow = store.workload(query.workload);
  if (!wrow) throw_error(ErrorKind::NotFound, "no workload '" + query.workload + "' (GET /v1/dashboard lists them)");
  auto trow = store.target(query.target);
  if (!trow) throw_error(ErrorKind::NotFound, "no target '" + query.target + "' (GET /v1/targets lists them)");
  const double flops = flops_of(*wrow).value_or(0);  // 0: no GFLOP/s for an op this version cannot rebuild

  std::shared_ptr<Scan> scan = scanned(store, query.workload, query.target);
  std::lock_guard scan_lock(scan->mu);
  const std::int64_t trials = static_cast<std::int64_t>(scan->rows.size());

  // The filters as (knob, value) ids; a value no record has lets nothing through.
  std::vector<std::pair<int, int>> wanted;
  bool none = false;
  for (auto& [k, v] : query.filters) {
    auto ki = scan->knob_index.find(k);
    if (ki == scan->knob_index.end()) {
      none = true;
      continue;
    }
    auto vi = scan->value_index[ki->second].find(v);
    if (vi == scan->value_index[ki->second].end()) none = true;
    else wanted.push_back({ki->second, vi->second});
  }
  std::vector<const Row*> seen;  // the records the filters let through, in trial order
  json failures = json::object();
  BestSoFar progress;
  for (const Row& r : scan->rows) {
    if (none) break;
    bool keep = std::all_of(wanted.begin(), wanted.end(), [&](const std::pair<int, int>& f) {
      return std::find(r.knobs.begin(), r.knobs.end(), f) != r.knobs.end();
    });
    if (!keep) continue;
    if (!r.error.empty()) failures[r.error] = failures.value(r.error, 0) + 1;
    seen.push_back(&r);
    progress.add(r.trial, r.median_s);
  }

  // One line per job (its strategy named), against the job's own trials: a record belongs to
  // the newest job of this workload and target that was under way when it was measured;
  // records measured outside any job (the CLI) make a line of their own.
  struct Line {
    std::string label, job;
    std::int64_t from, to, n = 0;
    BestSoFar line;
  };
  std::vector<Line> lines;
  const std::int64_t now = db::now_unix_ms();
  for (auto& j : store.jobs("", 1000)) {
    if (j.workload_key != query.workload || j.target_key != query.target) continue;
    json req = json::parse(j.request_json, nullptr, false);
    std::string strategy = req.is_object() ? req.value("strategy", std::string("default")) : "default";
    if (j.done == 0) continue;  // never measured anything: claims no record
    lines.push_back({"job " + j.id.substr(0, 8) + " (" + strategy + ")", j.id, j.created_unix_ms,
                     j.state == "running" ? now : j.updated_unix_ms, 0, {}});
  }
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) { return a.from < b.from; });
  Line outside{"without a job", "", 0, 0, 0, {}};
  for (const Row* r : seen) {
    Line* line = &outside;
    for (auto& l : lines)
      if (r->created_unix_ms >= l.from && r->created_unix_ms <= l.to) line = &l;  // the newest wins
    line->line.add(++line->n, r->median_s);
  }
  json by_job = json::array();  // empty without jobs: the progress line is then the only one
  if (!lines.empty()) lines.push_back(std::move(outside));
  for (Line& l : lines) {
    if (l.n > 0) by_job.push_back({{"label", l.label}, {"job", l.job}, {"trials", l.n}, {"points", l.line.finish()}});
  }

  // Points: every measurement up to max_points, else an even thinning plus the fastest.
  std::vector<size_t> by_speed(seen.size());
  for (size_t i = 0; i < seen.size(); ++i) by_speed[i] = i;
  std::stable_sort(by_speed.begin(), by_speed.end(),
                   [&](size_t a, size_t b) { return seen[a]->median_s < seen[b]->median_s; });
  std::vector<bool> drawn(seen.size(), seen.size() <= static_cast<size_t>(std::max(query.max_points, 1)));
  if (!drawn.empty() && !drawn[0]) {
    // The fastest (at most half the points), then an even thinning of the others in trial
    // order: max_points in all (thinning all of them would draw some of the fastest twice).
    const size_t most = static_cast<size_t>(std::max(query.max_points, 1));
    const size_t fastest = std::min<size_t>(kFastestKept, most / 2), even = most - fastest;
    for (size_t i = 0; i < fastest; ++i) drawn[by_speed[i]] = true;
    std::vector<size_t> rest;
    for (size_t i = 0; i < seen.size(); ++i)
      if (!drawn[i]) rest.push_back(i);
    for (size_t n = 0; n < even; ++n) drawn[rest[n * rest.size() / even]] = true;
  }
  json points = {{"trial", json::array()},  {"median_s", json::array()},   {"spread", json::array()},
                 {"error", json::array()},  {"config_key", json::array()}};
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!drawn[i]) continue;
    const Row& s = *seen[i];
    points["trial"].push_back(s.trial);
    points["median_s"].push_back(std::isfinite(s.median_s) ? json(s.median_s) : json());
    points["spread"].push_back(s.spread);
    points["error"].push_back(s.error);
    points["config_key"].push_back(s.config_key);
  }

  json top = json::array();
  for (size_t i = 0; i < by_speed.size() && static_cast<int>(top.size()) < kTop; ++i) {
    const Row& s = *seen[by_speed[i]];
    if (!std::isfinite(s.median_s)) break;
    db::RecordQuery one{query.workload, query.target};
    one.limit = 1;
    one.config_key = s.config_key;
    auto found = store.records(one);
    top.push_back({{"rank", top.size() + 1},
                   {"trial", s.trial},
                   {"config_key", s.config_key},
                   {"config", found.empty() ? json() : json::parse(found[0].config_json, nullptr, false)},
                   {"median_s", s.median_s},
                   {"gflops", gflops(flops, s.median_s)},
                   {"spread", s.spread}});
  }

  // Knobs: the best GFLOP/s at each value, and how much it matters: log2 of the best over the
  // worst of those bests (1 = the right value doubles the best speed found).
  std::vector<std::vector<std::pair<double, std::int64_t>>> by_value(scan->knob_names.size());  // (best, n)
  for (size_t k = 0; k < by_value.size(); ++k) by_value[k].resize(scan->values[k].size());
  for (const Row* s : seen)
    for (auto [k, v] : s->knobs) {
      auto& cell = by_value[k][v];
      cell.second++;
      if (std::isfinite(s->median_s)) cell.first = std::max(cell.first, gflops(flops, s->median_s));
    }
  std::map<std::string, std::map<std::string, std::pair<double, std::int64_t>>> values;  // knob -> value -> (best, n)
  for (size_t k = 0; k < by_value.size(); ++k)
    for (size_t v = 0; v < by_value[k].size(); ++v)
      if (by_value[k][v].second > 0) values[scan->knob_names[k]][scan->values[k][v]] = by_value[k][v];
  json knobs = json::array();
  for (auto& [k, vs] : values) {
    if (vs.size() > kMostValues) continue;
    double hi = 0, lo = INFINITY;
    json list = json::array();
    std::vector<std::pair<std::string, std::pair<double, std::int64_t>>> sorted(vs.begin(), vs.end());
    std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return natural_less(a.first, b.first); });
    for (auto& [v, cell] : sorted) {
      list.push_back({{"value", v}, {"best_gflops", cell.first}, {"count", cell.second}});
      hi = std::max(hi, cell.first);
      if (cell.first > 0) lo = std::min(lo, cell.first);
    }
    double importance = vs.size() > 1 && hi > 0 && std::isfinite(lo) ? std::log2(hi / lo) : 0;
    knobs.push_back({{"name", k}, {"importance", importance}, {"values", list}});
  }
  std::stable_sort(knobs.begin(), knobs.end(), [](const json& a, const json& b) {
    return a["importance"].get<double>() > b["importance"].get<double>();
  });

  // The heatmap: the best GFLOP/s over the values of two knobs (the two that matter most).
  auto listed = [&](const std::string& k) {
    return std::any_of(knobs.begin(), knobs.end(), [&](const json& j) { return j["name"] == k; });
  };
  std::string x = query.x, y = query.y;
  for (auto& kj : knobs) {
    std::string k = kj["name"];
    if (kj["importance"].get<double>() <= 0 && kj["values"].size() < 2) continue;
    if (x.empty() && k != y) x = k;
    else if (y.empty() && k != x) y = k;
  }
  json heatmap = {{"x", x}, {"y", y}, {"xs", json::array()}, {"ys", json::array()}, {"cells", json::array()}};
  if (!x.empty() && !y.empty() && listed(x) && listed(y)) {
    std::map<std::pair<std::string, std::string>, std::pair<double, std::int64_t>> cells;
    std::set<std::string> xs, ys;
    const int xk = scan->knob_index.at(x), yk = scan->knob_index.at(y);
    for (const Row* s : seen) {
      int xv_id = -1, yv_id = -1;
      for (auto [k, v] : s->knobs) {
        if (k == xk) xv_id = v;
        if (k == yk) yv_id = v;
      }
      if (xv_id < 0 || yv_id < 0) continue;
      const std::string &a = scan->values[xk][xv_id], &b = scan->values[yk][yv_id];
      xs.insert(a);
      ys.insert(b);
      auto& cell = cells[{a, b}];
      cell.second++;
      if (std::isfinite(s->median_s)) cell.first = std::max(cell.first, gflops(flops, s->median_s));
    }
    std::vector<std::string> xv(xs.begin(), xs.end()), yv(ys.begin(), ys.end());
    std::sort(xv.begin(), xv.end(), natural_less);
    std::sort(yv.begin(), yv.end(), natural_less);
    auto index = [](const std::vector<std::string>& v, const std::string& s) {
      return std::find(v.begin(), v.end(), s) - v.begin();
    };
    heatmap["xs"] = xv;
    heatmap["ys"] = yv;
    for (auto& [key, cell] : cells)
      heatmap["cells"].push_back({index(xv, key.first), index(yv, key.second), cell.first, cell.second});
  } else if (!query.x.empty() || !query.y.empty()) {
    throw_error(ErrorKind::InvalidInput, "heatmap knobs '" + query.x + "' and '" + query.y +
                                             "' are not both knobs of this workload's records (see \"knobs\")");
  }

  json filters = json::object();
  for (auto& [k, v] : query.filters) filters[k] = v;
  return {{"workload",
           {{"key", wrow->key},
            {"op_name", wrow->op_name},
            {"sizes", json::parse(wrow->sizes_json, nullptr, false)},
            {"op_text", wrow->op_text},
            {"flops", flops}}},
          {"target", target_json(*trow)},
          {"records", trials},
          {"shown", seen.size()},
          {"failures_by_class", failures},
          {"filters", filters},
          {"progress", progress.finish()},
          {"lines", by_job},
          {"points", points},
          {"top", top},
          {"knobs", knobs},
          {"heatmap", heatmap}};
}

void warm(db::Store& store, const std::atomic<bool>& stop, std::int64_t min_records) {
  std::vector<std::pair<std::int64_t, std::pair<std::string, std::string>>> large;  // (records, (workload, target))
  for (auto& t : store.targets())
    for (auto& w : store.workloads()) {
      if (stop) return;
      std::int64_t n = store.count({w.key, t.key});
      if (n >= min_records) large.push_back({n, {w.key, t.key}});
    }
  std::sort(large.rbegin(), large.rend());
  for (size_t i = 0; i < large.size() && i < kKeptScans && !stop; ++i)
    scanned(store, large[i].second.first, large[i].second.second);
}

}  // namespace tiletune::server::dashboard
