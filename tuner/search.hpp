// tuner/search.hpp
#pragma once
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "costmodel/model.hpp"
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

//! What a model-guided strategy knows before its first measurement: records of other
//! workloads on the same target (transfer, for a cold start) and a saved model, if any.
struct SearchContext {
  std::vector<costmodel::Sample> prior;
  //! The target's own saved model, trained from nothing: retrained from scratch as records arrive.
  std::unique_ptr<costmodel::CostModel> pretrained;
  //! Else the target's saved model fine-tuned from a shipped one (`model train` without --fresh),
  //! or the model shipped for the target's machine kind (tuner/pretrained.hpp): fine-tuned on
  //! `prior` and the new records (costmodel::OnlineModel::FromBase).
  std::unique_ptr<costmodel::CostModel> base;
};

//! Strategies by name: "random", "evolutionary", and a model-guided one per cost model kind
//! (costmodel::model_kinds(): evolution on ranked scores, the top candidates measured). Unknown names are
//! Error(InvalidInput) listing the known ones.
std::unique_ptr<SearchStrategy> make_search(const std::string& name, const Space& space, std::uint64_t seed,
                                            SearchContext context = {});
std::vector<std::string> search_names();

//! A config's blocking: its tiles, SIMD axis, packing, inlining and fusion, without the knobs
//! that only order, unroll, prefetch or parallelize the same loops (a key, as Schedule::key).
std::string blocking_of(ir::Schedule s);
//! The order in which a model-guided search measures configs ranked best-predicted first: the
//! first of each blocking, then the others in their rank. After a few batches a model's
//! favourites are one blocking in many loop orders and unrolls; a batch of them finds little
//! beyond that blocking (docs/cost-models.md: a batch's picks spread over blockings).
std::vector<std::size_t> spread_over_blockings(const std::vector<ir::Schedule>& ranked);
//! The cost model kind a strategy uses; "" for none.
std::string model_of_strategy(const std::string& name);

}  // namespace tiletune::tuner
