// Backend plug-ins: the example under examples/ built out of tree against the installed header
// only, loaded and tuned through end to end; broken plug-ins are clear errors, never crashes.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "client/client.hpp"
#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "ir/loop_nest.hpp"
#include "ir/parse.hpp"
#include "ir/program_json.hpp"
#include "measure/measure.hpp"
#include "random_schedules.hpp"
#include "run_kernel.hpp"
#include "server/daemon_harness.hpp"
#include "support/subprocess.hpp"
#include "tiletune/backend_plugin.h"
#include "tuner/space.hpp"

using namespace tiletune;
using tiletune::test::TempDir;

namespace {

const std::string kSource = TILETUNE_SOURCE_DIR;
const std::string kBinary = TILETUNE_BINARY_DIR;

void must(const ProcessResult& r, const std::string& what) { REQUIRE_MESSAGE(r.ok(), what << ": " << r.output); }

//! Installs the plug-in header into a prefix and builds examples/scalar_c_backend against it.
std::string build_example_into(const TempDir& dir) {
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

//! The example plug-in, built once per test process.
std::string build_example() {
  static TempDir dir;
  static std::string plugin = build_example_into(dir);
  return plugin;
}

//! A plug-in with one thing wrong, chosen by a macro: what tiletune must refuse clearly.
const char* kBrokenPlugin = R"(
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "tiletune/backend_plugin.h"
#include <stdlib.h>
#if defined(ZERO_TIME) || defined(ABI_1_0_TABLE) || defined(MINOR_ZERO)
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
#ifdef MINOR_ZERO
  p.name = "minor-zero"; /* abi_minor stays 0: it reads ABI 1.0 programs */
#endif
#ifdef ABI_1_0_TABLE
  /* A table as a plug-in built against ABI 1.0's header fills it: it ends before abi_minor. */
  p.name = "abi-one-oh";
  p.struct_size = offsetof(tt_plugin, abi_minor);
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
  std::string plugin = build_example();
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

namespace {

const char* kTypedOps = R"(
op requant(A: u8[M, K], B: i8[K, N], bias: i32[N]) -> Y: u8[M, N] {
  acc[m, n] += A[m, k] * B[k, n]
  Y[m, n] = f32(acc[m, n] + bias[n]) * 0.004 + 100
}
op mm_bf16(A: bf16[M, K], B: bf16[K, N]) -> C: bf16[M, N] {
  C[m, n] += A[m, k] * B[k, n]
}
op casts(X: f32[N], Q: i8[N]) -> (I: i32[N], R: i8[N], H: f16[N]) {
  I[n] = i32(X[n] * 2.5) + Q[n] * 3
  R[n] = select(Q[n] > 0, X[n] * 300, round(X[n] * 40))
  H[n] = abs(Q[n]) - 7
}
op window_max(X: i8[N, D] pad -128) -> Y: i32[N, D] {
  Y[n, d] max= X[n, d + r - 1] * 2 where r < 3
}
)";

ir::Workload typed_op(const std::string& name, const std::string& sizes) {
  return ir::bind(ir::select_op(ir::parse_ops(kTypedOps), name, "typed ops"), ir::parse_sizes(sizes));
}

}  // namespace

TEST_CASE("plug-ins: ABI 1.1 programs give each tensor its type and each node the type it computes in") {
  auto be = codegen::make_backend("cpu");
  auto w = typed_op("requant", "M=3,N=5,K=7");
  auto naive = ir::naive_schedule(w);
  auto p = nlohmann::json::parse(ir::program_to_json(w, ir::lower(w, naive, be->target().traits), naive.to_json()));
  CHECK(p["abi"] == 1);
  CHECK(p["abi_minor"] == TT_PLUGIN_ABI_MINOR);
  std::map<std::string, std::string> dtype;
  for (auto& b : p["buffers"]) dtype[b["name"]] = b["dtype"];
  CHECK(dtype ==
        std::map<std::string, std::string>{{"A", "u8"}, {"B", "i8"}, {"bias", "i32"}, {"acc", "i32"}, {"Y", "u8"}});
  const auto& st = p["stages"][0];
  CHECK(st["accumulate"] == "i32");
  CHECK(st["body"]["op"] == "mul");
  CHECK(st["body"]["type"] == "i32");
  CHECK(st["body"]["args"][0]["type"] == "i32");  // a u8 load widens to i32
  // Y = f32(acc + bias) * 0.004 + 100 into u8: the sum is i32, the cast under the product a
  // node, the weak literal 100 f32 from what it meets, and the f32 value is cast to the
  // stage's i32 before the store saturates it into u8.
  const auto& y = p["stages"][1];
  CHECK(y["accumulate"] == "i32");
  CHECK(y["body"]["op"] == "cast");
  CHECK(y["body"]["type"] == "i32");
  const auto& sum = y["body"]["args"][0];
  CHECK(sum["op"] == "add");
  CHECK(sum["type"] == "f32");
  CHECK(sum["args"][1]["type"] == "f32");
  const auto& cast = sum["args"][0]["args"][0];
  CHECK(cast["op"] == "cast");
  CHECK(cast["type"] == "f32");
  CHECK(cast["args"][0]["op"] == "add");
  CHECK(cast["args"][0]["type"] == "i32");
  // An f32 op's program has no casts and f32 everywhere: what ABI 1.0 plug-ins read.
  auto f = test::library_workload("matmul_bias_relu", "M=4,N=4,K=4");
  auto fn = ir::naive_schedule(f);
  std::string text = ir::program_to_json(f, ir::lower(f, fn, be->target().traits), fn.to_json());
  CHECK(text.find("\"cast\"") == std::string::npos);
  CHECK(text.find("\"i32\"") == std::string::npos);
}

TEST_CASE("plug-ins: the example runs typed and padded ops (ABI 1.1) as the CPU backend does, with tails") {
  TempDir dir;
  REQUIRE(codegen::load_backend_plugin(build_example()) == "scalar-c");
  auto plugin = codegen::make_backend("scalar-c");
  auto cpu = codegen::make_backend("cpu");
  std::vector<ir::Workload> ops = {typed_op("requant", "M=5,N=7,K=13"), typed_op("mm_bf16", "M=3,N=11,K=37"),
                                   typed_op("casts", "N=29"), typed_op("window_max", "N=3,D=10"),
                                   test::library_workload("conv2d_s2p1", "N=1,C=3,H=7,W=6,K=2,R=3,S=3")};
  for (auto& h : test::half_workloads()) ops.push_back(h);
  for (const ir::Workload& w : ops) {
    CAPTURE(w.canonical_text);
    test::Tensors want = test::run_kernel(*cpu, w, ir::naive_schedule(w), dir);
    tuner::Space space(w, plugin->target().traits);
    tuner::Rng rng(5);
    std::vector<ir::Schedule> schedules{ir::naive_schedule(w)};
    for (int i = 0; i < 3; ++i) schedules.push_back(space.sample(rng));
    for (auto& s : schedules) {
      CAPTURE(s.to_json());
      test::Tensors got = test::run_kernel(*plugin, w, s, dir);
      size_t first_output = 0;
      for (auto& b : w.buffers) first_output += b.role == ir::Buffer::Role::Input;
      for (size_t o = first_output; o < got.mem.size(); ++o) {
        auto n = static_cast<std::int64_t>(got.mem[o].size());
        // Sums in another order differ by rounding; integer results and their saturation do not.
        CHECK_MESSAGE(measure::compare(got.type[o], got.mem[o].data(), want.mem[o].data(), n,
                                       measure::tolerance_for(64, got.type[o]))
                          .empty(),
                      "output " << o);
      }
    }
  }
  // The measuring worker fills, runs and checks the plug-in's typed kernels like any others.
  auto w = typed_op("requant", "M=5,N=7,K=13");
  test::all_correct(*plugin, w, {ir::naive_schedule(w)});
}

TEST_CASE("plug-ins: a plug-in reading ABI 1.0 is refused typed and padded ops by name, and still runs f32 ones") {
  TempDir dir;
  // One that declares minor 0, and one whose table predates abi_minor (a smaller struct_size).
  for (std::string variant : {"MINOR_ZERO", "ABI_1_0_TABLE"}) {
    CAPTURE(variant);
    std::string name = codegen::load_backend_plugin(broken_plugin(dir, variant));
    auto be = codegen::make_backend(name);
    auto emit = [&](const ir::Workload& w) {
      auto naive = ir::naive_schedule(w);
      return be->emit(w, ir::lower(w, naive, be->target().traits), naive.to_json());
    };
    auto padded = test::library_workload("conv2d_p1", "N=1,C=2,H=5,W=5,K=2,R=3,S=3");
    CHECK(test::error_of([&] { emit(padded); })
              .find(name + " plug-in (ABI version 1.0) cannot emit op 'conv2d_p1': input 'I' is padded, and padded "
                           "reads came with plug-in ABI 1.1") != std::string::npos);
    CHECK(test::error_of([&] {
            emit(typed_op("mm_bf16", "M=2,N=2,K=2"));
          }).find(name + " plug-in (ABI version 1.0) runs f32 ops only, and op 'mm_bf16' has the bf16 tensor 'A'") !=
          std::string::npos);
    CHECK(emit(test::library_workload("matmul", "M=2,N=2,K=2")) == "nothing to compile");
  }
}

TEST_CASE("plug-ins: the example refuses a malformed ABI 1.1 program with where and why, never a wrong kernel") {
  void* handle = dlopen(build_example().c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(handle);
  auto init = reinterpret_cast<tt_plugin_init_fn>(dlsym(handle, TT_PLUGIN_ENTRY));
  REQUIRE(static_cast<bool>(init));
  tt_plugin p{};
  char err[512] = {};
  REQUIRE(init(TT_PLUGIN_ABI_VERSION, &p, err, sizeof err) == 0);
  CHECK(p.abi_minor == 1);
  void* self = p.create("{}", err, sizeof err);
  REQUIRE(self);
  // A correct program of a typed op, then one thing wrong at a time.
  auto be = codegen::make_backend("cpu");
  auto w = typed_op("requant", "M=3,N=5,K=7");
  auto naive = ir::naive_schedule(w);
  const auto good = nlohmann::json::parse(ir::program_to_json(w, ir::lower(w, naive, be->target().traits), "{}"));
  auto refused = [&](const std::function<void(nlohmann::json&)>& spoil, const std::string& why) {
    nlohmann::json bad = good;
    spoil(bad);
    char message[512] = {};
    char* text = p.emit(self, bad.dump().c_str(), message, sizeof message);
    if (text) p.free_text(text);
    CHECK_MESSAGE(text == nullptr, why);
    CHECK_MESSAGE(std::string(message).find(why) != std::string::npos, message);
  };
  char* ok = p.emit(self, good.dump().c_str(), err, sizeof err);
  CHECK_MESSAGE(ok != nullptr, err);
  if (ok) p.free_text(ok);
  refused([](auto& j) { j["abi_minor"] = 2; }, "abi_minor 2 is not supported (this plug-in reads abi 1.1)");
  refused([](auto& j) { j["buffers"][0]["dtype"] = "f64"; }, "buffer 'A': unknown dtype 'f64'");
  refused([](auto& j) { j["buffers"][0]["pad"] = "zero"; }, "buffer 'A': 'pad' must be a number");
  refused(
      [](auto& j) {
        for (auto& b : j["buffers"])
          if (b["name"] == "Y") b["pad"] = 0;
      },
      "buffer 'Y': only inputs have a pad value");
  refused([](auto& j) { j["stages"][0]["accumulate"] = "f64"; }, "unknown accumulate type 'f64'");
  refused([](auto& j) { j["stages"][0]["body"]["type"] = "u8"; }, "unknown node type 'u8'");
  refused([](auto& j) { j["stages"][1]["body"]["args"].push_back(j["stages"][1]["body"]["args"][0]); },
          "'cast' takes 1 argument");
  refused(
      [](auto& j) {
        j["stages"][0]["body"] = {{"op", "call"}, {"fn", "exp"}, {"type", "i32"}, {"args", {j["stages"][0]["body"]}}};
      },
      "'exp' computes in f32, not in i32");
  p.destroy(self);
  dlclose(handle);
}
