// `tiletune export`: a suite's best kernels as files a compiler's build takes in (README,
// "Kernels in your compiler").

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "cli/inputs.hpp"
#include "db/store.hpp"
#include "ir/loop_nest.hpp"
#include "ir/schedule.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "support/subprocess.hpp"
#include "tuner/lookup.hpp"

namespace tiletune::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kHeader = "tiletune_kernels.h";
constexpr const char* kLibrary = "libtiletune_kernels.a";
constexpr const char* kManifest = "manifest.json";
constexpr int kManifestVersion = 1;

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

struct Exported {
  ir::Workload workload;
  std::vector<json> cases;  //!< the suite's cases this kernel answers
  tuner::BestLookup found;
  tuner::RecordKernel kernel;
  std::string source_file;  //!< relative to the output folder
};

//! The C declarations of every kernel, each with its tensors and workspace in a comment.
std::string header_text(const std::vector<Exported>& kernels, const std::string& target_key) {
  std::ostringstream h;
  h << "/* " << kHeader << ": written by `tiletune export`, " << kernels.size() << " kernels measured on target "
    << target_key << ".\n"
    << " * Call convention (README, \"Kernel ABI\"): `tensors` holds the listed tensors in order, row-major\n"
    << " * and dense, each in its element type (a bf16 tensor's pointer cast to float*); `workspace` holds\n"
    << " * at least *_WORKSPACE_BYTES bytes (may be NULL when that is 0), one buffer per concurrent call.\n"
    << " * ENTRY runs with the thread count it was measured with,\n"
    << " * ENTRY_threads with the caller's (0: the measured one). Link with OpenMP (-fopenmp). */\n"
    << "#ifndef TILETUNE_KERNELS_H\n#define TILETUNE_KERNELS_H\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n";
  for (auto& k : kernels) {
    const json& abi = k.kernel.abi;
    const std::string entry = abi["entry_point"];
    h << "\n/* " << k.workload.op.name << " with " << k.workload.sizes_text() << " (workload " << k.workload.key
      << "), " << abi["threads"].get<int>() << " threads\n";
    for (auto& a : abi["arguments"]) {
      std::string shape;
      for (auto& d : a["shape"]) shape += (shape.empty() ? "" : ", ") + std::to_string(d.get<std::int64_t>());
      h << " *   tensors[" << a["index"].get<int>() << "]: " << a["name"].get<std::string>() << " "
        << a.value("dtype", "f32") << "[" << shape << "], " << a["role"].get<std::string>() << "\n";
    }
    h << " */\n#define " << upper(entry) << "_WORKSPACE_BYTES " << abi["workspace_bytes"].get<std::int64_t>() << "LL\n"
      << "void " << entry << "(float* const* tensors, float* workspace);\n"
      << "void " << abi["threads_entry_point"].get<std::string>()
      << "(float* const* tensors, float* workspace, int threads);\n";
    if (abi.contains("prepare_entry_point"))
      h << "/* packs the const inputs into the workspace: call first, and again whenever they change */\n"
        << "void " << abi["prepare_entry_point"].get<std::string>()
        << "(float* const* tensors, float* workspace, int threads);\n";
  }
  h << "\n#ifdef __cplusplus\n}\n#endif\n#endif\n";
  return h.str();
}

//! Compiles the sources with the flags their target measured them with, into one archive.
void build_library(const fs::path& out, const std::vector<Exported>& kernels, const std::string& compiler) {
  std::vector<std::string> objects;
  for (auto& k : kernels) {
    std::vector<std::string> argv{compiler};
    for (auto& f : split_words(k.kernel.abi.value("compile_flags", "")))
      if (f != "-shared") argv.push_back(f);
    std::string object = (out / k.source_file).replace_extension(".o").string();
    argv.insert(argv.end(), {"-c", (out / k.source_file).string(), "-o", object});
    ProcessResult r = run_process(argv, 600);
    if (!r.ok()) throw_error(ErrorKind::Io, "cannot compile " + k.source_file + ": " + r.describe() + "\n" + r.output);
    objects.push_back(object);
  }
  fs::path lib = out / kLibrary, tmp = out / (std::string(kLibrary) + ".tmp." + unique_suffix());
  std::vector<std::string> ar{"ar", "rcs", tmp.string()};
  ar.insert(ar.end(), objects.begin(), objects.end());
  ProcessResult r = run_process(ar, 600);
  for (auto& o : objects) fs::remove(o);
  if (!r.ok()) throw_error(ErrorKind::Io, "cannot archive the kernels: " + r.describe() + "\n" + r.output);
  fs::rename(tmp, lib);
}

}  // namespace

int run_export(const CommonOptions& c, const std::string& suite_name, const std::string& out, bool static_lib) {
  Suite suite = load_suite(suite_name);
  if (suite.workloads.empty()) throw_error(ErrorKind::InvalidInput, "suite " + suite_name + " has no cases");
  auto backend = backend_for(c);
  auto store = db::open_store(c.db, /*create=*/false);
  const ir::Workload& first = suite.workloads.front();
  const ir::Schedule naive = ir::naive_schedule(first);
  const bool has_c_abi = !backend->call_abi(first, ir::lower(first, naive, backend->target().traits), naive.to_json())
                              .threads_entry_point.empty();
  if (static_lib && !has_c_abi)
    throw_error(ErrorKind::InvalidInput, "--static-lib needs C kernels; " + backend->name() +
                                             " kernels are exported as sources with their launches in the manifest");

  // Everything is looked up before anything is written: a suite with an unmeasured case exports nothing.
  std::vector<Exported> kernels;
  std::map<std::string, std::size_t> by_workload;
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < suite.workloads.size(); ++i) {
    const ir::Workload& w = suite.workloads[i];
    auto at = by_workload.find(w.key);
    if (at != by_workload.end()) {
      kernels[at->second].cases.push_back(suite.cases[i]);
      continue;
    }
    auto found = tuner::find_best(*store, w.key, backend->target());
    if (!found) {
      missing.push_back(w.op.name + " " + w.sizes_text());
      continue;
    }
    Exported e{w, {suite.cases[i]}, *found, tuner::record_kernel(*store, *backend, w, found->record), ""};
    e.source_file = "kernels/" + e.kernel.abi["entry_point"].get<std::string>() + backend->source_extension();
    by_workload[w.key] = kernels.size();
    kernels.push_back(std::move(e));
  }
  if (!missing.empty()) {
    std::string list;
    for (auto& m : missing) list += "\n  " + m;
    throw_error(ErrorKind::NotFound, std::to_string(missing.size()) + " of " + std::to_string(suite.workloads.size()) +
                                         " cases have no measured kernel in " + c.db + " for target " +
                                         backend->target().key + " (tune them first: `tiletune suite " + suite_name +
                                         " --db " + c.db + "`):" + list);
  }

  const fs::path dir(out);
  std::error_code ec;
  fs::create_directories(dir / "kernels", ec);
  if (ec) throw_error(ErrorKind::Io, "cannot create " + (dir / "kernels").string() + ": " + ec.message());
  json manifest = {{"tiletune_export", kManifestVersion},
                   {"suite", suite.json.value("name", suite_name)},
                   {"backend", backend->name()},
                   {"target_key", backend->target().key},
                   {"target_fingerprint", json::parse(backend->target().fingerprint_json)},
                   {"kernels", json::array()}};
  for (auto& k : kernels) {
    write_file_atomically((dir / k.source_file).string(), k.kernel.source);
    json entry = tuner::kernel_json(k.found, k.workload, k.kernel, *backend);
    entry.erase("source");
    entry["source_file"] = k.source_file;
    entry["op"] = k.workload.op.name;
    entry["sizes"] = k.workload.sizes_text();
    entry["cases"] = k.cases;  // with whatever a case names (ONNX nodes, once models import)
    manifest["kernels"].push_back(entry);
  }
  if (has_c_abi) {
    write_file_atomically((dir / kHeader).string(), header_text(kernels, backend->target().key));
    manifest["header"] = kHeader;
    manifest["link_flags"] = "-fopenmp";
  }
  if (static_lib) {
    build_library(dir, kernels, c.backend_options.compiler.empty() ? "g++" : c.backend_options.compiler);
    manifest["library"] = kLibrary;
  }
  write_file_atomically((dir / kManifest).string(),
                        manifest.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  std::cout << "exported " << kernels.size() << " kernels of suite " << suite_name << " to " << out << " (" << kManifest
            << (has_c_abi ? std::string(", ") + kHeader : "") << (static_lib ? std::string(", ") + kLibrary : "")
            << ")\n";
  return kOk;
}

}  // namespace tiletune::cli
