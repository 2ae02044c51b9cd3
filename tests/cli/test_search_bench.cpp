// tiletune-search-bench on an op of the user's own (--op FILE --sizes S), and its refusals.
#include <doctest/doctest.h>

#include <fstream>

#include "helpers.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;

namespace {
ProcessResult bench(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {std::string(TILETUNE_BINARY_DIR) + "/tiletune-search-bench", "--cache",
                                   test::kernel_cache(), "--speed-reps", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_process(args, 300);
}
}  // namespace

TEST_CASE("search bench: judges an op given as a file; a file that does not parse or bind is refused first") {
  test::TempDir dir;
  const std::string op = dir.file("scaled_rows.tile"), bad = dir.file("bad.tile"), db = dir.file("s.db");
  std::ofstream(op) << "op scaled_rows(X: f32[N, D], g: f32[D]) -> Y: f32[N, D] {\n"
                       "  s[n] += X[n, d] * X[n, d]\n  Y[n, d] = X[n, d] * g[d] / sqrt(s[n] + 1.0)\n}\n";
  std::ofstream(bad) << "op bad(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[j]\n}\n";

  auto run = bench({"--op", op, "--sizes", "N=64,D=48", "--trials", "4", "--pool", "4", "--seeds", "1",
                    "--judge-sessions", "2", "--db", db});
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  CHECK(run.output.find("scaled_rows") != std::string::npos);
  CHECK(run.output.find("N=64,D=48") != std::string::npos);
  CHECK(run.output.find("atb_sigmoid") == std::string::npos);  // the built-in ops are not judged
  CHECK(run.output.find("held-out ops") != std::string::npos);

  auto unmatched = bench({"--op", op, "--op", op, "--sizes", "N=64,D=48"});
  CHECK(unmatched.exit_code == 1);
  CHECK(unmatched.output.find("give one --sizes for each --op") != std::string::npos);
  auto unparsed = bench({"--op", bad, "--sizes", "N=8"});
  CHECK(unparsed.exit_code == 1);
  CHECK(unparsed.output.find("bad.tile: 2:") != std::string::npos);
  auto unbound = bench({"--op", op, "--sizes", "N=8"});
  CHECK(unbound.exit_code == 1);
  CHECK(unbound.output.find("scaled_rows.tile: ") != std::string::npos);
  CHECK(unbound.output.find("ranking 10,000") == std::string::npos);  // refused before any work
}
