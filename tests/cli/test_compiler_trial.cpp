// The compiler engineer's trial of issue 13, from the README alone: tune a suite, export its
// kernels as a static library with a header and a manifest, install the C++ client, build a
// program against both (through CMake's package and through pkg-config), and have it ask the
// daemon for each op with every request field, then call the exported kernels on data with tails.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "server/daemon_harness.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using nlohmann::json;
using test::TempDir;

namespace {

const std::string kBin = std::string(TILETUNE_BINARY_DIR) + "/tiletune";

// Two ops in one file: a case picks one with op_name. A^T B packs panels (a workspace).
const char* kOpsFile = R"(op at_b(A: f32[K, M], B: f32[K, N]) -> C: f32[M, N] {
  C[m, n] += A[k, m] * B[k, n]
}
op row_max(X: f32[N, D]) -> Y: f32[N] {
  Y[n] max= X[n, d]
}
)";

// The program a compiler engineer writes: ENTRY_* and the sizes are filled in from the manifest.
const char* kProgram = R"(#include <client/client.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "tiletune_kernels.h"

using Tensors = std::vector<std::vector<float>>;
static int failures = 0;

static void check(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4f * (1 + std::fabs(want[i])))) {
      std::printf("%s: element %zu is %g, expected %g\n", what, i, got[i], want[i]);
      ++failures;
      return;
    }
}

// Calls a kernel both ways (measured thread count, and 3 threads) and checks the output.
static void run(const char* what, void (*entry)(float* const*, float*), void (*entry_threads)(float* const*, float*, int),
                long long workspace_bytes, Tensors t, const std::vector<float>& want) {
  std::vector<float> workspace(workspace_bytes / 4 + 1);
  std::vector<float*> args;
  for (auto& v : t) args.push_back(v.data());
  entry(args.data(), workspace.data());
  check(what, t.back(), want);
  std::fill(t.back().begin(), t.back().end(), NAN);
  entry_threads(args.data(), workspace.data(), 3);
  check(what, t.back(), want);
}

static std::vector<float> random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

int main(int argc, char** argv) {
  tiletune::client::Client daemon(argv[1], argv[2]);
  // Every field of the API: op text and op_name, backend, target; tune's trials, seconds, strategy.
  tiletune::client::OpRequest at_b;
  at_b.op = argv[3];  // the op file's text
  at_b.op_name = "at_b";
  at_b.sizes = "M=MM,N=NN,K=KK";
  at_b.backend = "cpu";
  auto k = daemon.best(at_b);
  if (!k || k->entry_point != "ENTRY_AT_B" || k->workspace_bytes != ENTRY_AT_B_WS) {
    std::printf("best(at_b) does not name the exported kernel\n");
    return 1;
  }
  at_b.target = k->target_key;
  auto same = daemon.best(at_b);
  if (!same || same->entry_point != k->entry_point) ++failures, std::printf("best(at_b, target) differs\n");
  tiletune::client::OpRequest more = at_b;
  more.target.clear();
  more.sizes = "M=9,N=10,K=11";
  more.trials = 4;
  more.seconds = 60;
  more.strategy = "random";
  auto job = daemon.tune(more);
  if (job.id.empty()) ++failures, std::printf("tune gave no job\n");
  daemon.cancel(job.id);

  const int M = MM, N = NN, K = KK, R = RR, D = DD;
  {  // C = A^T B
    auto A = random(K * M, 1), B = random(K * N, 2);
    std::vector<float> C(M * N, 0.0f);
    for (int kk = 0; kk < K; ++kk)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) C[m * N + n] += A[kk * M + m] * B[kk * N + n];
    run("at_b", ENTRY_AT_B, ENTRY_AT_B_threads, ENTRY_AT_B_WS, {A, B, std::vector<float>(M * N, NAN)}, C);
  }
  {  // the library's matmul
    auto A = random(M * K, 3), B = random(K * N, 4);
    std::vector<float> C(M * N, 0.0f);
    for (int m = 0; m < M; ++m)
      for (int kk = 0; kk < K; ++kk)
        for (int n = 0; n < N; ++n) C[m * N + n] += A[m * K + kk] * B[kk * N + n];
    run("matmul", ENTRY_MATMUL, ENTRY_MATMUL_threads, ENTRY_MATMUL_WS, {A, B, std::vector<float>(M * N, NAN)}, C);
  }
  {  // softmax and row_max over rows of D
    auto X = random(R * D, 5);
    std::vector<float> Y(R * D), mx(R, -INFINITY);
    for (int r = 0; r < R; ++r) {
      float s = 0;
      for (int d = 0; d < D; ++d) mx[r] = std::max(mx[r], X[r * D + d]);
      for (int d = 0; d < D; ++d) s += (Y[r * D + d] = std::exp(X[r * D + d] - mx[r]));
      for (int d = 0; d < D; ++d) Y[r * D + d] /= s;
    }
    run("softmax", ENTRY_SOFTMAX, ENTRY_SOFTMAX_threads, ENTRY_SOFTMAX_WS, {X, std::vector<float>(R * D, NAN)}, Y);
    run("row_max", ENTRY_ROW_MAX, ENTRY_ROW_MAX_threads, ENTRY_ROW_MAX_WS, {X, std::vector<float>(R, NAN)}, mx);
  }
  std::printf(failures ? "FAILED\n" : "ALL OK\n");
  return failures ? 1 : 0;
}
)";

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("compiler trial: exported kernels and the installed client build into a program that computes right") {
  TempDir dir;
  const std::string M = "37", N = "45", K = "29", R = "19", D = "45";  // no size a multiple of a vector
  std::ofstream(dir.file("ops.tile")) << kOpsFile;
  json suite = {{"name", "trial"},
                {"cases",
                 {{{"op", dir.file("ops.tile")}, {"op_name", "at_b"}, {"sizes", "M=" + M + ",N=" + N + ",K=" + K}},
                  {{"op", "matmul"}, {"sizes", "M=" + M + ",N=" + N + ",K=" + K}},
                  {{"op", "softmax"}, {"sizes", "N=" + R + ",D=" + D}},
                  {{"op", dir.file("ops.tile")}, {"op_name", "row_max"}, {"sizes", "N=" + R + ",D=" + D}}}}};
  std::ofstream(dir.file("suite.json")) << suite.dump();
  const std::string db = dir.file("t.db"), out = dir.file("export");

  // Exporting before tuning names what is missing and writes nothing.
  auto early = run_process({kBin, "export", dir.file("suite.json"), "--db", db, "--out", out}, 60);
  CHECK(early.exit_code != 0);
  auto tuned = run_process({kBin, "suite", dir.file("suite.json"), "--db", db, "--trials", "6", "--min-time", "0.002",
                            "--cache", test::kernel_cache()},
                           600);
  REQUIRE_MESSAGE(tuned.ok(), tuned.output);
  auto none = run_process({kBin, "export", dir.file("suite.json"), "--db", dir.file("empty.db"), "--out", out}, 60);
  CHECK(none.exit_code == 3);  // no database: not found, and none is created
  json more = suite;
  more["cases"].push_back({{"op", "matmul"}, {"sizes", "M=5,N=5,K=5"}});
  std::ofstream(dir.file("more.json")) << more.dump();
  auto partial = run_process({kBin, "export", dir.file("more.json"), "--db", db, "--out", dir.file("partial")}, 60);
  CHECK(partial.exit_code == 3);
  CHECK(partial.output.find("1 of 5 cases have no measured kernel") != std::string::npos);
  CHECK(partial.output.find("matmul K=5,M=5,N=5") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("partial")));  // nothing half-written
  // A folder that cannot be made is an I/O error; GPU kernels are not C and make no static library.
  auto unwritable =
      run_process({kBin, "export", dir.file("suite.json"), "--db", db, "--out", dir.file("ops.tile") + "/x"}, 60);
  CHECK(unwritable.exit_code == 4);
  CHECK(unwritable.output.find("cannot create") != std::string::npos);
  if (!test::no_opencl_platform()) {
    auto gpu = run_process(
        {kBin, "export", dir.file("suite.json"), "--db", db, "--out", out, "--backend", "opencl", "--static-lib"}, 60);
    CHECK(gpu.exit_code == 2);
    CHECK(gpu.output.find("--static-lib needs C kernels") != std::string::npos);
  }
  auto exported = run_process({kBin, "export", dir.file("suite.json"), "--db", db, "--out", out, "--static-lib"}, 600);
  REQUIRE_MESSAGE(exported.ok(), exported.output);

  std::ifstream manifest_in(out + "/manifest.json");
  json manifest = json::parse(manifest_in);
  REQUIRE(manifest["kernels"].size() == 4);
  CHECK(manifest["library"] == "libtiletune_kernels.a");
  std::string program = kProgram;
  for (auto& k : manifest["kernels"]) {
    std::string name = k["cases"][0].value("op_name", k["op"].get<std::string>());
    for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    std::string entry = k["abi"]["entry_point"];
    CHECK(k["source_file"] == "kernels/" + entry + ".cpp");
    replace_all(program, "ENTRY_" + name + "_WS", std::to_string(k["abi"]["workspace_bytes"].get<std::int64_t>()));
    replace_all(program, "ENTRY_" + name + "_threads", k["abi"]["threads_entry_point"].get<std::string>());
    replace_all(program, "ENTRY_" + name, entry);
  }
  for (auto [from, to] : {std::pair{"MM", M}, {"NN", N}, {"KK", K}, {"RR", R}, {"DD", D}})
    replace_all(program, from, to);
  std::ofstream(dir.file("main.cpp")) << program;

  const std::string prefix = dir.file("prefix");
  auto installed =
      run_process({"cmake", "--install", TILETUNE_BINARY_DIR, "--prefix", prefix, "--component", "client"}, 120);
  REQUIRE_MESSAGE(installed.ok(), installed.output);

  // Through CMake's package.
  std::ofstream(dir.file("CMakeLists.txt"))
      << "cmake_minimum_required(VERSION 3.20)\nproject(trial CXX)\nset(CMAKE_CXX_STANDARD 17)\n"
      << "find_package(tiletune REQUIRED)\nfind_package(OpenMP REQUIRED)\n"
      << "add_executable(trial main.cpp)\ntarget_include_directories(trial PRIVATE " << out << ")\n"
      << "target_link_libraries(trial PRIVATE tiletune::client " << out
      << "/libtiletune_kernels.a OpenMP::OpenMP_CXX)\n";
  auto configured =
      run_process({"cmake", "-S", dir.path.string(), "-B", dir.file("b"), "-DCMAKE_PREFIX_PATH=" + prefix}, 120);
  REQUIRE_MESSAGE(configured.ok(), configured.output);
  auto built = run_process({"cmake", "--build", dir.file("b")}, 300);
  REQUIRE_MESSAGE(built.ok(), built.output);
  // Through pkg-config.
  auto pkg = run_process(
      {"sh", "-c",
       "PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig g++ -std=c++17 -O1 " + dir.file("main.cpp") + " -I" + out +
           " $(PKG_CONFIG_PATH=" + prefix + "/lib/pkgconfig pkg-config --cflags --libs tiletune-client) " + out +
           "/libtiletune_kernels.a -fopenmp -Wl,-rpath," + prefix + "/lib -o " + dir.file("trial2")},
      300);
  REQUIRE_MESSAGE(pkg.ok(), pkg.output);

  std::ifstream text_in(dir.file("ops.tile"));
  std::string op_text(std::istreambuf_iterator<char>(text_in), {});
  test::InProcessDaemon daemon(db, {"tok", false, 1 << 20, /*start_jobs=*/false});
  for (const std::string& exe : {dir.file("b") + "/trial", dir.file("trial2")}) {
    auto ran = run_process({exe, daemon.url(), "tok", op_text}, 120);
    CHECK_MESSAGE(ran.ok(), ran.output);
    CHECK(ran.output.find("ALL OK") != std::string::npos);
  }
}
