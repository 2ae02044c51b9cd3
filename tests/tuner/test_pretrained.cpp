// The cost models shipped with tiletune (costmodel/pretrained/): found for their machine kind,
// of a feature version this build reads, guiding a search from its first proposal.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "costmodel/features.hpp"
#include "db/store.hpp"
#include "helpers.hpp"
#include "support/subprocess.hpp"
#include "tuner/pretrained.hpp"
#include "tuner/search.hpp"
#include "tuner/space.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;

TEST_CASE("pretrained: a model is shipped for this machine kind, of a feature version this build reads") {
  auto backend = codegen::make_backend("cpu");
  std::string kind = tuner::machine_kind(backend->target());
  CHECK(kind == "cpu-simd" + std::to_string(backend->target().traits.vector_lanes));
  CHECK(tuner::shipped_model_name("xgb", "cpu-simd16") == "xgb-cpu-simd16.model");
  auto names = tuner::shipped_models();
  REQUIRE_MESSAGE(!names.empty(), "costmodel/pretrained/ is empty: train one from the corpus (README)");
  for (auto& name : names) {
    CAPTURE(name);
    // A feature change that does not only append, shipped without retraining, fails here, not in use.
    for (auto& k : costmodel::model_kinds())
      if (name.rfind(k + "-", 0) == 0) {
        costmodel::ModelMeta meta;
        codegen::TargetInfo t = backend->target();
        t.traits.vector_lanes = std::stoi(name.substr(name.find("simd") + 4));
        auto m = tuner::shipped_model(k, t, &meta);
        REQUIRE(m);
        CHECK(m->trained());
        CHECK(costmodel::feature_count(meta.feature_version) == m->width());
        // The AVX-512 corpus is collected where the models are trained: its models are of
        // version 5 or later (README: the xgb of version 8, trained on the Intel Xeon's recipe v4
        // records). The AVX2 ones may lag further behind.
        if (name.find("simd16") != std::string::npos) CHECK(meta.feature_version >= 5);
        CHECK(meta.records >= 1000);
      }
  }
  // Models ship for AVX2 (8 lanes) and AVX-512 (16): a machine of either kind finds its own.
  // xgb-pairs ships none of its own: it starts from the shipped xgb (test below).
  const std::vector<std::string> shipped_kinds = {"cpu-simd8", "cpu-simd16"};
  for (auto& shipped : shipped_kinds)
    for (const std::string k : {"xgb", "nn"})
      CHECK_MESSAGE(std::count(names.begin(), names.end(), tuner::shipped_model_name(k, shipped)) == 1,
                    k << "-" << shipped);
  if (std::count(shipped_kinds.begin(), shipped_kinds.end(), kind))
    CHECK(tuner::shipped_model("xgb", backend->target()) != nullptr);
  // How each shipped xgb model reads a program of several nests: cpu-simd8's was trained before
  // models recorded their pooling, on sums, and keeps summing, also once fine-tuned on a target's
  // records; cpu-simd16's scores each nest apart as a time and adds the times.
  const std::pair<int, costmodel::Pooling> pooling_by_lanes[] = {{8, costmodel::Pooling::Sum},
                                                                 {16, costmodel::Pooling::NestTimes}};
  for (auto& [lanes, pooling] : pooling_by_lanes) {
    codegen::TargetInfo t = backend->target();
    t.traits.vector_lanes = lanes;
    CAPTURE(tuner::machine_kind(t));
    auto m = tuner::shipped_model("xgb", t);
    REQUIRE(m);
    auto w = ir::bind(ir::parse_op(R"(op two(X: f32[N, D]) -> Y: f32[N, D] {
  t[n, d] = exp(X[n, d])
  Y[n, d] = t[n, d] / (1.0 + t[n, d])
})"), ir::parse_sizes("N=64,D=256"));
    auto f = costmodel::featurize(w, ir::naive_schedule(w), t.traits);
    REQUIRE(f.stages.size() == 2);
    const costmodel::Features summed{{f.pooled(costmodel::Pooling::Sum)}}, most{{f.pooled(costmodel::Pooling::Max)}},
        dominant{{f.pooled(costmodel::Pooling::Dominant)}};
    // Each nest's row scored alone (with the program's whole-program features), read as minus
    // the log of the nest's time, the times added.
    auto nest_times_added = [&](const costmodel::CostModel& model) {
      double time = 0;
      for (std::size_t r = 0; r < f.stages.size(); ++r) {
        costmodel::FeatureRow row(costmodel::feature_count());
        f.nest_row_into(r, row.data(), row.size());
        time += std::exp(-static_cast<double>(model.predict({costmodel::Features{{row}}}).front()));
      }
      return doctest::Approx(-std::log(time)).epsilon(1e-5);
    };
    auto reads_as_its_pooling = [&] {
      const float score = m->predict({f}).front();
      if (pooling == costmodel::Pooling::Sum) {
        CHECK(score == m->predict({summed}).front());
        CHECK(score != nest_times_added(*m));
      } else {
        CHECK(score == nest_times_added(*m));
        CHECK(score != m->predict({summed}).front());
      }
      CHECK(score != m->predict({most}).front());  // (the poolings score this program apart)
      CHECK(score != m->predict({dominant}).front());
    };
    reads_as_its_pooling();
    std::vector<costmodel::Sample> own;
    for (int i = 0; i < 8; ++i) own.push_back({f, "w", 1e-3 * (1 + i % 3)});
    m->fine_tune(own);
    reads_as_its_pooling();
    // The same model object trained anew adds its nests' times, as every new model does.
    std::vector<costmodel::Sample> varied;
    for (int i = 0; i < 40; ++i) {
      costmodel::Features g = f;
      g.stages[0][i % g.stages[0].size()] += static_cast<float>(i % 5);
      g.stages[1][(3 * i) % g.stages[1].size()] += static_cast<float>(i % 7);
      varied.push_back({g, "w", 1e-3 * (1 + (7 * i) % 11)});
    }
    m->fit(varied);
    CHECK(m->predict({f}).front() == nest_times_added(*m));
    CHECK(m->predict({f}) != m->predict({dominant}));
  }
  codegen::TargetInfo other = backend->target();
  other.traits.vector_lanes = 3;  // no machine of this kind
  CHECK(tuner::shipped_model("xgb", other) == nullptr);
}

TEST_CASE("pretrained: a model of an earlier feature version reads the prefix of each row it was trained on") {
  auto backend = codegen::make_backend("cpu");
  auto w = test::library_workload("matmul", "M=64,N=48,K=32");
  int older = 0;
  for (int lanes : {8, 16})
    for (auto& kind : costmodel::model_kinds()) {
      codegen::TargetInfo t = backend->target();
      t.traits.vector_lanes = lanes;
      costmodel::ModelMeta meta;
      auto m = tuner::shipped_model(kind, t, &meta);
      if (!m || m->width() == costmodel::feature_count()) continue;
      CAPTURE(kind);
      CAPTURE(lanes);
      ++older;
      // The features appended since its version do not move its scores.
      tuner::Space space(w, t.traits);
      tuner::Rng rng(3);
      std::vector<costmodel::Features> x, appended;
      for (int i = 0; i < 12; ++i) {
        costmodel::Features f = costmodel::featurize(w, space.sample(rng), t.traits);
        x.push_back(f);
        for (auto& row : f.stages)
          for (std::size_t k = m->width(); k < row.size(); ++k) row[k] += 3.0f + static_cast<float>(k);
        appended.push_back(f);
      }
      const auto scores = m->predict(x);
      CHECK(scores == m->predict(appended));
      CHECK(std::set<float>(scores.begin(), scores.end()).size() > 3);  // (the rows differ, and so do their scores)
      // Fine-tuned and saved again, it stays of its version.
      std::vector<costmodel::Sample> own;
      for (int i = 0; i < 12; ++i) own.push_back({x[i], "w", 1e-3 * (1 + i % 4)});
      m->fine_tune(own);
      CHECK(m->width() == costmodel::feature_count(meta.feature_version));
      costmodel::ModelMeta back;
      auto again = costmodel::load_model(costmodel::save_model(*m, meta), &back);
      CHECK(back.feature_version == meta.feature_version);
      CHECK(again->predict(x) == m->predict(x));
    }
  // cpu-simd8's xgb and nn are of version 3 (and xgb-pairs, which starts from the xgb), cpu-simd16's
  // nn of 5; its xgb (and xgb-pairs) is of this build's version.
  CHECK(older == 4);
}

TEST_CASE("pretrained: xgb-pairs, shipped for no machine kind, starts from the shipped xgb") {
  auto backend = codegen::make_backend("cpu");
  auto w = test::library_workload("matmul", "M=64,N=48,K=32");
  for (int lanes : {8, 16}) {
    CAPTURE(lanes);
    codegen::TargetInfo t = backend->target();
    t.traits.vector_lanes = lanes;
    const auto names = tuner::shipped_models();
    REQUIRE(std::count(names.begin(), names.end(), tuner::shipped_model_name("xgb-pairs", tuner::machine_kind(t))) == 0);
    costmodel::ModelMeta xgb_meta, meta;
    auto xgb = tuner::shipped_model("xgb", t, &xgb_meta);
    auto pairs = tuner::shipped_model("xgb-pairs", t, &meta);
    REQUIRE(xgb);
    REQUIRE(pairs);
    CHECK(pairs->kind() == "xgb-pairs");
    CHECK(meta.kind == "xgb-pairs");
    CHECK(tuner::shipped_model_file("xgb-pairs", t) == tuner::shipped_model_name("xgb", tuner::machine_kind(t)));
    CHECK(meta.feature_version == xgb_meta.feature_version);
    CHECK(meta.records == xgb_meta.records);
    CHECK(pairs->width() == xgb->width());
    // Its ranker is the shipped xgb, and it has no comparator until a search's records bring one.
    tuner::Space space(w, t.traits);
    tuner::Rng rng(8);
    std::vector<costmodel::Features> x;
    for (int i = 0; i < 40; ++i) x.push_back(costmodel::featurize(w, space.sample(rng), t.traits));
    CHECK(pairs->rank(x) == xgb->predict(x));
  }
  codegen::TargetInfo other = backend->target();
  other.traits.vector_lanes = 3;  // no machine of this kind
  CHECK(tuner::shipped_model("xgb-pairs", other) == nullptr);
  CHECK(tuner::shipped_model_file("xgb-pairs", other) == "");
}

TEST_CASE("pretrained: a search with a base model proposes what it predicts fast from its first batch") {
  auto backend = codegen::make_backend("cpu");
  const auto& t = backend->target();
  auto base = tuner::shipped_model("xgb", t);
  if (!base) TT_SKIP("no model is shipped for this machine kind (" + tuner::machine_kind(t) + ")");
  auto w = test::library_workload("matmul", "M=192,N=160,K=96");
  tuner::Space space(w, t.traits);
  tuner::SearchContext context;
  context.base = tuner::shipped_model("xgb", t);
  auto search = tuner::make_search("xgb", space, 5, std::move(context));
  auto proposed = search->propose(8, {});
  REQUIRE(proposed.size() == 8);
  tuner::Rng rng(9);
  std::vector<ir::Schedule> random;
  for (int i = 0; i < 200; ++i) random.push_back(space.sample(rng));
  auto score = [&](const std::vector<ir::Schedule>& configs) {
    std::vector<costmodel::Features> x;
    for (auto& f : costmodel::featurize_all(w, configs, t.traits))
      if (f) x.push_back(*f);
    return base->predict(x);
  };
  auto r = score(random);
  std::sort(r.begin(), r.end());
  auto p = score(proposed);
  int above = 0;
  for (float s : p) above += s > r[r.size() / 2];
  CHECK(above >= 6);  // 7 of 8 are the model's picks, one an explored random config
}

TEST_CASE("cli: model train --out writes the shipped-model file; eval --shipped ranks without training") {
  test::TempDir dir;
  std::string db = dir.file("m.db"), out = dir.file("xgb.model");
  auto tiletune = [&](std::vector<std::string> args) {
    args.insert(args.begin(), std::string(TILETUNE_BINARY_DIR) + "/tiletune");
    return run_process(args, 300);
  };
  for (auto sizes : {"M=32,N=48,K=16", "M=40,N=24,K=32"}) {
    auto r = tiletune({"tune", "matmul", "--sizes", sizes, "--trials", "8", "--strategy", "random", "--db", db,
                       "--cache", test::kernel_cache(), "--min-time", "0.01"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  }
  auto train = tiletune({"model", "train", "--db", db, "--kind", "xgb", "--fresh", "--out", out});
  CHECK_MESSAGE(train.exit_code == 0, train.output);
  CHECK(train.output.find("written to " + out) != std::string::npos);
  std::ifstream in(out, std::ios::binary);
  std::string blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(costmodel::load_model(blob)->kind() == "xgb");
  auto two = tiletune({"model", "train", "--db", db, "--kind", "xgb", "--kind", "nn", "--out", out});
  CHECK(two.exit_code == 2);
  CHECK(two.output.find("one --kind") != std::string::npos);
  // A saved model judged on records: the ones it was trained on, so it ranks them well.
  auto judged = tiletune({"model", "eval", "--db", db, "--model", out, "--json"});
  REQUIRE_MESSAGE(judged.exit_code == 0, judged.output);
  auto at = judged.output.find("{\"");  // (the output holds stderr's note on the records too)
  REQUIRE(at != std::string::npos);
  auto line = nlohmann::json::parse(judged.output.substr(at, judged.output.find('\n', at) - at));
  CHECK(line["model"] == out + " (xgb)");
  CHECK(line["split"] == "as trained");
  CHECK(line["workloads"] == 2);
  CHECK(line["pairwise_accuracy"].get<double>() > 0.8);
  std::string junk = dir.file("junk.model");
  std::ofstream(junk) << "not a model\n";
  auto bad = tiletune({"model", "eval", "--db", db, "--model", junk});
  CHECK(bad.exit_code == 2);
  CHECK_MESSAGE(bad.output.find("not a tiletune model") != std::string::npos, bad.output);
  auto eval = tiletune({"model", "eval", "--db", db, "--kind", "xgb", "--kind", "xgb-pairs", "--shipped"});
  auto backend = codegen::make_backend("cpu");
  if (tuner::shipped_model("xgb", backend->target())) {
    CHECK_MESSAGE(eval.exit_code == 0, eval.output);
    CHECK(eval.output.find("shipped xgb") != std::string::npos);
    CHECK(eval.output.find("as trained") != std::string::npos);
    // xgb-pairs, shipped for no machine, is named by the model it starts from.
    CHECK(eval.output.find("shipped xgb-pairs (from " +
                           tuner::shipped_model_name("xgb", tuner::machine_kind(backend->target())) + ")") !=
          std::string::npos);
  } else {  // a machine kind nothing is shipped for: said so, as "not found"
    CHECK(eval.exit_code == 3);
    CHECK(eval.output.find("no xgb model is shipped for " + tuner::machine_kind(backend->target())) !=
          std::string::npos);
  }
  CHECK(tiletune({"model", "eval", "--db", db, "--shipped", "--from-shipped"}).exit_code == 2);
  // model train starts from the shipped model (fine-tuned on this machine's records, it names
  // its base, and a search fine-tunes it further instead of retraining it from nothing), or,
  // where none is shipped, from nothing, saying so.
  const std::string from_out = dir.file("from.model");
  auto from = tiletune({"model", "train", "--db", db, "--kind", "xgb", "--out", from_out});
  REQUIRE_MESSAGE(from.exit_code == 0, from.output);
  std::ifstream from_in(from_out, std::ios::binary);
  const std::string from_blob((std::istreambuf_iterator<char>(from_in)), std::istreambuf_iterator<char>());
  costmodel::ModelMeta meta;
  costmodel::load_model(from_blob, &meta);
  auto from_eval = tiletune({"model", "eval", "--db", db, "--kind", "xgb", "--from-shipped", "--json"});
  {
    // Records of a machine kind nothing is shipped for (3 lanes): trained from nothing, saying so.
    auto store = db::open_store(db);
    db::TargetRow other = store->targets().front();
    const std::string here = other.key;
    other.key = "00000000000000b3";
    auto traits = nlohmann::json::parse(other.traits_json);
    traits["vector_lanes"] = 3;
    other.traits_json = traits.dump();
    store->put_target(other);
    for (db::Record r : store->records(db::RecordQuery{"", here, 0, 1000, true})) {
      r.target_key = other.key;
      store->add_record(r);
    }
  }
  auto none = tiletune({"model", "train", "--db", db, "--kind", "xgb", "--target", "00000000000000b3"});
  CHECK_MESSAGE(none.exit_code == 0, none.output);
  CHECK_MESSAGE(none.output.find("no xgb model is shipped for cpu-simd3: the xgb model is trained from nothing") !=
                    std::string::npos,
                none.output);
  // Asked for by name, a shipped model that is not there is "not found".
  auto none_eval =
      tiletune({"model", "eval", "--db", db, "--kind", "xgb", "--from-shipped", "--target", "00000000000000b3"});
  CHECK(none_eval.exit_code == 3);
  CHECK(none_eval.output.find("no xgb model is shipped for cpu-simd3") != std::string::npos);
  const std::string shipped_name = tuner::shipped_model_name("xgb", tuner::machine_kind(backend->target()));
  if (!tuner::shipped_model("xgb", backend->target())) {
    CHECK(meta.base.empty());
    CHECK(from_eval.exit_code == 3);  // asked for by name: not there
    CHECK(from_eval.output.find("no xgb model is shipped") != std::string::npos);
    return;
  }
  CHECK(meta.base == shipped_name);
  CHECK(from.output.find(shipped_name) != std::string::npos);  // the table's "from"
  CHECK_MESSAGE(from_eval.exit_code == 0, from_eval.output);
  CHECK(from_eval.output.find("\"model\":\"xgb from " + shipped_name + "\"") != std::string::npos);
  auto store = db::open_store(db);
  tuner::TuneOptions options;
  options.strategy = "xgb";
  options.models = store.get();
  const auto w = test::library_workload("matmul", "M=32,N=48,K=16");
  auto context_now = [&] {
    std::vector<std::string> notes;
    tuner::SearchContext c = tuner::search_context(w, backend->target(), *store, options, notes);
    CHECK(notes.empty());
    CHECK(c.prior.size() == 8);  // the other workload's records
    return c;
  };
  tuner::SearchContext fine_tuned = context_now();
  CHECK(fine_tuned.base);
  CHECK(!fine_tuned.pretrained);
  // Trained from nothing (the newer model now), it is retrained from nothing as records come.
  REQUIRE(tiletune({"model", "train", "--db", db, "--kind", "xgb", "--fresh"}).exit_code == 0);
  tuner::SearchContext fresh = context_now();
  CHECK(fresh.pretrained);
  CHECK(!fresh.base);
}
