// Backend plug-ins: the example under examples/ built out of tree against the installed header
// only, loaded and tuned through end to end; broken plug-ins are clear errors, never crashes.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "client/client.hpp"
#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "measure/measure.hpp"
#include "server/daemon_harness.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using tiletune::test::TempDir;

namespace {

const std::string kSource = TILETUNE_SOURCE_DIR;
const std::string kBinary = TILETUNE_BINARY_DIR;

void must(const ProcessResult& r, const std::string& what) { REQUIRE_MESSAGE(r.ok(), what << ": " << r.output); }

//! Installs the plug-in header into a prefix and builds examples/scalar_c_backend against it.
std::string build_example(const TempDir& dir) {
  std::string prefix = dir.file("prefix"), build = dir.file("build");
  must(run_process({"cmake", "--install", kBinary, "--component", "plugin-header", "--prefix", prefix}, 120),
       "installing the header");
  REQUIRE(std::ifstream(prefix + "/include/tiletune/backend_plugin.h").good());
  must(run_process(
           {"cmake", "-S", kSource + "/examples/scalar_c_backend", "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix}, 120),
       "configuring the example");
  must(run_process({"cmake", "--build", build}, 300), "building the example");
  return build + "/libtiletune_scalar_c.so";
}

//! A plug-in with one thing wrong, chosen by a macro: what tiletune must refuse clearly.
const char* kBrokenPlugin = R"(
#include <stdio.h>
#include <string.h>
#include "tiletune/backend_plugin.h"
#include <stdlib.h>
#ifdef ZERO_TIME
/* Everything works except the timer: run reports 0 seconds. */
static int instance;
static void* create(const char* o, char* err, size_t n) { return &instance; }
static int describe(void* b, tt_target* t, char* err, size_t n) {
  t->fingerprint_json = "{\"device\":\"none\"}";
  t->vector_lanes = 1; t->vector_registers = 16; t->threads = 1;
  return 0;
}
static char* emit(void* b, const char* p, char* err, size_t n) { return strdup("nothing to compile"); }
static int build(void* b, const char* s, const char* a, char* log, size_t n) { FILE* f = fopen(a, "w"); if (f) fclose(f); return !f; }
static void* load(void* b, const char* a, const int64_t* f, int32_t c, int64_t w, char* err, size_t n) { return &instance; }
static int run(void* k, float* const* t, float* w, uint32_t f, double* s, char* err, size_t n) { *s = 0; return 0; }
#else
static void* create(const char* o, char* err, size_t n) { snprintf(err, n, "no device attached"); return NULL; }
static int describe(void* b, tt_target* t, char* err, size_t n) { return 1; }
static char* emit(void* b, const char* p, char* err, size_t n) { return NULL; }
static int build(void* b, const char* s, const char* a, char* log, size_t n) { return 1; }
static void* load(void* b, const char* a, const int64_t* f, int32_t c, int64_t w, char* err, size_t n) { return NULL; }
static int run(void* k, float* const* t, float* w, uint32_t f, double* s, char* err, size_t n) { return 1; }
#endif
static void destroy(void* b) {}
static void free_text(char* t) { free(t); }
static void unload(void* k) {}
#ifndef NO_ENTRY
int tt_plugin_init(uint32_t host, tt_plugin* out, char* err, size_t n) {
#ifdef INIT_FAILS
  snprintf(err, n, "licence check failed");
  return 1;
#endif
  tt_plugin p = {TT_PLUGIN_ABI_VERSION, sizeof(tt_plugin), "broken", "a broken plug-in", ".c",
                 create, destroy, describe, emit, free_text, build, load, run, unload};
#ifdef WRONG_ABI
  p.abi_version = 99;
#endif
#ifdef NO_RUN
  p.run = NULL;
#endif
#ifdef BAD_NAME
  p.name = "Bad Name!";
#endif
#ifdef ZERO_TIME
  p.name = "zero-time";
#endif
  *out = p;
  return 0;
}
#endif
)";

std::string broken_plugin(const TempDir& dir, const std::string& variant) {
  std::string src = dir.file("broken.c"), out = dir.file("broken-" + variant + ".so");
  std::ofstream(src) << kBrokenPlugin;
  std::vector<std::string> argv{"cc", "-shared", "-fPIC", "-I" + kSource + "/include", "-o", out, src};
  if (!variant.empty()) argv.push_back("-D" + variant);
  must(run_process(argv, 120), "compiling the broken plug-in");
  return out;
}

}  // namespace

TEST_CASE("plug-ins: the example built out of tree tunes an op end to end through --backend-plugin") {
  TempDir dir;
  std::string plugin = build_example(dir);
  std::string db = dir.file("t.db");
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), kBinary + "/tiletune");
    args.insert(args.end(),
                {"--backend-plugin", plugin, "--backend", "scalar-c", "--db", db, "--cache", dir.file("cache")});
    return run_process(args, 300);
  };
  auto tune = cli({"tune", "matmul_bias_relu", "-s", "M=19,N=23,K=7", "--trials", "6", "--batch", "3", "--strategy",
                   "random", "--min-time", "0.01"});
  CHECK_MESSAGE(tune.exit_code == 0, tune.output);
  CHECK_MESSAGE(tune.output.find("6/6") != std::string::npos, tune.output);
  CHECK_MESSAGE(tune.output.find("  6    6       0  ") != std::string::npos,
                tune.output);  // 6 records, 6 new, 0 failed
  auto show = cli({"show", "matmul_bias_relu", "-s", "M=19,N=23,K=7"});
  CHECK_MESSAGE(show.exit_code == 0, show.output);
  CHECK(show.output.find("tt_kernel") != std::string::npos);
  // Registered beside the in-tree backends, with its origin (what a measuring worker loads).
  CHECK(codegen::load_backend_plugin(plugin) == "scalar-c");
  CHECK(codegen::load_backend_plugin(plugin) == "scalar-c");
  CHECK(codegen::backend_origin("scalar-c") == std::filesystem::canonical(plugin).string());
  CHECK(codegen::backend_origin("cpu") == "");
  auto be = codegen::make_backend("scalar-c");
  CHECK(be->target().backend == "scalar-c");
  CHECK(be->target().traits.vector_lanes == 1);
  // A padded op is refused with the reason: plug-in ABI 1 has no padded reads.
  auto padded = test::library_workload("conv2d_p1", "N=1,C=2,H=5,W=5,K=2,R=3,S=3");
  auto naive = ir::naive_schedule(padded);
  CHECK(test::error_of([&] {
          be->emit(padded, ir::lower(padded, naive, be->target().traits), naive.to_json());
        }).find("input 'I' is padded, and padded reads are not part of plug-in ABI 1") != std::string::npos);
  // So is a typed op: the program of ABI 1 is f32.
  auto typed = ir::bind(ir::parse_op("op h(X: bf16[N]) -> Y: f32[N] { Y[n] = X[n] * 2.0 }"), ir::parse_sizes("N=8"));
  auto typed_naive = ir::naive_schedule(typed);
  CHECK(test::error_of([&] {
          be->emit(typed, ir::lower(typed, typed_naive, be->target().traits), typed_naive.to_json());
        }).find("scalar-c plug-in (ABI version 1) runs f32 ops only, and op 'h' has the bf16 tensor 'X'") !=
        std::string::npos);
  // The daemon tunes through it as through any backend (serve --backend-plugin loads it first).
  test::InProcessDaemon d(dir.file("d.db"));
  client::Client cl(d.url(), "tok");
  auto job = cl.call(
      "POST", "/v1/tune",
      {{"op", "softmax"}, {"sizes", "N=5,D=9"}, {"backend", "scalar-c"}, {"trials", 3}, {"strategy", "random"}})["job"];
  auto done = cl.wait(job["id"], 120);
  CHECK_MESSAGE(done.state == "done", done.error);
  auto best = cl.best("softmax", "N=5,D=9", "scalar-c");
  REQUIRE(best.has_value());
  CHECK(best->source.find("tt_kernel") != std::string::npos);
}

TEST_CASE(
    "plug-ins: a missing file, no entry point, another ABI, a failing init or a missing function are clear errors") {
  TempDir dir;
  auto refused = [&](const std::string& path, const std::string& why) {
    ErrorKind kind{};
    std::string msg = test::error_of([&] { codegen::load_backend_plugin(path); }, &kind);
    CHECK_MESSAGE(msg.find(why) != std::string::npos, msg);
    CHECK(msg.find("backend plug-in " + path) != std::string::npos);
    CHECK(kind == ErrorKind::InvalidInput);
  };
  refused(dir.file("missing.so"), "cannot be loaded");
  refused(broken_plugin(dir, "NO_ENTRY"), "has no entry point tt_plugin_init");
  refused(broken_plugin(dir, "WRONG_ABI"), "built for plug-in ABI version 99; this tiletune speaks version 1");
  refused(broken_plugin(dir, "INIT_FAILS"), "failed to initialise: licence check failed");
  refused(broken_plugin(dir, "NO_RUN"), "leaves run unset");
  refused(broken_plugin(dir, "BAD_NAME"), "names itself 'Bad Name!'");
  // Loads, but its instances cannot be made: the error says why, at make_backend.
  std::string ok = broken_plugin(dir, "");
  CHECK(codegen::load_backend_plugin(ok) == "broken");
  CHECK(test::error_of([] { codegen::make_backend("broken"); }).find("failed to initialise: no device attached") !=
        std::string::npos);
  // A plug-in whose timer reports 0 seconds fails its kernels instead of ranking them first.
  CHECK(codegen::load_backend_plugin(broken_plugin(dir, "ZERO_TIME")) == "zero-time");
  auto zero = codegen::make_backend("zero-time");
  auto w = test::library_workload("matmul", "M=4,N=4,K=4");
  measure::MeasureOptions mo;
  mo.cache_dir = dir.file("cache");
  measure::Measurer m(*zero, w, mo);
  std::string why = test::error_of([&] { m.measure({ir::naive_schedule(w)}); });
  CHECK_MESSAGE(why.find("zero-time plug-in: run reported 0") != std::string::npos, why);
  // The command line turns each into a message and the usage exit code.
  auto r = run_process({kBinary + "/tiletune", "tune", "matmul", "-s", "M=8,N=8,K=8", "--backend-plugin",
                        broken_plugin(dir, "WRONG_ABI"), "--db", dir.file("t.db")},
                       60);
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.output.find("ABI version 99") != std::string::npos, r.output);
  r = run_process(
      {kBinary + "/tiletune", "serve", "--backend-plugin", dir.file("missing.so"), "--db", dir.file("t.db")}, 60);
  CHECK(r.exit_code == 2);
  CHECK_MESSAGE(r.output.find("cannot be loaded") != std::string::npos, r.output);
}
