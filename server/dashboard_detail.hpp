// server/dashboard_detail.hpp — internal to server/: what the dashboard's views share.
#pragma once
#include <nlohmann/json.hpp>

#include "db/store.hpp"

namespace tiletune::server::dashboard {

//! Records read per query while scanning: few round trips, bounded memory per page.
inline constexpr int kPage = 5000;

inline double gflops(double flops, double seconds) { return seconds > 0 ? flops / seconds / 1e9 : 0; }

//! A target as the API shows it: key, backend, family and the fingerprint parsed.
nlohmann::json target_json(const db::TargetRow& t);

}  // namespace tiletune::server::dashboard
