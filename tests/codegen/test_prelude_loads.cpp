// The CPU prelude's strided row loads (tt_load_rows*: the rows of a strided window vectorized
// along the output) and its in-register transpose (tt_transpose_tile, for packs), at every SIMD
// width and instruction set the kernels are built for: each lane reads what it names, masked
// lanes read 0 or the pad value, and no load touches memory past the row's end or before its
// start (the row sits against PROT_NONE pages, so such a read would crash the harness).
#include <doctest/doctest.h>

#include <fstream>

#include "helpers.hpp"
#include "support/subprocess.hpp"

namespace tiletune::codegen {
extern const char* const kCpuPrelude;
}

using namespace tiletune;

namespace {

// Prints "ok CHECKS" or the first wrong lane.
const char* kHarness = R"(
#include <cstdio>
#include <sys/mman.h>
#include <unistd.h>

static int fail(const char* what, long s, long i, long n, int lane, float got, float want) {
  std::printf("%s stride %ld i %ld n %ld lane %d: got %g, want %g\n", what, s, i, n, lane, got, want);
  return 1;
}

int main() {
  long page = sysconf(_SC_PAGESIZE);
  // [guard][row of up to 3 pages][guard]: the row ends at the second guard's first byte.
  char* base = (char*)mmap(nullptr, 5 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mprotect(base, page, PROT_NONE);
  mprotect(base + 4 * page, page, PROT_NONE);
  long checks = 0;
  for (long s = 2; s <= 3; ++s)
    for (long n = 1; n <= 4 * TT_LANES; n += 3) {
      // Row starts and ends against a guard page.
      for (int at_end = 0; at_end < 2; ++at_end) {
        float* row = at_end ? (float*)(base + 4 * page) - n : (float*)(base + page);
        for (long k = 0; k < n; ++k) row[k] = 1.0f + (float)k;
        // Whole vectors whose last lane is the row's last element or before it.
        for (long i = 0; (TT_LANES - 1) * s + i < n; ++i) {
          tt_vf v = tt_load_rows(row + i, s);
          for (int j = 0; j < TT_LANES; ++j, ++checks)
            if (v[j] != row[i + j * s]) return fail("rows", s, i, n, j, v[j], row[i + j * s]);
        }
        // The first m lanes of a vector that the row's end cuts.
        for (long i = 0; i < n; ++i)
          for (long m = 1; m <= TT_LANES && (m - 1) * s + i < n; ++m) {
            tt_vf v = tt_load_rows_n(row + i, s, m);
            for (int j = 0; j < m; ++j, ++checks)
              if (v[j] != row[i + j * s]) return fail("rows_n", s, i, n, j, v[j], row[i + j * s]);
          }
        // Any start, also before the row and past its end: lanes outside read the pad value.
        for (long i = -2 * TT_LANES * s; i <= n + 2; ++i) {
          tt_vf v = tt_load_rows_pad(row + i, s, i, n, -7.0f);
          for (int j = 0; j < TT_LANES; ++j, ++checks) {
            long at = i + j * s;
            float want = at >= 0 && at < n ? row[at] : -7.0f;
            if (v[j] != want) return fail("rows_pad", s, i, n, j, v[j], want);
          }
        }
      }
    }
  // A tile of lanes x lanes transposed between rows of other strides (packing B of A * B^T).
  {
    const long fs = TT_LANES + 3, ts = TT_LANES + 5;
    static float from[TT_LANES * (TT_LANES + 3)], to[TT_LANES * (TT_LANES + 5)];
    for (long k = 0; k < TT_LANES * fs; ++k) from[k] = (float)k;
    tt_transpose_tile(from, fs, to, ts);
    for (int i = 0; i < TT_LANES; ++i)
      for (int j = 0; j < TT_LANES; ++j, ++checks)
        if (to[j * ts + i] != from[i * fs + j]) return fail("transpose", fs, i, ts, j, to[j * ts + i], from[i * fs + j]);
  }
  std::printf("ok %ld\n", checks);
  return 0;
}
)";

}  // namespace

TEST_CASE("prelude: strided row loads read their lanes and nothing past the row, tiles transpose, at every width") {
  test::TempDir dir;
  struct Build {
    int lanes;
    std::vector<std::string> isa;  // what the kernels are built with on such a machine
  };
  std::vector<Build> builds = {{16, {"-march=native"}}, {8, {"-march=native"}}, {4, {"-march=native"}},
                               {8, {"-mavx2", "-mfma"}}, {4, {}}};
  for (const Build& b : builds) {
    std::string flags;
    for (auto& f : b.isa) flags += f + " ";
    CAPTURE(b.lanes);
    CAPTURE(flags);
    std::string name = "rows" + std::to_string(b.lanes) + "_" + std::to_string(b.isa.size()) +
                       (b.isa.empty() ? "" : b.isa[0].substr(2, 4));
    std::string src = dir.file(name + ".cpp"), exe = dir.file(name);
    std::ofstream(src) << "#define TT_LANES " << b.lanes << "\n" << codegen::kCpuPrelude << kHarness;
    std::vector<std::string> cmd = {"g++", "-O2", "-fopenmp", "-std=c++17", "-w"};
    cmd.insert(cmd.end(), b.isa.begin(), b.isa.end());
    cmd.insert(cmd.end(), {src, "-o", exe});
    auto built = run_process(cmd, 240);
    REQUIRE_MESSAGE(built.ok(), built.output);
    auto ran = run_process({exe}, 240);
    CHECK_MESSAGE(ran.ok(), ran.output);
    CHECK(ran.output.rfind("ok ", 0) == 0);
  }
}
