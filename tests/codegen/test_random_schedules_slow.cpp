// Many more random schedules per library op than the default run checks: run on purpose with
// `ctest --test-dir build -L slow`.
#include "random_schedules.hpp"

TEST_CASE("library ops: many random valid schedules compute the reference results") {
  tiletune::test::random_schedules_of_every_op_are_correct(30, 1000);
}

TEST_CASE("library ops: many random valid work-group schedules compute the reference results on OpenCL") {
  tiletune::test::random_schedules_of_every_op_are_correct(15, 2000, "opencl");
}
