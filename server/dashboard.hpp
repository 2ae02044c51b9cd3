// server/dashboard.hpp: what the dashboard's pages draw (GET /v1/dashboard/...), aggregated
// from the database on the server so that a page gets only the points, lines and cells it
// shows, also for 100,000 records. `tiletune report --html` embeds the same answers in one file.
#pragma once
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "db/store.hpp"

namespace tiletune::server::dashboard {

//! Every (workload, target) with records: op, sizes, records, failures, best latency and
//! GFLOP/s, the newest record's time; the targets with their fingerprints; records per
//! error class and the measurements of the last minute. Schema: DashboardOverview.
nlohmann::json overview(db::Store& store);

//! One workload's records on one target.
struct WorkloadQuery {
  std::string workload, target;
  //! Only records whose knobs have these values ("C.unroll" -> "4"); see knob_values.
  std::map<std::string, std::string> filters;
  //! The heatmap's knobs; "" picks the two that matter most.
  std::string x, y;
  int max_points = 4000;  //!< measurements drawn as points, the fastest always among them
};

//! The trials' best-so-far line, the measurements as points (trial, latency, spread, error
//! class), the top configs, each knob's values with the best GFLOP/s at each and how much it
//! matters, and a heatmap of the best GFLOP/s over two knobs. Schema: DashboardWorkload.
//! Error(NotFound) for an unknown workload or target.
nlohmann::json workload(db::Store& store, const WorkloadQuery& query);

//! Reads and parses the records of the largest workloads (`min_records` or more; as many as
//! are kept) ahead of the first page that shows them, which then reads only newer records;
//! returns early once `stop` is set. The daemon runs it at start.
void warm(db::Store& store, const std::atomic<bool>& stop, std::int64_t min_records = 20000);

//! The target's cost model of `kind` ("" for the kind trained last): its held-out metrics after
//! each retrain (the model history), and for one workload (`workload`, or the target's workload
//! with most records) up to `max_points` of its measured records with the model's score for
//! each, and how well those scores rank them. A model that cannot load (another feature
//! version) is reported with why. Schema: DashboardModel. Error(NotFound): unknown target.
nlohmann::json model_view(db::Store& store, const std::string& target, const std::string& kind,
                          const std::string& workload, int max_points = 500);

//! The knobs of a config as flat names: "STAGE.KNOB" (vectorize, unroll, parallel, prefetch,
//! pack, inline, fuse_epilogue), "STAGE.tile.AXIS" (all levels), "STAGE.reg.AXIS" (the
//! register block) and "fuse_rows"; absent knobs are left out.
std::map<std::string, std::string> knob_values(const std::string& config_json);

//! `filter=KNOB=VALUE;KNOB=VALUE` of the query; Error(InvalidInput) for an item without '='.
std::map<std::string, std::string> parse_filters(const std::string& text);

}  // namespace tiletune::server::dashboard
