// The tiletune command. Subcommands parse their options here and call cli/commands.cpp.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/exit_codes.hpp"
#include "codegen/backend.hpp"
#include "costmodel/model.hpp"
#include "server/http.hpp"
#include "server/service.hpp"
#include "tuner/search.hpp"

using namespace tiletune;

namespace {

void add_common(CLI::App* cmd, cli::CommonOptions& c, bool with_op) {
  if (with_op) {
    cmd->add_option("op", c.op, "library op name (see `tiletune ops`) or path of a .tile file")->required();
    cmd->add_option("--op-name", c.op_name, "the op to use when the file holds several");
    cmd->add_option("--sizes,-s", c.sizes, "sizes of the op, like M=512,N=512,K=512")->required();
  }
  cmd->add_option("--db", c.db,
                  "database of measurements: an SQLite file, or postgresql://user@host:port/dbname (password from "
                  "PGPASSWORD, ~/.pgpass or ?passfile=FILE)")
      ->capture_default_str();
  cmd->add_option("--backend", c.backend, "backend to generate code for")->capture_default_str();
  cmd->add_option("--threads", c.backend_options.threads, "threads of generated kernels (0: all cores)")
      ->capture_default_str();
  cmd->add_option("--cache", c.cache_dir, "folder for built kernels (default: ~/.cache/tiletune)");
  cmd->add_option("--device", c.backend_options.device,
                  "which device of the backend: an OpenCL device name part, a CUDA device index, or a CUDA arch "
                  "like sm_80 to build without a GPU");
  cmd->add_option("--backend-plugin", c.plugins,
                  "load a backend plug-in (.so, include/tiletune/backend_plugin.h); repeatable");
}

//! How candidates are measured: shared by the tuning commands and the daemon.
void add_measuring(CLI::App* cmd, tuner::TuneOptions& t) {
  cmd->add_option("--batch", t.batch_size, "candidates built and measured per round")
      ->check(CLI::Range(1, tuner::kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--timeout", t.measure.timeout_s, "seconds one candidate may run before it counts as hung")
      ->check(CLI::Range(0.1, measure::kMaxTimeoutS))
      ->capture_default_str();
  cmd->add_option("--min-time", t.measure.min_seconds, "seconds of repeats timed per candidate")
      ->check(CLI::Range(0.0, 60.0))
      ->capture_default_str();
  cmd->add_option("--max-memory-share", t.max_memory_share,
                  "the most of this machine's memory an op's tensors may take (larger ops are refused)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
}

//! The side-by-side round after tuning: for the commands that tune (not `measure`, not `corpus`).
void add_finalists(CLI::App* cmd, tuner::TuneOptions& t) {
  cmd->add_option("--finalists", t.finalists,
                  "after tuning an op, the fastest this many records are timed again side by side and keep those "
                  "times (0: off)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
}

void add_tune(CLI::App* cmd, tuner::TuneOptions& t) {
  cmd->add_option("--trials,-n", t.trials, "measurements wanted per op, counting those in the database")
      ->check(CLI::Range(1, tuner::kMaxTrials))
      ->capture_default_str();
  cmd->add_option("--strategy", t.strategy, "search strategy: random, evolutionary, or guided by a cost model of that kind")
      ->check(CLI::IsMember(tuner::search_names()))
      ->capture_default_str();
  cmd->add_option("--seed", t.seed, "random seed of the search")->capture_default_str();
  add_measuring(cmd, t);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tiletune: tunes tensor kernels written in the tile-op language, on this machine's hardware."};
  app.footer(cli::exit_code_help());
  app.require_subcommand(1);
  cli::CommonOptions common;
  tuner::TuneOptions tune;

  auto* tune_cmd = app.add_subcommand("tune", "tune one op at given sizes and store every measurement");
  add_common(tune_cmd, common, true);
  add_tune(tune_cmd, tune);
  add_finalists(tune_cmd, tune);

  std::string suite = "default";
  auto* suite_cmd =
      app.add_subcommand("suite", "tune every case of a suite (library name or JSON file) and print a table");
  suite_cmd->add_option("suite", suite, "suite name (see `tiletune ops`) or path of a suite JSON file")
      ->capture_default_str();
  add_common(suite_cmd, common, false);
  add_tune(suite_cmd, tune);
  add_finalists(suite_cmd, tune);

  int top = 1;
  bool json = false;
  auto* best_cmd = app.add_subcommand("best", "print the best measured kernels of an op at given sizes");
  add_common(best_cmd, common, true);
  best_cmd->add_option("--top,-k", top, "how many to list")->check(CLI::Range(1, 1000))->capture_default_str();
  best_cmd->add_flag("--json", json, "print the records as JSON lines");

  std::string config;
  bool naive = false;
  auto* show_cmd = app.add_subcommand("show", "print the generated source of the best kernel (or of a given config)");
  add_common(show_cmd, common, true);
  show_cmd->add_option("--config", config, "a config as JSON instead of the best one");
  show_cmd->add_flag("--naive", naive, "the naive reference schedule instead of the best one");
  show_cmd->add_flag("--json", json, "print the source with its abi (how to call it) and record as JSON");

  std::string export_out;
  bool static_lib = false;
  auto* export_cmd = app.add_subcommand(
      "export",
      "write the best kernels of a suite as C sources, a header and a manifest (README: Kernels in your compiler)");
  export_cmd->add_option("suite", suite, "suite name (see `tiletune ops`) or path of a suite JSON file")->required();
  add_common(export_cmd, common, false);
  export_cmd->add_option("--out,-o", export_out, "folder to write (created; files of the same names are replaced)")
      ->required();
  export_cmd->add_flag("--static-lib", static_lib,
                       "also compile them into OUT/libtiletune_kernels.a with the flags they were measured with");

  std::string model_path, import_out;
  std::vector<std::string> input_shapes;
  int import_trials = 64;
  auto* import_cmd =
      app.add_subcommand("import", "turn an ONNX model into a suite of tuning tasks (README: Models from ONNX)");
  import_cmd->add_option("model", model_path, "ONNX model file")->required();
  import_cmd->add_option("--input", input_shapes,
                         "an input's dimensions, NAME=1,3,224,224 (repeatable; every dynamic dimension needs one)");
  import_cmd->add_option("--out,-o", import_out, "write the tasks as a suite JSON file");
  import_cmd->add_option("--trials", import_trials, "the suite's trials per task")
      ->check(CLI::Range(1, tuner::kMaxTrials))
      ->capture_default_str();

  cli::ModelTuneOptions model_tune;
  auto* tune_model_cmd = app.add_subcommand(
      "tune-model", "tune a model's tasks (ONNX, or an imported suite) under one trial budget and assess them");
  tune_model_cmd->add_option("model", model_tune.model, "ONNX model file, or a suite JSON with weights")->required();
  tune_model_cmd->add_option("--input", model_tune.input_shapes,
                             "an input's dimensions, NAME=1,3,224,224 (repeatable)");
  add_common(tune_model_cmd, common, false);
  add_measuring(tune_model_cmd, tune);
  add_finalists(tune_model_cmd, tune);
  tune_model_cmd->add_option("--trials,-n", model_tune.trials, "trials over all tasks, counting those in the database")
      ->check(CLI::Range(1, tuner::kMaxTrials))
      ->required();
  tune_model_cmd->add_option("--round", model_tune.round, "trials a task gets each time the scheduler picks it")
      ->check(CLI::Range(1, tuner::kMaxBatch))
      ->capture_default_str();
  tune_model_cmd->add_option("--scheduler", model_tune.scheduler, "gradient (Ansor's rule) or round-robin")
      ->check(CLI::IsMember({"gradient", "round-robin"}))
      ->capture_default_str();
  tune_model_cmd->add_option("--strategy", tune.strategy, "search strategy within a task")
      ->check(CLI::IsMember(tuner::search_names()))
      ->capture_default_str();
  tune_model_cmd->add_flag("--json", model_tune.json, "print the assessment as JSON");
  tune_model_cmd->add_flag("--compare-vendor", model_tune.compare_vendor,
                           "time oneDNN's layer (its layouts, its fused post-ops) for each task in the assessment");

  std::vector<std::string> configs;
  auto* measure_cmd = app.add_subcommand("measure", "measure given configs of an op and store the records");
  add_common(measure_cmd, common, true);
  add_tune(measure_cmd, tune);
  measure_cmd->add_option("--config", configs, "a config as JSON (repeatable)")->required();

  app.add_subcommand("ops", "list the library's ops and suites");

  cli::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand("serve", "run the tuning daemon (REST API, schemas/openapi.yaml) until SIGTERM");
  add_common(serve_cmd, common, false);
  serve_cmd->add_option("--listen", serve.listen, "HOST:PORT to listen on (port 0: any free port)")
      ->capture_default_str();
  serve_cmd->add_option("--token", serve.token, "bearer token that tuning and writing requests must carry");
  serve_cmd->add_option("--token-file", serve.token_file, "read the token from this file instead");
  serve_cmd->add_flag("--open-reads", serve.open_reads, "let GET routes through without a token");
  serve.max_body_mb = server::HttpOptions().max_body_bytes >> 20;
  serve_cmd->add_option("--max-body-mb", serve.max_body_mb, "largest request body, MiB")->capture_default_str();
  server::ServiceOptions service;
  serve_cmd
      ->add_option("--lease-seconds", service.lease_seconds,
                   "a remote worker's batch goes to another worker after this")
      ->check(CLI::Range(0.5, 86400.0))
      ->capture_default_str();
  serve_cmd
      ->add_option("--job-lease", service.job_lease_seconds,
                   "a running job's claim lasts this long (renewed while it runs); a dead daemon's jobs go to "
                   "another daemon on the database when it runs out")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  serve_cmd
      ->add_option("--slice-seconds", service.slice_seconds,
                   "jobs take turns: one runs at most this long before the next queued job's turn")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  add_measuring(serve_cmd, tune);
  add_finalists(serve_cmd, tune);

  cli::WorkerOptions worker;
  std::string worker_token_file;
  auto* worker_cmd = app.add_subcommand("worker", "measure candidates for a daemon on this machine (until SIGTERM)");
  add_common(worker_cmd, common, false);
  worker_cmd->add_option("--server", worker.server, "URL of the daemon, like http://host:8080")->required();
  worker_cmd->add_option("--token", worker.token, "bearer token of the daemon");
  worker_cmd->add_option("--token-file", worker_token_file, "read the token from this file instead");
  worker_cmd->add_option("--name", worker.name, "name in the daemon's log (default: host name)");
  worker_cmd->add_option("--poll", worker.poll_s, "seconds between leases when there is no work")
      ->capture_default_str();
  worker_cmd->add_option("--max-batches", worker.max_batches, "stop after this many batches (0: never)")
      ->capture_default_str();

  cli::CorpusOptions corpus;
  auto* corpus_cmd = app.add_subcommand(
      "corpus", "collect the cost models' training records from a recipe, unattended; a rerun resumes");
  corpus_cmd->add_option("recipe", corpus.recipe, "recipe name (ops/corpus/) or path of a recipe JSON file")
      ->capture_default_str();
  add_common(corpus_cmd, common, false);
  add_measuring(corpus_cmd, tune);
  corpus_cmd->add_flag("--list", corpus.list, "print the recipe's workloads and measure nothing");
  corpus_cmd->add_option("--limit", corpus.limit, "only the first N workloads (0: all)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();

  cli::ModelEvalOptions model;  // --kind, --seed and --target are train's too
  model.kinds = costmodel::default_model_kinds();
  auto* model_cmd = app.add_subcommand("model", "train and evaluate the cost models on the database's records");
  model_cmd->require_subcommand(1);
  auto* train_cmd =
      model_cmd->add_subcommand("train", "train models on every record of this target and store them in the database");
  auto* eval_cmd = model_cmd->add_subcommand(
      "eval", "print held-out ranking metrics (unseen sizes, unseen ops) against a random ranker");
  for (auto* cmd : {train_cmd, eval_cmd}) {
    add_common(cmd, common, false);
    cmd->add_option("--kind", model.kinds, "cost model kinds (xgb-pairs: xgb, its first picks ordered again by a comparator)")
        ->check(CLI::IsMember(costmodel::model_kinds()))
        ->capture_default_str();
    cmd->add_option("--seed", model.seed, "seed of training")->capture_default_str();
    cmd->add_option("--target", model.target_key,
                    "the records of this target key in the database (another machine's, or this one's under an "
                    "earlier code generator) instead of this machine's");
  }
  eval_cmd->add_flag("--json", model.json, "print the metrics as JSON lines");
  eval_cmd->add_flag("--shipped", model.shipped,
                     "rank the records with the models shipped for this machine kind, untrained on them");
  eval_cmd
      ->add_option("--model", model.model_files,
                   "rank the records with this saved model (model train --out), untrained on them; repeatable")
      ->check(CLI::ExistingFile)
      ->excludes("--shipped");
  eval_cmd
      ->add_flag("--from-shipped", model.from_shipped,
                 "each fold's model starts from the one shipped for this machine kind, fine-tuned on the fold's "
                 "records, as model train makes them (without it, from nothing: what these records teach alone)")
      ->excludes("--shipped")
      ->excludes("--model");
  eval_cmd->add_flag("--by-op", model.by_op, "also print the metrics per op, worst ranked first");
  eval_cmd
      ->add_option("--transfer", model.transfer,
                   "also rank each held-out op's records once K of them are measured: by the model as it is, "
                   "fine-tuned on the K, and trained on the K alone (cold); repeatable")
      ->check(CLI::Range(1, 1000000));
  eval_cmd
      ->add_option("--op-share", model.op_shares,
                   "also rank the held-out ops with models trained on this share of the other ops (above 0, "
                   "below 1; three draws, each three more models a fold): the learning curve over ops, whether "
                   "more ops in the corpus would help; repeatable")
      ->excludes("--shipped")
      ->excludes("--model");
  std::string train_out;
  train_cmd->add_option("--out,-o", train_out, "also write the model to this file (one --kind)");
  bool train_fresh = false;
  train_cmd->add_flag("--fresh", train_fresh,
                      "train from nothing, not from the model shipped for this machine kind (how the shipped "
                      "models are made from a corpus)");

  auto* report_cmd = app.add_subcommand(
      "report",
      "write the dashboard's pages (workloads, knobs, models) for a database as one self-contained HTML file");
  std::string report_out;
  report_cmd->add_option("--db", common.db, "database of measurements (SQLite file or postgresql:// URL)")
      ->capture_default_str();
  report_cmd->add_option("--html", report_out, "the file to write")->required();

  auto* db_cmd = app.add_subcommand("db", "check a database; move records between databases (SQLite, PostgreSQL)");
  db_cmd->require_subcommand(1);
  std::string db_where, db_from, db_to, db_target;
  auto* db_check_cmd = db_cmd->add_subcommand("check", "print what a database holds and run its integrity check");
  db_check_cmd->add_option("--db", db_where, "the database (SQLite file or postgresql:// URL)")->required();
  auto* db_push_cmd = db_cmd->add_subcommand(
      "push", "merge a database's records into another (a machine's into the team's): duplicates merged");
  auto* db_pull_cmd = db_cmd->add_subcommand("pull", "the same, the other way (the team's into a machine's)");
  for (auto* cmd : {db_push_cmd, db_pull_cmd}) {
    cmd->add_option("--from", db_from, "database to read (SQLite file or postgresql:// URL)")->required();
    cmd->add_option("--to", db_to, "database to merge into (created if needed)")->required();
    cmd->add_option("--target", db_target, "only the records of this target key");
  }

  // An unknown command must not pass for a request of the main help (`tiletune import --help`).
  if (argc > 1 && argv[1][0] != '-') {
    try {
      app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::cerr << "tiletune: unknown command '" << argv[1] << "' (tiletune --help lists the commands)\n";
      return cli::kUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kUsage;
  }
  try {
    for (auto& plugin : common.plugins) codegen::load_backend_plugin(plugin);
    if (*tune_cmd) return cli::run_tune(common, tune);
    if (*suite_cmd) return cli::run_suite(common, tune, suite, suite_cmd->count("--trials") > 0);
    if (*best_cmd) return cli::run_best(common, top, json);
    if (*show_cmd) return cli::run_show(common, config, naive, json);
    if (*export_cmd) return cli::run_export(common, suite, export_out, static_lib);
    if (*measure_cmd) return cli::run_measure(common, tune, configs);
    if (*import_cmd) return cli::run_import(model_path, input_shapes, import_out, import_trials);
    if (*tune_model_cmd) return cli::run_tune_model(common, tune, model_tune);
    if (*serve_cmd) return cli::run_serve(common, tune, serve, service);
    if (*worker_cmd) {
      if (!worker_token_file.empty()) worker.token = cli::read_token(worker_token_file);
      return cli::run_worker(common, worker);
    }
    if (*corpus_cmd) return cli::run_corpus(common, tune, corpus);
    if (*report_cmd) return cli::run_report(common, report_out);
    if (*db_check_cmd) return cli::run_db_check(db_where);
    if (*db_push_cmd || *db_pull_cmd) return cli::run_db_copy(db_from, db_to, db_target);
    if (*train_cmd) {
      model.from_shipped = !train_fresh;  // train starts from the shipped model unless told not to
      return cli::run_model_train(common, model, train_out);
    }
    if (*eval_cmd) return cli::run_model_eval(common, model);
    return cli::run_ops();
  } catch (const Error& e) {
    std::cerr << "tiletune: " << e.what() << "\n";
    return cli::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "tiletune: internal error: " << e.what() << "\n";
    return cli::kInternalError;
  }
}
