// tuner/search.hpp
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tuner/space.hpp"

namespace tiletune::tuner {

//! A search strategy proposes configs to measure and learns from their results. Life cycle:
//! notify() with what is already known (the database), then propose / notify per batch.
class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  //! Up to n valid configs whose keys are not in `measured`.
  virtual std::vector<ir::Schedule> propose(int n, const std::set<std::string>& measured) = 0;
  //! Measured latencies in seconds; +infinity for a failed candidate.
  virtual void notify(const std::vector<ir::Schedule>& configs, const std::vector<double>& latency_s) = 0;
};

//! Strategies by name: "random", "evolutionary". Unknown names are Error(InvalidInput)
//! listing the known ones.
std::unique_ptr<SearchStrategy> make_search(const std::string& name, const Space& space, std::uint64_t seed);
std::vector<std::string> search_names();

}  // namespace tiletune::tuner
