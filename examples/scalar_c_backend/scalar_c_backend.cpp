// Example tiletune backend plug-in "scalar-c": plain C loops compiled by the system C compiler.
//
// It is built out of tree against nothing but the installed header tiletune/backend_plugin.h
// (see CMakeLists.txt and README.md) and shows the whole contract:
//   - tt_plugin_init fills the function table after checking the host's ABI version;
//   - create parses the options; describe reports the host CPU and the compiler (the
//     fingerprint of timings), probed on first use: a measuring worker that only loads and
//     runs artifacts needs no compiler;
//   - emit turns the program JSON of one candidate into C source with the candidate's tile
//     loops, so that the tuner measures real differences in loop order and tiling;
//   - build runs the compiler (fork/execvp, no shell), load dlopens the result, run times it.
//
// Knobs a scalar backend cannot use (packing, vectorization, parallel loops, row fusion) are
// ignored: by contract none of them changes the results.
//
// It reads program ABI 1.1: padded inputs (a guarded load per padded read) and element types
// (typed C pointers; values computed in float or int32_t as each node's "type" says; stores
// round and saturate; a reduction into a narrower type sums in a buffer of its accumulator's).
//
// No C++ exception crosses the C boundary: every entry point catches everything and reports
// the message through its err/log buffer.

#include <tiletune/backend_plugin.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using nlohmann::json;

constexpr const char* kName = "scalar-c";
constexpr const char* kDescription = "example plug-in: plain C loops through the system C compiler";
constexpr const char* kSourceExtension = ".c";
constexpr const char* kCodegenVersion = "scalar-c-2";
constexpr const char* kDefaultCompiler = "cc";
// The compiler's arguments around source and artifact: <cc> FLAGS -o artifact source -lm
// -fwrapv: i32 arithmetic wraps, as tiletune's own kernels' does.
const std::vector<std::string> kFlags = {"-O2", "-std=c11", "-fwrapv", "-fPIC", "-shared"};

void set_error(char* err, size_t err_size, const std::string& message) {
  if (err && err_size > 0) std::snprintf(err, err_size, "%s", message.c_str());
}

// ---------------------------------------------------------------------------------------------
// Running a program (the compiler) without a shell

struct CommandResult {
  bool started = false;  // fork succeeded
  int exit_code = -1;    // exit status, or -1 when killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr interleaved, at most max_output bytes
  bool truncated = false;
};

//! Runs argv[0] (looked up in PATH) with stdin from /dev/null and stdout+stderr captured.
//! Safe to call from several threads at once: every descriptor is close-on-exec, so a child
//! started by another thread never holds our pipe open.
CommandResult run_command(const std::vector<std::string>& args, size_t max_output) {
  CommandResult r;
  if (args.empty()) throw std::runtime_error("empty command");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Prepared before fork: the child may only call async-signal-safe functions.
  std::string exec_failed = "cannot execute '" + args[0] + "' (not found in PATH or not executable)\n";

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    if (devnull >= 0) close(devnull);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // Child. dup2 clears close-on-exec on the new descriptors.
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execvp(argv[0], argv.data());
    ssize_t ignored = write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(127);
  }
  r.started = true;
  close(fds[1]);
  if (devnull >= 0) close(devnull);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t room = max_output > r.output.size() ? max_output - r.output.size() : 0;
    size_t take = static_cast<size_t>(n) < room ? static_cast<size_t>(n) : room;
    r.output.append(buf, take);
    if (take < static_cast<size_t>(n)) r.truncated = true;  // keep draining so the child never blocks
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

// ---------------------------------------------------------------------------------------------
// The backend instance

struct Instance {
  std::string compiler = kDefaultCompiler;
  std::string device;
  int threads = 0;  // accepted and ignored: the kernels are single-threaded
  std::string compiler_version;
  std::string cpu_model;
  std::string fingerprint_json;
  std::string family_json;
  tt_target target{};
};

struct LoadedKernel {
  void* handle = nullptr;
  int (*fn)(float* const*, float*) = nullptr;  // non-zero: out of memory
  std::vector<int64_t> tensor_floats;
  int64_t workspace_floats = 0;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = trim(line.substr(0, colon));
    if (key == "model name" || key == "Model" || key == "cpu model" || key == "Hardware")
      return trim(line.substr(colon + 1));
  }
  struct utsname u;
  if (uname(&u) == 0) return std::string(u.machine) + " (model unknown)";
  return "unknown";
}

int64_t cache_bytes(int name, int64_t fallback) {
  long v = sysconf(name);
  return v > 0 ? static_cast<int64_t>(v) : fallback;
}

Instance* create_instance(const char* options_json) {
  auto inst = std::make_unique<Instance>();
  std::string text = options_json ? options_json : "";
  if (!trim(text).empty()) {
    json o = json::parse(text);
    if (o.is_null()) o = json::object();
    if (!o.is_object()) throw std::runtime_error("options must be a JSON object");
    if (o.contains("threads") && !o["threads"].is_null()) {
      if (!o["threads"].is_number_integer() || o["threads"].get<int64_t>() < 0)
        throw std::runtime_error("option 'threads' must be an integer >= 0");
      inst->threads = o["threads"].get<int>();
    }
    if (o.contains("compiler") && !o["compiler"].is_null()) {
      if (!o["compiler"].is_string()) throw std::runtime_error("option 'compiler' must be a string");
      std::string c = o["compiler"].get<std::string>();
      if (!c.empty()) inst->compiler = c;
    }
    if (o.contains("device") && !o["device"].is_null()) {
      if (!o["device"].is_string()) throw std::runtime_error("option 'device' must be a string");
      inst->device = o["device"].get<std::string>();
      if (!inst->device.empty() && inst->device != "cpu" && inst->device != "host" && inst->device != "0")
        throw std::runtime_error("backend scalar-c runs on the host CPU only; device '" + inst->device +
                                 "' is unknown (use \"\", \"cpu\" or \"host\")");
    }
  }

  // The compiler is probed in describe, not here: a measuring worker creates the backend
  // only to load and run artifacts and needs no compiler.
  return inst.release();
}

//! Probes the compiler and the CPU once and fills inst.target; throws if the compiler does not run.
void describe_instance(Instance& inst) {
  if (!inst.fingerprint_json.empty()) return;
  CommandResult v = run_command({inst.compiler, "--version"}, 4096);
  if (v.exit_code != 0)
    throw std::runtime_error("compiler '" + inst.compiler + "' does not run (`" + inst.compiler +
                             " --version` failed): " + trim(v.output));
  inst.compiler_version = trim(v.output.substr(0, v.output.find('\n')));
  inst.cpu_model = cpu_model();

  std::string flags;
  for (auto& f : kFlags) flags += (flags.empty() ? "" : " ") + f;
  flags += " -lm";
  inst.family_json = json{{"backend", kName}, {"cpu", inst.cpu_model}}.dump();
  inst.fingerprint_json = json{
      {"backend", kName},
      {"cpu", inst.cpu_model},
      {"compiler", inst.compiler},
      {"compiler_version", inst.compiler_version},
      {"flags", flags},
      {"codegen",
       kCodegenVersion}}.dump();

  tt_target& t = inst.target;
  t.fingerprint_json = inst.fingerprint_json.c_str();
  t.family_json = inst.family_json.c_str();
  t.vector_lanes = 1;
  t.vector_registers = 16;
  t.threads = 1;
  t.max_group_size = 0;
  t.local_bytes = 0;
  t.l1_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
  t.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 1 << 20);
  t.l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 32 << 20);
}

// ---------------------------------------------------------------------------------------------
// Code generation: program JSON -> C source
//
// C names: tensor X is `t_X`, the innermost loop of axis a (the value of index variable a) is
// `i_a`, the tile loop of axis a at level L is `oL_a`, helpers are `tt_*`. The prefixes keep
// user names apart from each other and from C keywords and library names.

struct Buf {
  std::string name, role, cname;
  std::string dtype = "f32";
  json pad;  // null, a number, "inf" or "-inf"
  std::vector<int64_t> shape;
  int64_t workspace_offset = -1;
  bool materialized = false;
  int64_t elements() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

struct LoopSpec {
  std::string axis;
  int level = 0;
  int64_t step = 1, block = 1, extent = 1;
};

struct AxisSpec {
  std::string name;
  int64_t extent = 1;
  bool reduce = false;
};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string int_literal(double v) {
  if (!(v == std::floor(v)) || std::fabs(v) > 2147483647.0)
    throw std::runtime_error("the i32 constant " + std::to_string(v) + " is not a 32-bit integer");
  return v < 0 ? "(" + std::to_string(static_cast<long long>(v)) + ")" : std::to_string(static_cast<long long>(v));
}

std::string float_literal(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return (v < 0 ? "(" + s + "f)" : s + "f");
}

//! Text for a C comment: no comment terminator inside.
std::string comment_safe(std::string s) {
  for (size_t p; (p = s.find("*/")) != std::string::npos;) s.replace(p, 2, "* /");
  return s;
}

// Element types (program ABI 1.1): the C type an element is stored in, and the compute type
// ("f32" or "i32") its values have.
const std::map<std::string, std::pair<std::string, std::string>>& element_types() {
  static const std::map<std::string, std::pair<std::string, std::string>> t = {
      {"f32", {"float", "f32"}},   {"bf16", {"uint16_t", "f32"}}, {"f16", {"_Float16", "f32"}},
      {"i32", {"int32_t", "i32"}}, {"i8", {"int8_t", "i32"}},     {"u8", {"uint8_t", "i32"}}};
  return t;
}
std::string compute_c_type(const std::string& type) { return type == "i32" ? "int32_t" : "float"; }

//! A stored element as its compute type.
std::string widen(const std::string& dtype, const std::string& element) {
  if (dtype == "bf16") return "tt_bf16_to_f32(" + element + ")";
  if (dtype == "f16") return "((float)" + element + ")";
  if (dtype == "i8" || dtype == "u8") return "((int32_t)" + element + ")";
  return element;
}

//! A value of compute type `type` as it is stored into `dtype`: nearest even, saturated.
std::string narrow(const std::string& dtype, const std::string& type, const std::string& value) {
  if (dtype == "f32") return type == "f32" ? value : "((float)" + value + ")";
  if (dtype == "bf16") return "tt_f32_to_bf16(" + std::string(type == "f32" ? "" : "(float)") + value + ")";
  if (dtype == "f16") return "((_Float16)" + value + ")";
  std::string i = type == "i32" ? value : "tt_f32_to_i32(" + value + ")";
  if (dtype == "i8") return "((int8_t)tt_clamp(" + i + ", -128, 127))";
  if (dtype == "u8") return "((uint8_t)tt_clamp(" + i + ", 0, 255))";
  return i;
}

int64_t get_int(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number_integer())
    throw std::runtime_error(where + ": '" + key + "' must be an integer");
  return j[key].get<int64_t>();
}

std::string get_string(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) throw std::runtime_error(where + ": '" + key + "' must be a string");
  return j[key].get<std::string>();
}

class Emitter {
 public:
  explicit Emitter(const json& program) : p_(program) {}

  std::string run() {
    if (!p_.is_object()) throw std::runtime_error("the program is not a JSON object");
    if (p_.contains("abi") && p_["abi"] != 1)
      throw std::runtime_error("program JSON abi " + p_["abi"].dump() + " is not supported (this plug-in reads abi 1)");
    if (p_.contains("abi_minor") && !(p_["abi_minor"].is_number_unsigned() && p_["abi_minor"].get<unsigned>() <= 1))
      throw std::runtime_error("program JSON abi_minor " + p_["abi_minor"].dump() +
                               " is not supported (this plug-in reads abi 1.1)");
    read_buffers();
    header();
    out_ << "int tt_kernel(float* const* tensors, float* workspace) {\n";
    line(1, "(void)tensors;");
    line(1, "(void)workspace;");
    int arg = 0;
    for (auto& b : bufs_) {
      std::string type = element_types().at(b.dtype).first;
      if (b.role != "temp") {
        line(1, type + "* const " + b.cname + " = (" + type + "*)tensors[" + std::to_string(arg++) + "];  /* " +
                    b.role + " " + b.dtype + shape_text(b.shape) + " */");
      } else if (b.materialized) {
        // The workspace is in 4-byte units; temporaries have a compute type (f32 or i32).
        line(1, type + "* const " + b.cname + " = (" + type + "*)(workspace + " + std::to_string(b.workspace_offset) +
                    ");  /* temporary " + b.dtype + shape_text(b.shape) + " */");
      }
    }
    if (!p_.contains("stages") || !p_["stages"].is_array()) throw std::runtime_error("'stages' must be an array");
    for (size_t s = 0; s < p_["stages"].size(); ++s) stage(p_["stages"][s], "stage " + std::to_string(s));
    line(1, "return 0;");
    out_ << "}\n";
    return out_.str();
  }

 private:
  const json& p_;
  std::ostringstream out_;
  std::vector<Buf> bufs_;
  std::map<std::string, size_t> by_name_;

  // Per stage
  std::set<std::string> axis_names_;
  std::string where_;

  void line(int depth, const std::string& text) {
    if (!text.empty()) out_ << std::string(2 * static_cast<size_t>(depth), ' ') << text;
    out_ << "\n";
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  void read_buffers() {
    if (!p_.contains("buffers") || !p_["buffers"].is_array()) throw std::runtime_error("'buffers' must be an array");
    for (auto& jb : p_["buffers"]) {
      Buf b;
      b.name = get_string(jb, "name", "buffer");
      std::string where = "buffer '" + b.name + "'";
      if (!is_identifier(b.name)) throw std::runtime_error(where + ": the name is not an identifier");
      if (by_name_.count(b.name)) throw std::runtime_error(where + " is declared twice");
      b.role = get_string(jb, "role", where);
      if (b.role != "input" && b.role != "output" && b.role != "temp")
        throw std::runtime_error(where + ": unknown role '" + b.role + "'");
      if (!jb.contains("shape") || !jb["shape"].is_array())
        throw std::runtime_error(where + ": 'shape' must be an array");
      for (auto& d : jb["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          throw std::runtime_error(where + ": dimensions must be integers >= 0");
        b.shape.push_back(d.get<int64_t>());
      }
      if (jb.contains("dtype")) {
        b.dtype = get_string(jb, "dtype", where);
        if (!element_types().count(b.dtype)) throw std::runtime_error(where + ": unknown dtype '" + b.dtype + "'");
        if (b.role == "temp" && element_types().at(b.dtype).second != b.dtype)
          throw std::runtime_error(where + ": a temporary of type " + b.dtype + " (the workspace holds f32 and i32)");
      }
      if (jb.contains("pad") && !jb["pad"].is_null()) {
        b.pad = jb["pad"];
        if (!(b.pad.is_number() || b.pad == "inf" || b.pad == "-inf"))
          throw std::runtime_error(where + ": 'pad' must be a number, \"inf\" or \"-inf\"");
        if (b.role != "input") throw std::runtime_error(where + ": only inputs have a pad value");
      }
      b.workspace_offset = jb.contains("workspace_offset") && !jb["workspace_offset"].is_null()
                               ? get_int(jb, "workspace_offset", where)
                               : -1;
      b.materialized = b.role != "temp" || b.workspace_offset >= 0;
      b.cname = "t_" + b.name;
      by_name_[b.name] = bufs_.size();
      bufs_.push_back(b);
    }
  }

  const Buf& buffer(const std::string& name) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) throw std::runtime_error(where_ + ": unknown tensor '" + name + "'");
    return bufs_[it->second];
  }

  void header() {
    std::string op = p_.value("op", std::string("?"));
    out_ << "/* tiletune scalar-c kernel (" << kCodegenVersion << ") for op " << comment_safe(op) << "\n";
    if (p_.contains("sizes")) out_ << " * sizes     " << comment_safe(p_["sizes"].dump()) << "\n";
    if (p_.contains("workload") && p_["workload"].is_string())
      out_ << " * workload  " << comment_safe(p_["workload"].get<std::string>()) << "\n";
    if (p_.contains("config")) out_ << " * config    " << comment_safe(p_["config"].dump()) << "\n";
    out_ << " * Plain C loops in the candidate's tile order; packing, vectorization, parallel loops\n"
            " * and row fusion are not used (they never change the results).\n"
            " */\n"
            "#include <math.h>\n"
            "#include <stdint.h>\n"
            "#include <stdlib.h>\n"
            "#include <string.h>\n\n"
            "static inline long tt_imin(long a, long b) { return a < b ? a : b; }\n"
            "static inline float tt_max(float a, float b) { return a > b ? a : b; }\n"
            "static inline float tt_min(float a, float b) { return a < b ? a : b; }\n"
            "static inline int32_t tt_max_i(int32_t a, int32_t b) { return a > b ? a : b; }\n"
            "static inline int32_t tt_min_i(int32_t a, int32_t b) { return a < b ? a : b; }\n"
            "static inline int32_t tt_abs_i(int32_t a) { return a < 0 ? -a : a; }\n"
            "static inline float tt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
            "/* Conversions of program ABI 1.1: nearest even, saturating; NaN to an integer is 0. */\n"
            "static inline int32_t tt_clamp(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; "
            "}\n"
            "static inline int32_t tt_f32_to_i32(float x) {\n"
            "  if (x != x) return 0;\n"
            "  float r = rintf(x);\n"
            "  return r >= 2147483648.0f ? INT32_MAX : r < -2147483648.0f ? INT32_MIN : (int32_t)r;\n"
            "}\n"
            "static inline float tt_bf16_to_f32(uint16_t h) {\n"
            "  uint32_t u = (uint32_t)h << 16;\n"
            "  float f;\n"
            "  memcpy(&f, &u, 4);\n"
            "  return f;\n"
            "}\n"
            "static inline uint16_t tt_f32_to_bf16(float f) {\n"
            "  uint32_t u;\n"
            "  memcpy(&u, &f, 4);\n"
            "  if (f != f) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */\n"
            "  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
            "}\n\n";
  }

  // --- expressions ------------------------------------------------------------------------

  //! `c1 * v1 + c2 * v2 + k` as C, largest coefficient first (i_m * 29 + i_n + 3).
  static std::string linear_text(std::vector<std::pair<std::string, int64_t>> terms, int64_t constant) {
    std::stable_sort(terms.begin(), terms.end(), [](const auto& x, const auto& y) {
      return (x.second < 0 ? -x.second : x.second) > (y.second < 0 ? -y.second : y.second);
    });
    std::string s;
    for (auto& [var, c] : terms) {
      if (c == 0) continue;
      if (!s.empty())
        s += c < 0 ? " - " : " + ";
      else if (c < 0)
        s += "-";
      int64_t a = c < 0 ? -c : c;
      s += a == 1 ? var : var + " * " + std::to_string(a);
    }
    if (s.empty()) return std::to_string(constant);
    if (constant > 0) s += " + " + std::to_string(constant);
    if (constant < 0) s += " - " + std::to_string(-constant);
    return s;
  }

  //! The terms of one index (variable, coefficient) and its constant, checked.
  std::pair<std::vector<std::pair<std::string, int64_t>>, int64_t> index_terms(const Buf& b, const json& ix) {
    if (!ix.is_object()) throw std::runtime_error(where_ + ": an index of '" + b.name + "' is not an object");
    std::vector<std::pair<std::string, int64_t>> terms;
    if (ix.contains("terms")) {
      for (auto& t : ix["terms"]) {
        if (!t.is_array() || t.size() != 2 || !t[0].is_string() || !t[1].is_number_integer())
          throw std::runtime_error(where_ + ": an index term of '" + b.name + "' is not [variable, coefficient]");
        std::string var = t[0].get<std::string>();
        if (!axis_names_.count(var))
          throw std::runtime_error(where_ + ": index variable '" + var + "' is not an axis of the stage");
        terms.emplace_back("i_" + var, t[1].get<int64_t>());
      }
    }
    return {terms, ix.contains("constant") ? get_int(ix, "constant", where_) : 0};
  }

  //! The C condition that `b[index...]` lies inside `b` (for a padded input); "" when no index can
  //! leave it (the load of another tensor, or indices with constant, in-range values only).
  std::string inside(const Buf& b, const json& index) {
    std::string cond;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      auto [terms, constant] = index_terms(b, index[d]);
      std::string e = linear_text(terms, constant);
      if (terms.empty() && constant >= 0 && constant < b.shape[d]) continue;
      cond +=
          std::string(cond.empty() ? "" : " && ") + "(" + e + ") >= 0 && (" + e + ") < " + std::to_string(b.shape[d]);
    }
    return cond;
  }

  //! Row-major address of `tensor[index...]` as a C expression in the loop variables.
  std::string address(const Buf& b, const json& index) {
    if (!index.is_array() || index.size() != b.shape.size())
      throw std::runtime_error(where_ + ": a load of '" + b.name + "' needs " + std::to_string(b.shape.size()) +
                               " indices");
    std::vector<std::pair<std::string, int64_t>> terms;  // C variable, coefficient (first use order)
    int64_t constant = 0, stride = 1;
    for (size_t d = b.shape.size(); d-- > 0;) {
      auto [dim_terms, dim_constant] = index_terms(b, index[d]);
      constant += stride * dim_constant;
      for (auto& [var, coeff] : dim_terms) {
        int64_t c = stride * coeff;
        bool merged = false;
        for (auto& e : terms)
          if (e.first == var) e.second += c, merged = true;
        if (!merged) terms.emplace_back(var, c);
      }
      stride *= b.shape[d];
    }
    return b.cname + "[" + linear_text(terms, constant) + "]";
  }

  //! C expression of a body. `acc_tensor`/`acc_value`: loads of that tensor (the stage's own,
  //! in an epilogue) stand for the reduced value.
  std::string expr(const json& e, const std::string& acc_tensor = "", const std::string& acc_value = "") {
    if (!e.is_object() || !e.contains("op") || !e["op"].is_string())
      throw std::runtime_error(where_ + ": an expression has no 'op'");
    std::string op = e["op"].get<std::string>();
    // The type the node computes in (program ABI 1.1; f32 throughout before it).
    std::string type = e.contains("type") ? get_string(e, "type", where_) : "f32";
    if (type != "f32" && type != "i32") throw std::runtime_error(where_ + ": unknown node type '" + type + "'");
    const bool integer = type == "i32";
    auto args = [&](size_t n) {
      if (!e.contains("args") || !e["args"].is_array() || e["args"].size() != n)
        throw std::runtime_error(where_ + ": '" + op + "' takes " + std::to_string(n) + " argument(s)");
      std::vector<std::string> a;
      for (auto& x : e["args"]) a.push_back(expr(x, acc_tensor, acc_value));
      return a;
    };
    if (op == "const") {
      if (!e.contains("value") || !e["value"].is_number())
        throw std::runtime_error(where_ + ": a constant has no numeric 'value' (a non-finite number?)");
      return integer ? int_literal(e["value"].get<double>()) : float_literal(e["value"].get<double>());
    }
    if (op == "cast") {
      if (!e.contains("args") || !e["args"].is_array() || e["args"].size() != 1)
        throw std::runtime_error(where_ + ": 'cast' takes 1 argument");
      const json& a = e["args"][0];
      std::string from = a.is_object() && a.contains("type") ? get_string(a, "type", where_) : "f32";
      std::string v = expr(a, acc_tensor, acc_value);
      if (from == type) return v;
      return integer ? "tt_f32_to_i32(" + v + ")" : "((float)" + v + ")";
    }
    if (op == "load") {
      std::string tensor = get_string(e, "tensor", where_);
      if (!acc_tensor.empty() && tensor == acc_tensor) {
        // The reduced value at the point being stored; it must be read at that very point.
        const json& index = e.contains("index") ? e["index"] : json::array();
        size_t d = 0;
        for (auto& ix : index) {
          bool plain = ix.is_object() && ix.value("constant", int64_t{0}) == 0 && ix.contains("terms") &&
                       ix["terms"].size() == 1 && ix["terms"][0].size() == 2 && ix["terms"][0][1] == 1 &&
                       d < spatial_.size() && ix["terms"][0][0] == spatial_[d];
          if (!plain)
            throw std::runtime_error(where_ + ": the epilogue reads '" + tensor +
                                     "' at another point than the one stored");
          ++d;
        }
        if (d != spatial_.size())
          throw std::runtime_error(where_ + ": the epilogue reads '" + tensor + "' with the wrong number of indices");
        return acc_value;
      }
      const Buf& b = buffer(tensor);
      if (!b.materialized)
        throw std::runtime_error(where_ + ": reads temporary '" + tensor +
                                 "', which is not materialized (workspace_offset -1)");
      const json& index = e.contains("index") ? e["index"] : json();
      std::string value = widen(b.dtype, address(b, index));
      if (b.pad.is_null()) return value;
      // A padded input: a read outside it yields the pad value.
      std::string cond = inside(b, index);
      if (cond.empty()) return value;
      double pad = b.pad.is_number() ? b.pad.get<double>() : b.pad == "inf" ? INFINITY : -INFINITY;
      return "((" + cond + ") ? " + value + " : " + (integer ? int_literal(pad) : float_literal(pad)) + ")";
    }
    static const std::map<std::string, std::string> binary = {
        {"add", " + "}, {"sub", " - "}, {"mul", " * "}, {"div", " / "}};
    static const std::map<std::string, std::string> compare = {{"lt", " < "},  {"le", " <= "}, {"gt", " > "},
                                                               {"ge", " >= "}, {"eq", " == "}, {"ne", " != "}};
    if (op == "neg") return "(-" + args(1)[0] + ")";
    if (binary.count(op)) {
      auto a = args(2);
      return "(" + a[0] + binary.at(op) + a[1] + ")";
    }
    if (compare.count(op)) {
      auto a = args(2);
      return "((" + a[0] + compare.at(op) + a[1] + ") ? " + (integer ? "1 : 0)" : "1.0f : 0.0f)");
    }
    if (op == "call") {
      std::string fn = get_string(e, "fn", where_);
      static const std::map<std::string, std::pair<std::string, size_t>> calls = {
          {"exp", {"expf", 1}},   {"log", {"logf", 1}},           {"sqrt", {"sqrtf", 1}}, {"tanh", {"tanhf", 1}},
          {"abs", {"fabsf", 1}},  {"sigmoid", {"tt_sigmoid", 1}}, {"erf", {"erff", 1}},   {"pow", {"powf", 2}},
          {"max", {"tt_max", 2}}, {"min", {"tt_min", 2}},         {"round", {"rintf", 1}}};
      // Integer forms of the builtins that compute in i32; every other builtin is f32.
      static const std::map<std::string, std::pair<std::string, size_t>> integer_calls = {
          {"abs", {"tt_abs_i", 1}}, {"max", {"tt_max_i", 2}}, {"min", {"tt_min_i", 2}}};
      if (fn == "select") {
        auto a = args(3);
        return "((" + a[0] + " != 0) ? " + a[1] + " : " + a[2] + ")";
      }
      if (integer && !integer_calls.count(fn))
        throw std::runtime_error(where_ + ": '" + fn + "' computes in f32, not in i32");
      auto it = integer ? integer_calls.find(fn) : calls.find(fn);
      if (it == calls.end()) throw std::runtime_error(where_ + ": unknown function '" + fn + "'");
      auto a = args(it->second.second);
      std::string s = it->second.first + "(";
      for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
      return s + ")";
    }
    throw std::runtime_error(where_ + ": unknown expression op '" + op + "'");
  }

  //! The expression in op-language style, for comments.
  std::string pretty(const json& e) const {
    std::string op = e.value("op", std::string("?"));
    std::vector<std::string> a;
    if (e.contains("args") && e["args"].is_array())
      for (auto& x : e["args"]) a.push_back(pretty(x));
    auto at = [&](size_t i) { return i < a.size() ? a[i] : std::string("?"); };
    if (op == "const") return e.contains("value") ? e["value"].dump() : "?";
    if (op == "load") {
      std::string s = e.value("tensor", std::string("?")) + "[";
      size_t d = 0;
      if (e.contains("index") && e["index"].is_array())
        for (auto& ix : e["index"]) {
          std::string t;
          if (ix.contains("terms") && ix["terms"].is_array())
            for (auto& term : ix["terms"]) {
              if (!term.is_array() || term.size() != 2) continue;
              int64_t c = term[1].is_number_integer() ? term[1].get<int64_t>() : 1;
              std::string v = term[0].is_string() ? term[0].get<std::string>() : "?";
              if (!t.empty())
                t += c < 0 ? " - " : " + ";
              else if (c < 0)
                t += "-";
              int64_t ac = c < 0 ? -c : c;
              t += ac == 1 ? v : std::to_string(ac) + "*" + v;
            }
          int64_t k = ix.contains("constant") && ix["constant"].is_number_integer() ? ix["constant"].get<int64_t>() : 0;
          if (t.empty())
            t = std::to_string(k);
          else if (k)
            t += (k < 0 ? " - " : " + ") + std::to_string(k < 0 ? -k : k);
          s += (d++ ? ", " : "") + t;
        }
      return s + "]";
    }
    static const std::map<std::string, std::string> infix = {{"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"},
                                                             {"lt", "<"},  {"le", "<="}, {"gt", ">"},  {"ge", ">="},
                                                             {"eq", "=="}, {"ne", "!="}};
    if (op == "neg") return "-" + at(0);
    if (infix.count(op)) return "(" + at(0) + " " + infix.at(op) + " " + at(1) + ")";
    if (op == "call") {
      std::string s = e.value("fn", std::string("?")) + "(";
      for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
      return s + ")";
    }
    return "?";
  }

  static bool reads(const json& e, const std::string& tensor) {
    if (!e.is_object()) return false;
    if (e.value("op", std::string()) == "load" && e.value("tensor", std::string()) == tensor) return true;
    if (e.contains("args") && e["args"].is_array())
      for (auto& a : e["args"])
        if (reads(a, tensor)) return true;
    return false;
  }

  // --- stages -----------------------------------------------------------------------------

  std::vector<std::string> spatial_;  // left-hand axes of the current stage, in order

  std::vector<LoopSpec> loops(const json& st, const char* key) {
    std::vector<LoopSpec> out;
    if (!st.contains(key)) return out;
    if (!st[key].is_array()) throw std::runtime_error(where_ + ": '" + key + "' must be an array");
    for (auto& jl : st[key]) {
      LoopSpec l;
      std::string w = where_ + ", a loop of '" + key + "'";
      l.axis = get_string(jl, "axis", w);
      if (!axis_names_.count(l.axis)) throw std::runtime_error(w + " runs over unknown axis '" + l.axis + "'");
      l.level = static_cast<int>(get_int(jl, "level", w));
      l.step = get_int(jl, "step", w);
      l.block = get_int(jl, "block", w);
      l.extent = get_int(jl, "extent", w);
      if (l.level < 0 || l.step < 1 || l.block < 0 || l.extent < 0)
        throw std::runtime_error(w + " over '" + l.axis + "' has a negative level, block or extent, or a step below 1");
      out.push_back(l);
    }
    return out;
  }

  static std::string outer_var(const std::string& axis, int level) { return "o" + std::to_string(level) + "_" + axis; }

  void stage(const json& st, const std::string& fallback_where) {
    where_ = fallback_where;
    if (!st.is_object()) throw std::runtime_error(where_ + " is not an object");
    std::string name = get_string(st, "name", where_);
    where_ = "stage '" + name + "'";
    const Buf& output = buffer(get_string(st, "output", where_));
    const Buf& store =
        buffer(st.contains("store") && !st["store"].is_null() ? get_string(st, "store", where_) : output.name);
    std::string combine = st.value("combine", std::string("="));
    // The type the body's value and the reduction have (program ABI 1.1; f32 before it).
    std::string accumulate = st.contains("accumulate") ? get_string(st, "accumulate", where_) : "f32";
    if (accumulate != "f32" && accumulate != "i32")
      throw std::runtime_error(where_ + ": unknown accumulate type '" + accumulate + "'");
    const bool integer = accumulate == "i32";
    static const std::map<std::string, std::pair<std::string, std::string>> identity = {
        {"=", {"0.0f", "0"}},
        {"+=", {"0.0f", "0"}},
        {"*=", {"1.0f", "1"}},
        {"max=", {"(-INFINITY)", "INT32_MIN"}},
        {"min=", {"INFINITY", "INT32_MAX"}}};
    if (!identity.count(combine)) throw std::runtime_error(where_ + ": unknown combine '" + combine + "'");

    std::vector<AxisSpec> axes;
    axis_names_.clear();
    spatial_.clear();
    if (!st.contains("axes") || !st["axes"].is_array()) throw std::runtime_error(where_ + ": 'axes' must be an array");
    for (auto& ja : st["axes"]) {
      AxisSpec a;
      a.name = get_string(ja, "name", where_ + ", an axis");
      if (!is_identifier(a.name))
        throw std::runtime_error(where_ + ": axis name '" + a.name + "' is not an identifier");
      if (!axis_names_.insert(a.name).second)
        throw std::runtime_error(where_ + ": axis '" + a.name + "' is declared twice");
      a.extent = get_int(ja, "extent", where_ + ", axis '" + a.name + "'");
      a.reduce = ja.value("reduce", false);
      if (!a.reduce) spatial_.push_back(a.name);
      axes.push_back(a);
    }
    bool reduction = false;
    std::vector<int64_t> out_shape;
    for (auto& a : axes) {
      if (a.reduce)
        reduction = true;
      else
        out_shape.push_back(a.extent);
    }
    if (output.shape != out_shape)
      throw std::runtime_error(where_ + ": output '" + output.name + "' has shape " + shape_text(output.shape) +
                               "; the left-hand axes give " + shape_text(out_shape));
    if (store.shape != out_shape)
      throw std::runtime_error(where_ + ": store '" + store.name + "' has shape " + shape_text(store.shape) +
                               "; expected " + shape_text(out_shape));
    if (!store.materialized)
      throw std::runtime_error(where_ + ": it stores into '" + store.name + "', which is not materialized");
    if (store.role == "input") throw std::runtime_error(where_ + ": it stores into input '" + store.name + "'");

    const json& body = st.contains("body") ? st["body"] : json();
    const json& epilogue = st.contains("epilogue_body") ? st["epilogue_body"] : json();
    bool has_epilogue = !epilogue.is_null();
    if (!has_epilogue && store.name != output.name)
      throw std::runtime_error(where_ + ": store '" + store.name + "' differs from output '" + output.name +
                               "' but there is no epilogue_body");
    // The store tensor doubles as the accumulator of a fused reduction: nothing may read it.
    if (has_epilogue && (reads(body, store.name) || reads(epilogue, store.name)))
      throw std::runtime_error(where_ + ": the body or epilogue reads '" + store.name +
                               "', the tensor it stores into (unsupported by scalar-c)");

    std::vector<LoopSpec> outer = loops(st, "outer");
    std::vector<LoopSpec> inner = loops(st, "reduce_inner");
    for (auto& l : loops(st, "reg")) inner.push_back(l);
    // Every axis gets exactly one innermost loop: the variable the body indexes with.
    for (auto& a : axes) {
      int n = 0;
      for (auto& l : inner) n += l.axis == a.name;
      if (n != 1)
        throw std::runtime_error(where_ + ": axis '" + a.name + "' needs exactly one loop in reduce_inner/reg, has " +
                                 std::to_string(n));
    }

    // Comment: the statement and its loops
    std::string lhs = output.name + "[";
    for (size_t i = 0; i < spatial_.size(); ++i) lhs += (i ? ", " : "") + spatial_[i];
    lhs += "]";
    line(1, "");
    line(1, "/* stage " + comment_safe(name) + ": " + comment_safe(lhs + " " + combine + " " + pretty(body)));
    if (has_epilogue)
      line(1, " * fused epilogue: " +
                  comment_safe(store.name + lhs.substr(output.name.size()) + " = " + pretty(epilogue)) + " (" +
                  comment_safe(name) + ": the stage's value at the point)");
    std::string loop_text;
    for (auto& l : outer)
      loop_text +=
          (loop_text.empty() ? "" : " ") + l.axis + "." + std::to_string(l.level) + "/" + std::to_string(l.step);
    std::string inner_text;
    for (auto& l : inner) inner_text += (inner_text.empty() ? "" : " ") + l.axis + "[" + std::to_string(l.block) + "]";
    line(1, " * tile loops (axis.level/step): " + comment_safe(loop_text.empty() ? "none" : loop_text) +
                "; micro-kernel (axis[block]): " + comment_safe(inner_text) + " */");
    line(1, "{");

    // A reduction starts from the identity of its combine, not from what the buffer held. It
    // sums in the store itself when that holds the accumulator's type, else in a buffer of
    // that type (a bf16 or u8 output of f32 or i32 sums): rounding every partial sum would be wrong.
    const bool in_place = store.dtype == accumulate;
    Buf acc = store;  // the buffer reduced into (the output, or the store under an epilogue)
    if (reduction && !in_place) {
      acc.cname = "tt_acc";
      acc.dtype = accumulate;
      line(2, compute_c_type(accumulate) + "* const tt_acc = (" + compute_c_type(accumulate) + "*)malloc(" +
                  std::to_string(std::max<int64_t>(store.elements(), 1)) + " * sizeof(" + compute_c_type(accumulate) +
                  "));");
      line(2, "if (!tt_acc) return 1;");
    }
    if (reduction) {
      line(2, "for (long tt_i = 0; tt_i < " + std::to_string(store.elements()) + "; ++tt_i) " + acc.cname +
                  "[tt_i] = " + (integer ? identity.at(combine).second : identity.at(combine).first) + ";");
    }

    // Tile loops, outermost first
    std::set<std::pair<std::string, int>> open;
    std::map<std::string, int> last_level;  // axis -> level of its innermost open tile loop
    int depth = 2;
    for (auto& l : outer) {
      std::string v = outer_var(l.axis, l.level);
      if (!open.insert({l.axis, l.level}).second)
        throw std::runtime_error(where_ + ": tile loop " + l.axis + "." + std::to_string(l.level) + " appears twice");
      std::string step = l.step == 1 ? "++" + v : v + " += " + std::to_string(l.step);
      if (l.level == 0) {
        line(depth++, "for (long " + v + " = 0; " + v + " < " + std::to_string(l.extent) + "; " + step + ") {");
      } else {
        if (!open.count({l.axis, l.level - 1}))
          throw std::runtime_error(where_ + ": tile loop " + l.axis + "." + std::to_string(l.level) +
                                   " is not inside a loop " + l.axis + "." + std::to_string(l.level - 1));
        std::string parent = outer_var(l.axis, l.level - 1);
        line(depth++, "for (long " + v + " = " + parent + "; " + v + " < tt_imin(" + parent + " + " +
                          std::to_string(l.block) + ", " + std::to_string(l.extent) + "); " + step + ") {");
      }
      auto it = last_level.find(l.axis);
      if (it == last_level.end() || it->second < l.level) last_level[l.axis] = l.level;
    }
    // Micro-kernel: unit steps over the block of the axis's last tile level (reduction loops
    // first, then the register tile)
    for (auto& l : inner) {
      std::string v = "i_" + l.axis;
      auto it = last_level.find(l.axis);
      std::string start = it == last_level.end() ? "0" : outer_var(l.axis, it->second);
      std::string end = it == last_level.end() ? std::to_string(std::min(l.block, l.extent))
                                               : "tt_imin(" + start + " + " + std::to_string(l.block) + ", " +
                                                     std::to_string(l.extent) + ")";
      line(depth++, "for (long " + v + " = " + start + "; " + v + " < " + end + "; ++" + v + ") {");
    }
    // The update of one point
    std::string target = address(store, point_index());
    std::string value = expr(body);
    // The value stored: the epilogue's of the reduced value `v` (in the accumulator's type)
    // where there is one, else `v`, rounded into the store's type.
    const std::string epilogue_type = has_epilogue && epilogue.contains("type") ? get_string(epilogue, "type", where_)
                                      : has_epilogue                            ? "f32"
                                                                                : accumulate;
    auto stored = [&](const std::string& v) {
      return narrow(store.dtype, epilogue_type, has_epilogue ? expr(epilogue, name, v) : v);
    };
    if (reduction) {
      std::string into = address(acc, point_index());
      std::string fold = combine == "+="     ? into + " += " + value
                         : combine == "*="   ? into + " *= " + value
                         : combine == "max=" ? into + " = tt_max" + (integer ? "_i(" : "(") + into + ", " + value + ")"
                         : combine == "min=" ? into + " = tt_min" + (integer ? "_i(" : "(") + into + ", " + value + ")"
                                             : into + " = " + value;
      line(depth, fold + ";");
    } else {
      // No reduction: the value is stored (through the epilogue) right away.
      line(depth, "const " + compute_c_type(accumulate) + " tt_v = " + value + ";");
      line(depth, target + " = " + stored("tt_v") + ";");
    }
    while (depth > 2) line(--depth, "}");

    if (reduction && (has_epilogue || !in_place)) {
      // The reduction is complete everywhere: one pass stores the final values.
      line(2, "/* once every point is reduced: " + std::string(has_epilogue ? "the epilogue, " : "") + "the store */");
      for (size_t d = 0; d < spatial_.size(); ++d) {
        std::string v = "i_" + spatial_[d];
        line(depth++, "for (long " + v + " = 0; " + v + " < " + std::to_string(out_shape[d]) + "; ++" + v + ") {");
      }
      line(depth, "const " + compute_c_type(accumulate) + " tt_v = " + address(acc, point_index()) + ";");
      line(depth, target + " = " + stored("tt_v") + ";");
      while (depth > 2) line(--depth, "}");
    }
    if (reduction && !in_place) line(2, "free(tt_acc);");
    line(1, "}");
  }

  //! The index of the point being stored: the left-hand axes in order.
  json point_index() const {
    json index = json::array();
    for (auto& a : spatial_) index.push_back({{"terms", json::array({json::array({a, 1})})}, {"constant", 0}});
    return index;
  }
};

char* copy_text(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// ---------------------------------------------------------------------------------------------
// The C entry points

void* sc_create(const char* options_json, char* err, size_t err_size) {
  try {
    return create_instance(options_json);
  } catch (const std::exception& e) {
    set_error(err, err_size, std::string("scalar-c: ") + e.what());
  } catch (...) {
    set_error(err, err_size, "scalar-c: unknown error in create");
  }
  return nullptr;
}

void sc_destroy(void* backend) { delete static_cast<Instance*>(backend); }

int sc_describe(void* backend, tt_target* out, char* err, size_t err_size) {
  if (!backend || !out) {
    set_error(err, err_size, "scalar-c: describe needs a backend and a target to fill");
    return 1;
  }
  try {
    Instance& inst = *static_cast<Instance*>(backend);
    describe_instance(inst);
    *out = inst.target;
    return 0;
  } catch (const std::exception& e) {
    set_error(err, err_size, std::string("scalar-c: ") + e.what());
  } catch (...) {
    set_error(err, err_size, "scalar-c: unknown error in describe");
  }
  return 1;
}

char* sc_emit(void* backend, const char* program_json, char* err, size_t err_size) {
  try {
    if (!backend || !program_json) throw std::runtime_error("emit needs a backend and a program");
    json program = json::parse(program_json);
    return copy_text(Emitter(program).run());
  } catch (const std::exception& e) {
    set_error(err, err_size, std::string("scalar-c: ") + e.what());
  } catch (...) {
    set_error(err, err_size, "scalar-c: unknown error in emit");
  }
  return nullptr;
}

void sc_free_text(char* text) { std::free(text); }

int sc_build(void* backend, const char* source_path, const char* artifact_path, char* log, size_t log_size) {
  try {
    if (!backend || !source_path || !artifact_path)
      throw std::runtime_error("build needs a backend, a source and an artifact path");
    const Instance& inst = *static_cast<Instance*>(backend);
    std::vector<std::string> args = {inst.compiler};
    for (auto& f : kFlags) args.push_back(f);
    args.insert(args.end(), {"-o", artifact_path, source_path, "-lm"});
    size_t keep = log_size > 0 ? log_size - 1 : 0;
    CommandResult r = run_command(args, keep);
    std::string text = r.output;
    bool ok = r.exit_code == 0 && r.signal == 0;
    if (!ok) {
      std::string cmd;
      for (auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
      std::string why =
          r.signal ? "killed by signal " + std::to_string(r.signal) : "exit status " + std::to_string(r.exit_code);
      // The compiler's own message first: it is what a reader needs; the command line after.
      text = (text.empty() ? "" : text + (text.back() == '\n' ? "" : "\n")) + "scalar-c: `" + cmd + "` failed (" + why +
             ")";
    }
    if (log && log_size > 0) std::snprintf(log, log_size, "%s", text.c_str());
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    set_error(log, log_size, std::string("scalar-c: ") + e.what());
  } catch (...) {
    set_error(log, log_size, "scalar-c: unknown error in build");
  }
  return 1;
}

void* sc_load(void* backend, const char* artifact_path, const int64_t* tensor_floats, int32_t tensor_count,
              int64_t workspace_floats, char* err, size_t err_size) {
  try {
    if (!backend || !artifact_path) throw std::runtime_error("load needs a backend and an artifact path");
    if (tensor_count < 0 || (tensor_count > 0 && !tensor_floats)) throw std::runtime_error("load: bad tensor list");
    auto k = std::make_unique<LoadedKernel>();
    k->tensor_floats.assign(tensor_floats, tensor_floats + tensor_count);
    k->workspace_floats = workspace_floats;
    dlerror();
    k->handle = dlopen(artifact_path, RTLD_NOW | RTLD_LOCAL);
    if (!k->handle) {
      const char* m = dlerror();
      throw std::runtime_error(std::string("cannot load ") + artifact_path + ": " + (m ? m : "dlopen failed"));
    }
    dlerror();
    void* sym = dlsym(k->handle, "tt_kernel");
    const char* m = dlerror();
    if (!sym || m) {
      std::string msg = std::string(artifact_path) + " has no tt_kernel: " + (m ? m : "symbol is NULL");
      dlclose(k->handle);
      throw std::runtime_error(msg);
    }
    k->fn = reinterpret_cast<int (*)(float* const*, float*)>(sym);
    return k.release();
  } catch (const std::exception& e) {
    set_error(err, err_size, std::string("scalar-c: ") + e.what());
  } catch (...) {
    set_error(err, err_size, "scalar-c: unknown error in load");
  }
  return nullptr;
}

int sc_run(void* kernel, float* const* tensors, float* workspace, uint32_t /*flags: host memory*/, double* seconds,
           char* err, size_t err_size) {
  auto* k = static_cast<LoadedKernel*>(kernel);
  if (!k || !k->fn) {
    set_error(err, err_size, "scalar-c: run on a kernel that is not loaded");
    return 1;
  }
  if (!k->tensor_floats.empty() && !tensors) {
    set_error(err, err_size, "scalar-c: run without tensors");
    return 1;
  }
  for (size_t i = 0; i < k->tensor_floats.size(); ++i)
    if (!tensors[i] && k->tensor_floats[i] > 0) {
      if (err && err_size > 0) std::snprintf(err, err_size, "scalar-c: tensor %zu is NULL", i);
      return 1;
    }
  if (k->workspace_floats > 0 && !workspace) {
    if (err && err_size > 0)
      std::snprintf(err, err_size, "scalar-c: the kernel needs a workspace of %lld floats and got NULL",
                    static_cast<long long>(k->workspace_floats));
    return 1;
  }
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int status = k->fn(tensors, workspace);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (status != 0) {
    set_error(err, err_size, "scalar-c: the kernel ran out of memory for its accumulators");
    return 1;
  }
  if (seconds)
    *seconds = static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  return 0;
}

void sc_unload(void* kernel) {
  auto* k = static_cast<LoadedKernel*>(kernel);
  if (!k) return;
  if (k->handle) dlclose(k->handle);
  delete k;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int tt_plugin_init(uint32_t host_abi_version, tt_plugin* out,
                                                                     char* err, size_t err_size) {
  if (host_abi_version != TT_PLUGIN_ABI_VERSION) {
    // snprintf directly: nothing here may throw (no std::string on this path).
    if (err && err_size > 0)
      std::snprintf(err, err_size,
                    "scalar-c was built for tiletune plug-in ABI %u; the host speaks ABI %u (rebuild the plug-in "
                    "against the host's tiletune/backend_plugin.h)",
                    static_cast<unsigned>(TT_PLUGIN_ABI_VERSION), static_cast<unsigned>(host_abi_version));
    return 1;
  }
  if (!out) {
    if (err && err_size > 0) std::snprintf(err, err_size, "%s", "scalar-c: tt_plugin_init got no table to fill");
    return 1;
  }
  std::memset(out, 0, sizeof *out);
  out->abi_version = TT_PLUGIN_ABI_VERSION;
  out->struct_size = static_cast<uint32_t>(sizeof(tt_plugin));
  out->name = kName;
  out->description = kDescription;
  out->source_extension = kSourceExtension;
  out->create = sc_create;
  out->destroy = sc_destroy;
  out->describe = sc_describe;
  out->emit = sc_emit;
  out->free_text = sc_free_text;
  out->build = sc_build;
  out->load = sc_load;
  out->run = sc_run;
  out->unload = sc_unload;
  out->abi_minor = 1;  // reads program ABI 1.1: padded inputs and element types
  return 0;
}
