// tests/codegen/random_schedules.hpp
#pragma once
#include <doctest/doctest.h>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "measure/measure.hpp"
#include "tuner/space.hpp"

namespace tiletune::test {

//! Measures a batch with a fresh cache folder or the shared one; every result must be correct.
inline void all_correct(const codegen::Backend& be, const ir::Workload& w, const std::vector<ir::Schedule>& batch,
                        const std::string& cache_dir = kernel_cache()) {
  measure::MeasureOptions o;
  o.cache_dir = cache_dir;
  o.min_seconds = 0;
  o.min_repeats = 1;
  measure::Measurer m(be, w, o);
  auto results = m.measure(batch);
  REQUIRE(results.size() == batch.size());
  for (auto& r : results) {
    CAPTURE(r.config_json);
    CHECK_MESSAGE(r.ok(), r.error_class << ": " << r.error_message);
  }
}

//! Measures `count` random schedules of a library op; every one must be correct.
inline void random_schedules_are_correct(const std::string& op, const std::string& sizes, int count, std::uint64_t seed,
                                         const std::string& backend = "cpu") {
  REQUIRE(count > 0);
  CAPTURE(op);
  CAPTURE(sizes);
  CAPTURE(backend);
  auto be = codegen::make_backend(backend);
  auto w = library_workload(op, sizes);
  tuner::Space space(w, be->target().traits);
  tuner::Rng rng(seed);
  std::vector<ir::Schedule> batch;
  for (int i = 0; i < count; ++i) batch.push_back(space.sample(rng));
  all_correct(*be, w, batch);
}

//! Every library op, at sizes that are primes, ones and other numbers that no tile size
//! divides, so that edge tiles are exercised.
inline void random_schedules_of_every_op_are_correct(int count, std::uint64_t seed,
                                                     const std::string& backend = "cpu") {
  std::uint64_t n = 0;
  for (auto& [op, sizes] : library_test_sizes()) random_schedules_are_correct(op, sizes, count, seed + ++n, backend);
  random_schedules_are_correct("matmul", "M=1,N=17,K=1", count, seed + ++n, backend);
}

}  // namespace tiletune::test
