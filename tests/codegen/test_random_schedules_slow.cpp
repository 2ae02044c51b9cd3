// Many more random schedules per library op than the default run checks: run on purpose with
// `ctest --test-dir build -L slow`. The OpenCL ones are in test_opencl_random_schedules_slow.cpp.
#include "random_schedules.hpp"

TEST_CASE("library ops: many random valid schedules compute the reference results") {
  tiletune::test::random_schedules_of_every_op_are_correct(30, 1000);
}
