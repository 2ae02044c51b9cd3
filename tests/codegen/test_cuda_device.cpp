// The CUDA backend on an NVIDIA GPU: kernels run and compute the reference results. Every test
// case needs a GPU (asked of the driver's files, not of the backend) and nvcc, and is skipped
// without; test_cuda_build.cpp checks what the backend says where there is no GPU.
#include <doctest/doctest.h>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "random_schedules.hpp"

using namespace tiletune;

TEST_CASE("cuda: random schedules of every library op compute the reference results on the CUDA device") {
  if (!test::have_cuda_device()) TT_SKIP("no NVIDIA GPU (/dev/nvidiactl and /proc/driver/nvidia/gpus/)");
  if (!test::have_nvcc()) TT_SKIP("an NVIDIA GPU, but no nvcc under /usr/local/cuda/bin or on PATH");
  auto be = codegen::make_backend("cuda");
  std::string fingerprint = be->target().fingerprint_json;
  MESSAGE("CUDA device: " << fingerprint);
  CHECK(be->target().traits.groups());
  test::random_schedules_of_every_op_are_correct(2, 50, "cuda");
}
