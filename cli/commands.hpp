// cli/commands.hpp
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.hpp"
#include "tuner/tune.hpp"

namespace tiletune::server {
struct ServiceOptions;
}

namespace tiletune::cli {

//! Options shared by the subcommands that touch an op, a backend and a database.
struct CommonOptions {
  std::string op;       //!< library name or path of a .tile file
  std::string op_name;  //!< which op of a file holding several
  std::string sizes;    //!< "M=512,N=512,K=512"
  std::string db = "tiletune.db";
  std::string backend = codegen::kDefaultBackend;
  codegen::BackendOptions backend_options;  //!< threads and device of the backend
  std::string cache_dir;
  std::vector<std::string> plugins;  //!< backend plug-ins to load first
};

//! The backend the options name, on the device they name.
std::unique_ptr<codegen::Backend> backend_for(const CommonOptions& c);

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";
  std::string token;       //!< bearer token for tuning and writing routes
  std::string token_file;  //!< or read from this file (first line)
  bool open_reads = false;
  std::size_t max_body_mb = 0;  //!< 0: HttpOptions' default
};
struct WorkerOptions {
  std::string server;  //!< the daemon's URL
  std::string token;
  std::string name;     //!< shown in the daemon's log; default: the host name
  double poll_s = 1;    //!< wait between leases when there is no work
  int max_batches = 0;  //!< stop after this many batches; 0: until SIGTERM
};

// Each subcommand is a thin call into the modules; each returns an exit code and lets
// tiletune::Error escape to main, which converts it.
int run_tune(const CommonOptions& c, const tuner::TuneOptions& t);
int run_suite(const CommonOptions& c, const tuner::TuneOptions& t, const std::string& suite, bool trials_given);
int run_best(const CommonOptions& c, int top, bool json);
//! The source (or with `json` the source and abi, as /v1/best answers) of the best kernel, a
//! given config's or the naive schedule's.
int run_show(const CommonOptions& c, const std::string& config_json, bool naive, bool json);
//! Writes the best kernels of a suite's cases for `c`'s backend into `out` (README, "Kernels in
//! your compiler"): sources, a C header, manifest.json, and with `static_lib` libtiletune_kernels.a.
int run_export(const CommonOptions& c, const std::string& suite, const std::string& out, bool static_lib);
int run_ops();
//! Writes the dashboard's pages for the database `c.db` as one self-contained HTML file.
int run_report(const CommonOptions& c, const std::string& out);
//! Measures given configs (JSON, one per argument), stores the records and prints them.
int run_measure(const CommonOptions& c, const tuner::TuneOptions& t, const std::vector<std::string>& configs);

//! Maps an ONNX model to tuning tasks (models/), prints them with the nodes left out and why,
//! and with `out` writes them as a suite. `input_shapes` are NAME=D1,D2,... texts.
int run_import(const std::string& model, const std::vector<std::string>& input_shapes, const std::string& out,
               int trials);

struct ModelTuneOptions {
  std::string model;  //!< an .onnx file, or a suite (an import's, with weights)
  std::vector<std::string> input_shapes;
  int trials = 0;
  int round = 8;
  std::string scheduler = "gradient";
  bool json = false;
  bool compare_vendor = false;  //!< time oneDNN's layer for each task in the assessment
};
//! Tunes a model's tasks under one budget (tuner/task_scheduler.hpp), printing each round, then
//! its assessment: per task its weight, FLOPs, bytes, best latency and share of the model.
int run_tune_model(const CommonOptions& c, const tuner::TuneOptions& t, const ModelTuneOptions& m);

struct CorpusOptions {
  std::string recipe = "cpu";  //!< a library recipe (ops/corpus/) or a JSON file
  bool list = false;           //!< print the workloads and measure nothing
  int limit = 0;               //!< only the first N workloads; 0: all
};
//! Collects the records of a corpus recipe (tuner/corpus.hpp), resuming from the database.
int run_corpus(const CommonOptions& c, const tuner::TuneOptions& t, const CorpusOptions& o);

//! What `tiletune model eval` evaluates and prints; kinds, seed, target_key and from_shipped are
//! `model train`'s too.
struct ModelEvalOptions {
  std::vector<std::string> kinds;
  std::uint64_t seed = 1;
  std::string target_key;                //!< another target's records (as run_model_train picks it)
  //! Models start from those shipped for the target's machine kind, fine-tuned on the records,
  //! instead of from nothing (tuner::EvalOptions::bases). `model train` does unless --fresh.
  bool from_shipped = false;
  bool shipped = false;                  //!< rank with the models shipped for the target's machine kind
  std::vector<std::string> model_files;  //!< rank with saved models (`model train --out`)
  std::vector<int> transfer;             //!< record counts of the transfer test (tuner::evaluate_models)
  std::vector<double> op_shares;         //!< the learning curve over ops (tuner::evaluate_models)
  bool json = false;
  bool by_op = false;
};
//! Prints held-out ranking metrics of the given kinds and of a random ranker on a target's
//! records; with `shipped`, how the models shipped for the target's machine kind rank them,
//! untrained on them; with `model_files`, how each of those ranks them: a model from one corpus
//! judged on another. With `transfer`, also how each serves an op once a few of its records are
//! measured, fine-tuned or not, against a cold start; with `op_shares`, how each ranks held-out
//! ops when trained on fewer of the others.
int run_model_eval(const CommonOptions& c, const ModelEvalOptions& o);
//! Trains cost models of `o.kinds` on every record of a target and stores them: the backend's
//! target, or `o.target_key`, one the database holds. With `o.from_shipped`, each starts from the
//! model shipped for the target's machine kind where there is one it can read (else from
//! nothing, with a note): a target's few records then refine what the corpus taught instead of
//! replacing it. With `out`, the (single) model's blob is also written to that file: how the
//! shipped models (costmodel/pretrained/) are made from a corpus, from nothing.
int run_model_train(const CommonOptions& c, const ModelEvalOptions& o, const std::string& out);

//! Prints what a database holds and its integrity check; Error(Database) when it fails.
int run_db_check(const std::string& where);
//! Merges the records of `from` (one target's when `target_key` is given) into `to`, with the
//! workloads and targets they name; checked as a whole, then written in one transaction.
int run_db_copy(const std::string& from, const std::string& to, const std::string& target_key);

//! The daemon (cli/serve.cpp): returns when SIGTERM or SIGINT has stopped it cleanly.
//! `service` holds the daemon's own options (lease times); its job defaults and backend come
//! from `c` and `t`.
int run_serve(const CommonOptions& c, const tuner::TuneOptions& t, const ServeOptions& s,
              server::ServiceOptions service);

//! The first line of a token file, trimmed; Error if unreadable or empty.
std::string read_token(const std::string& path);

//! A remote measuring worker (cli/worker.cpp).
int run_worker(const CommonOptions& c, const WorkerOptions& o);

}  // namespace tiletune::cli
