// End-to-end tests of the tiletune command: what a user types, what it prints, its exit codes.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "db/store.hpp"
#include "helpers.hpp"
#include "support/subprocess.hpp"

using namespace tiletune;
using tiletune::test::TempDir;

namespace {

ProcessResult tiletune_cmd(std::vector<std::string> args) {
  args.insert(args.begin(), std::string(TILETUNE_BINARY_DIR) + "/tiletune");
  return run_process(args, 300);
}

bool has(const ProcessResult& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("cli: tune, rerun, best and show on a library op") {
  TempDir dir;
  std::string db = dir.file("t.db");
  std::vector<std::string> common = {"--sizes", "M=48,N=64,K=32", "--db", db, "--cache", test::kernel_cache()};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), common.begin(), common.end());
    return tiletune_cmd(a);
  };
  auto tune = with({"tune", "matmul", "--trials", "6", "--batch", "3", "--min-time", "0.01"});
  CHECK_MESSAGE(tune.exit_code == 0, tune.output);
  CHECK(has(tune, "GFLOP/s"));
  CHECK(has(tune, "matmul  K=32,M=48,N=64"));
  CHECK(has(tune, "6/6"));
  auto again = with({"tune", "matmul", "--trials", "6"});
  CHECK_MESSAGE(again.exit_code == 0, again.output);
  CHECK(has(again, "  6    0  "));  // 6 records, 0 new
  auto best = with({"best", "matmul", "--top", "3"});
  CHECK(best.exit_code == 0);
  CHECK(has(best, "median ms"));
  auto best_json = with({"best", "matmul", "--json"});
  CHECK(best_json.exit_code == 0);
  CHECK(has(best_json, "\"workload_key\""));
  auto show = with({"show", "matmul"});
  CHECK(show.exit_code == 0);
  CHECK(has(show, "extern \"C\" void tt_kernel"));
  // With --json: the source with how to call it, as the daemon answers.
  auto show_json = with({"show", "matmul", "--json"});
  REQUIRE(show_json.exit_code == 0);
  auto j = nlohmann::json::parse(show_json.output);
  CHECK(j["source"] == show.output);
  CHECK(j["abi"]["arguments"].size() == 3);
  CHECK(j["abi"]["entry_point"].get<std::string>().rfind("tt_kernel_", 0) == 0);
  CHECK(j["abi"].contains("compile_flags"));
  auto naive_json = with({"show", "matmul", "--naive", "--json"});
  REQUIRE(naive_json.exit_code == 0);
  CHECK(nlohmann::json::parse(naive_json.output)["abi"]["workspace_bytes"] == 0);
}

TEST_CASE("cli: ops lists the library and --help the exit codes") {
  auto ops = tiletune_cmd({"ops"});
  CHECK(ops.exit_code == 0);
  CHECK(has(ops, "matmul(A[M, K], B[K, N]) -> C[M, N]"));
  CHECK(has(ops, "suites: costmodel default library"));
  auto help = tiletune_cmd({"--help"});
  CHECK(help.exit_code == 0);
  CHECK(has(help, "Exit codes"));
  auto tune_help = tiletune_cmd({"tune", "--help"});
  CHECK(tune_help.exit_code == 0);
  CHECK(has(tune_help, "--trials"));
}

TEST_CASE("cli: bad input gets a clear message and the documented exit code") {
  TempDir dir;
  std::string db = dir.file("t.db");
  auto bad_sizes = tiletune_cmd({"tune", "matmul", "--sizes", "M=4,N=", "--db", db});
  CHECK(bad_sizes.exit_code == 2);
  CHECK(has(bad_sizes, "sizes:"));
  auto missing_size = tiletune_cmd({"tune", "matmul", "--sizes", "M=4,N=4", "--db", db});
  CHECK(missing_size.exit_code == 2);
  CHECK(has(missing_size, "not given: K"));
  auto unknown_op = tiletune_cmd({"tune", "nosuchop", "--sizes", "M=4", "--db", db});
  CHECK(unknown_op.exit_code == 3);
  CHECK(has(unknown_op, "no library op named 'nosuchop'"));
  std::string op_file = dir.file("broken.tile");
  std::ofstream(op_file) << "op broken(A: f32[N]) -> B: f32[N] {\n  B[i] = A[i] +\n}\n";
  auto broken = tiletune_cmd({"tune", op_file, "--sizes", "N=4", "--db", db});
  CHECK(broken.exit_code == 2);
  CHECK(has(broken, "broken.tile:3:1: expected an expression"));
  auto no_args = tiletune_cmd({"tune"});
  CHECK(no_args.exit_code == 2);
  auto no_record = tiletune_cmd({"best", "matmul", "--sizes", "M=4,N=4,K=4", "--db", db});
  CHECK(no_record.exit_code == 3);
  CHECK(has(no_record, "no database"));  // a read creates no database
  std::string garbage = dir.file("garbage.db");
  std::ofstream(garbage) << std::string(4096, 'x');
  auto corrupt = tiletune_cmd({"best", "matmul", "--sizes", "M=4,N=4,K=4", "--db", garbage});
  CHECK(corrupt.exit_code == 5);
  auto bad_config = tiletune_cmd({"show", "matmul", "--sizes", "M=4,N=4,K=4", "--config", "{\"version\":1}"});
  CHECK(bad_config.exit_code == 2);
  CHECK(has(bad_config, "config:"));
  auto bad_strategy = tiletune_cmd({"tune", "matmul", "--sizes", "M=4,N=4,K=4", "--db", db, "--strategy", "magic"});
  CHECK(bad_strategy.exit_code == 2);
  CHECK(has(bad_strategy, "--strategy: magic not in {random,evolutionary,xgb,nn,xgb-pairs}"));
  std::string suite = dir.file("suite.json");
  std::ofstream(suite) << "{\"cases\": [{\"op\": 3}]}";
  auto bad_suite = tiletune_cmd({"suite", suite, "--db", db});
  CHECK(bad_suite.exit_code == 2);
  // An unknown command is a usage error, even when it asks for help.
  auto unknown = tiletune_cmd({"frobnicate", "--help"});
  CHECK(unknown.exit_code == 2);
  CHECK(has(unknown, "unknown command 'frobnicate'"));
  // Commands that only read do not create a database that is not there.
  std::string missing = dir.file("missing.db");
  auto best_missing = tiletune_cmd({"best", "matmul", "--sizes", "M=4,N=4,K=4", "--db", missing});
  CHECK(best_missing.exit_code == 3);
  CHECK(has(best_missing, "no database"));
  CHECK_FALSE(std::filesystem::exists(missing));
  auto eval_missing = tiletune_cmd({"model", "eval", "--db", missing});
  CHECK(eval_missing.exit_code == 3);
  CHECK_FALSE(std::filesystem::exists(missing));
  // A workload larger than the machine's memory allows is refused with the figures.
  auto too_big = tiletune_cmd({"tune", "matmul", "--sizes", "M=40000,N=40000,K=40000", "--db", db});
  CHECK(too_big.exit_code == 2);
  CHECK(has(too_big, "its tensors need 17.88 GiB, over 50 % of this machine's"));
  // An access out of bounds names the file it is in, with line:column.
  std::string oob = dir.file("oob.tile");
  std::ofstream(oob) << "op shift(X: f32[N]) -> Y: f32[N] {\n  Y[i] = X[i + 1]\n}\n";
  auto out_of_bounds = tiletune_cmd({"tune", oob, "--sizes", "N=8", "--db", db});
  CHECK(out_of_bounds.exit_code == 2);
  CHECK(has(out_of_bounds, oob + ":2:10: index i + 1 of 'X' runs over [1, 8]"));
  // A size too large for its digits is out of range, not "not a positive integer".
  auto huge = tiletune_cmd({"tune", "matmul", "--sizes", "M=99999999999,N=4,K=4", "--db", db});
  CHECK(huge.exit_code == 2);
  CHECK(has(huge, "M=99999999999 is out of range"));
}

TEST_CASE("cli: an op file with its own op tunes end to end") {
  TempDir dir;
  std::string op_file = dir.file("scale.tile");
  std::ofstream(op_file) << "op scale(X: f32[N, D]) -> Y: f32[N, D] {\n  Y[n, d] = 2.0 * X[n, d] + 1.0\n}\n";
  auto r = tiletune_cmd({"tune", op_file, "--sizes", "N=16,D=40", "--trials", "3", "--db", dir.file("t.db"), "--cache",
                         test::kernel_cache(), "--min-time", "0.01"});
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  CHECK(has(r, "scale"));
}

TEST_CASE("cli: a file holding several ops needs --op-name; measure runs given configs") {
  TempDir dir;
  std::string op_file = dir.file("two.tile");
  std::ofstream(op_file) << "op a(X: f32[N]) -> Y: f32[N] { Y[n] = X[n] * 2.0 }\n"
                            "op b(X: f32[N]) -> Y: f32[N] { Y[n] = X[n] + 1.0 }\n";
  std::string db = dir.file("t.db");
  auto ambiguous = tiletune_cmd({"show", op_file, "--sizes", "N=8", "--naive"});
  CHECK(ambiguous.exit_code == 2);
  CHECK(has(ambiguous, "holds several ops (a, b): choose one by name"));
  auto unknown = tiletune_cmd({"show", op_file, "--op-name", "c", "--sizes", "N=8", "--naive"});
  CHECK(unknown.exit_code == 3);
  CHECK(has(unknown, "no op named 'c'"));
  std::string good = R"({"version":1,"stages":[{"stage":"Y","tile":{"n":[4]},"order":["n.0"]}]})";
  std::string bad = R"({"version":1,"stages":[{"stage":"Y","tile":{"n":[3,2]},"order":["n.0","n.1"]}]})";
  auto measured = tiletune_cmd({"measure", op_file, "--op-name", "b", "--sizes", "N=37", "--db", db, "--cache",
                                test::kernel_cache(), "--min-time", "0.01", "--config", good, "--config", bad});
  CHECK_MESSAGE(measured.exit_code == 0, measured.output);
  CHECK(has(measured, "GFLOP/s"));
  CHECK(has(measured, "invalid_config"));
  auto none = tiletune_cmd({"measure", op_file, "--op-name", "b", "--sizes", "N=37", "--db", db, "--config", bad});
  CHECK(none.exit_code == 1);
}

TEST_CASE("cli: model eval and train on a database; model-guided tuning uses the stored model") {
  TempDir dir;
  std::string db = dir.file("m.db");
  std::vector<std::string> store = {"--db", db, "--cache", test::kernel_cache()};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), store.begin(), store.end());
    return tiletune_cmd(a);
  };
  auto empty = with({"model", "eval"});
  CHECK(empty.exit_code == 3);
  CHECK(has(empty, "no database"));
  for (auto sizes : {"M=16,N=32,K=16", "M=32,N=16,K=24", "M=24,N=24,K=8"})
    REQUIRE(with({"tune", "matmul", "--sizes", sizes, "--trials", "8", "--strategy", "random", "--min-time", "0.002"})
                .exit_code == 0);
  REQUIRE(
      with({"tune", "row_sum", "--sizes", "N=16,D=64", "--trials", "8", "--strategy", "random", "--min-time", "0.002"})
          .exit_code == 0);
  auto eval = with({"model", "eval", "--kind", "xgb"});
  CHECK_MESSAGE(eval.exit_code == 0, eval.output);
  CHECK(has(eval, "held-out sizes  xgb         3"));  // one fold per matmul size
  CHECK(has(eval, "held-out ops    random"));
  auto json = with({"model", "eval", "--kind", "nn", "--json"});
  CHECK_MESSAGE(json.exit_code == 0, json.output);
  CHECK(has(json, "\"model\":\"nn\""));
  // Per op: each held-out op's workloads scored by the model that did not see the op.
  auto by_op = with({"model", "eval", "--kind", "xgb", "--json", "--by-op"});
  CHECK_MESSAGE(by_op.exit_code == 0, by_op.output);
  std::map<std::string, int> op_workloads;  // held-out ops, xgb
  std::istringstream lines(by_op.output);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("op") && j["split"] == "held-out ops" && j["model"] == "xgb")
      op_workloads[j["op"]] = j["workloads"];
  }
  CHECK(op_workloads == std::map<std::string, int>{{"matmul", 3}, {"row_sum", 1}});
  CHECK(!has(json, "\"op\""));  // only with --by-op
  auto by_op_table = with({"model", "eval", "--kind", "xgb", "--by-op"});
  CHECK(has(by_op_table, "row_sum"));
  // The transfer test: each held-out op's records ranked once 3 of them are measured (5 left to
  // pick 3 from: its first 6 trials are compared with a cold start's).
  auto transfer = with({"model", "eval", "--kind", "xgb", "--transfer", "3", "--json"});
  CHECK_MESSAGE(transfer.exit_code == 0, transfer.output);
  std::set<std::string> transfer_rows;  // the models of that split
  std::istringstream transfer_lines(transfer.output);
  for (std::string line; std::getline(transfer_lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("split") && j["split"] == "held-out ops, 3 measured") {
      transfer_rows.insert(j["model"].get<std::string>());
      CHECK(j.contains("faster_than_cold") == (j["model"] != "xgb cold"));
    }
  }
  CHECK(transfer_rows == std::set<std::string>{"xgb cold", "xgb fine-tuned", "xgb pretrained"});
  CHECK(has(with({"model", "eval", "--kind", "xgb", "--transfer", "3"}), "faster than cold"));
  CHECK(with({"model", "eval", "--kind", "xgb", "--transfer", "0"}).exit_code == 2);
  // The learning curve over ops: a row per share; a share of none or all of the ops is refused.
  CHECK(has(with({"model", "eval", "--kind", "xgb", "--op-share", "0.5"}), "held-out ops, 50 % of the other ops"));
  auto whole = with({"model", "eval", "--kind", "xgb", "--op-share", "1"});
  CHECK(whole.exit_code == 2);
  CHECK(has(whole, "above 0 and below 1, not 1"));
  auto train = with({"model", "train"});
  CHECK_MESSAGE(train.exit_code == 0, train.output);
  CHECK(has(train, "stored in"));
  auto guided = with(
      {"tune", "matmul", "--sizes", "M=40,N=16,K=16", "--trials", "6", "--strategy", "xgb", "--min-time", "0.002"});
  CHECK_MESSAGE(guided.exit_code == 0, guided.output);
  CHECK(!has(guided, "ignored the saved"));
  CHECK(with({"model", "eval", "--kind", "svm"}).exit_code == 2);

  // Records of another target (another machine, or this one under an earlier code generator):
  // evaluated and trained on with --target, never mixed into this machine's.
  {
    auto s = db::open_store(db);
    db::TargetRow other = s->targets().front();
    const std::string here = other.key;
    other.key = "00000000000000aa";
    other.fingerprint_json = R"({"codegen":"an earlier one"})";
    s->put_target(other);
    int copied = 0;
    for (db::Record r : s->records(db::RecordQuery{"", here, 0, 1000, true})) {
      r.target_key = other.key;
      s->add_record(r);
      ++copied;
    }
    REQUIRE(copied > 8);
  }
  auto other_eval = with({"model", "eval", "--kind", "xgb", "--target", "00000000000000aa"});
  CHECK_MESSAGE(other_eval.exit_code == 0, other_eval.output);
  CHECK(has(other_eval, "on target 00000000000000aa"));
  CHECK(has(other_eval, "held-out sizes  xgb"));
  auto other_train = with({"model", "train", "--kind", "xgb", "--target", "00000000000000aa"});
  CHECK_MESSAGE(other_train.exit_code == 0, other_train.output);
  CHECK(has(other_train, "for target 00000000000000aa"));
  auto unknown = with({"model", "eval", "--target", "ffffffffffffffff"});
  CHECK(unknown.exit_code == 3);
  CHECK(has(unknown, "no target ffffffffffffffff"));
  CHECK(has(unknown, "00000000000000aa"));  // the targets it has
}
