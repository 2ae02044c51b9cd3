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
  random_schedules_are_correct("matmul", "M=37,N=67,K=23", count, seed + 1, backend);
  random_schedules_are_correct("matmul", "M=1,N=17,K=1", count, seed + 2, backend);
  random_schedules_are_correct("matmul_bias_relu", "M=29,N=41,K=19", count, seed + 3, backend);
  random_schedules_are_correct("batch_matmul", "G=3,M=13,N=35,K=7", count, seed + 4, backend);
  random_schedules_are_correct("conv2d", "N=1,C=3,H=11,W=19,K=5,R=3,S=3", count, seed + 5, backend);
  random_schedules_are_correct("depthwise_conv2d", "N=2,C=3,H=9,W=21,R=3,S=3", count, seed + 6, backend);
  random_schedules_are_correct("softmax", "N=7,D=43", count, seed + 7, backend);
  random_schedules_are_correct("layernorm", "N=5,D=37", count, seed + 8, backend);
  random_schedules_are_correct("row_sum", "N=11,D=53", count, seed + 9, backend);
  random_schedules_are_correct("gelu", "N=3,D=71", count, seed + 10, backend);
  random_schedules_are_correct("matmul_bias_gelu", "M=13,N=29,K=11", count, seed + 11, backend);
}

}  // namespace tiletune::test
