// Many more random work-group schedules per library op than test_opencl.cpp checks: run on
// purpose with `ctest --test-dir build -L slow`. Skipped where there is no OpenCL platform.
#include "random_schedules.hpp"

TEST_CASE("library ops: many random valid work-group schedules compute the reference results on OpenCL") {
  if (auto why = tiletune::test::no_opencl_platform()) TT_SKIP(*why);
  tiletune::test::random_schedules_of_every_op_are_correct(15, 2000, "opencl");
}
