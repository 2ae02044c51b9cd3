#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "codegen/backend.hpp"
#include "helpers.hpp"
#include "tuner/dataset.hpp"
#include "tuner/lookup.hpp"
#include "tuner/search.hpp"
#include "tuner/tune.hpp"

using namespace tiletune;
using tiletune::test::library_workload;
using tiletune::test::TempDir;

namespace {
const ir::TargetTraits kAvx512{16, 32, 2};
const ir::TargetTraits kAvx2{8, 16, 4};
}  // namespace

TEST_CASE("space: samples, mutations and crossovers are valid for every library op and target") {
  for (auto& name : ops::op_names()) {
    CAPTURE(name);
    auto w = test::library_test_workload(name);
    for (auto traits : {kAvx512, kAvx2}) {
      tuner::Space space(w, traits);
      tuner::Rng rng(42);
      std::set<std::string> keys;
      ir::Schedule prev = space.sample(rng);
      for (int i = 0; i < 40; ++i) {
        ir::Schedule s = space.sample(rng);
        CHECK(space.check(s) == "");
        CHECK(space.check(space.mutate(s, rng)) == "");
        CHECK(space.check(space.crossover(s, prev, rng)) == "");
        keys.insert(s.key());
        prev = s;
      }
      CHECK(keys.size() > 10);  // the space is not degenerate
    }
  }
}

TEST_CASE("space: explores the structural knobs: vectorize, parallel, inline and epilogue fusion") {
  auto w = library_workload("matmul_bias_relu", "M=64,N=64,K=64");
  tuner::Space space(w, kAvx512);
  tuner::Rng rng(1);
  bool fused = false, vectorized = false, parallel = false;
  for (int i = 0; i < 100; ++i) {
    ir::Schedule s = space.sample(rng);
    fused |= s.stages[0].fuse_epilogue;
    vectorized |= !s.stages[0].vectorize.empty();
    parallel |= s.stages[0].parallel > 0;
  }
  CHECK(fused);
  CHECK(vectorized);
  CHECK(parallel);
  auto sm = library_workload("softmax", "N=8,D=64");
  tuner::Space sms(sm, kAvx512);
  bool inlined = false;
  for (int i = 0; i < 50; ++i) inlined |= sms.sample(rng).stages[1].inline_stage;
  CHECK(inlined);
}

TEST_CASE("search: strategies propose distinct unmeasured configs; unknown names are refused") {
  auto w = library_workload("matmul", "M=64,N=64,K=64");
  tuner::Space space(w, kAvx512);
  for (auto& name : tuner::search_names()) {
    CAPTURE(name);
    auto search = tuner::make_search(name, space, 3);
    std::set<std::string> measured;
    for (int round = 0; round < 4; ++round) {
      auto batch = search->propose(8, measured);
      CHECK(batch.size() == 8);
      std::vector<double> lat;
      for (auto& s : batch) {
        CHECK(measured.insert(s.key()).second);
        lat.push_back(1.0 + (s.key()[0] % 7));
      }
      search->notify(batch, lat);
    }
  }
  CHECK(tiletune::test::error_of([&] {
          tuner::make_search("annealing", space, 1);
        }).find("known: random, evolutionary") != std::string::npos);
}

TEST_CASE("search: model-guided proposals beat random ones once the model has seen the latencies") {
  // A synthetic latency that rewards register tiles and SIMD: the model must learn it from
  // samples and steer the evolution towards it.
  auto w = library_workload("matmul", "M=96,N=96,K=96");
  tuner::Space space(w, kAvx512);
  auto oracle = [&](const ir::Schedule& s) {
    auto nest = ir::lower(w, s, kAvx512);
    double reg = 1;
    for (auto& l : nest.stages[0].reg) reg *= static_cast<double>(l.block);
    return 1.0 / (1.0 + std::min(reg, 128.0)) + (nest.stages[0].vector_axis.empty() ? 1.0 : 0.0);
  };
  auto run = [&](const std::string& name) {
    auto search = tuner::make_search(name, space, 11);
    std::set<std::string> measured;
    double last_round = 0;
    for (int round = 0; round < 5; ++round) {
      auto batch = search->propose(16, measured);
      std::vector<double> lat;
      for (auto& s : batch) {
        measured.insert(s.key());
        lat.push_back(oracle(s));
      }
      search->notify(batch, lat);
      last_round = 0;
      for (double l : lat) last_round += l / lat.size();
    }
    return last_round;
  };
  double random = run("random");
  CHECK(run("xgb") < random);
  CHECK(run("nn") < random);
}

namespace {
//! A trained model whose every rank() call draws new scores, each call's lower than the call
//! before's, and which remembers the last call: what a search measures first must be the last
//! call's favourite, which it is only if that call ranks the whole population.
class DrawingModel final : public costmodel::CostModel {
 public:
  std::string kind() const override { return "xgb"; }
  void fit(const std::vector<costmodel::Sample>&) override {}
  bool trained() const override { return true; }
  std::size_t width() const override { return costmodel::feature_count(); }
  void fine_tune(const std::vector<costmodel::Sample>&) override {}
  std::vector<float> predict(const std::vector<costmodel::Features>& x) const override {
    return std::vector<float>(x.size(), 0.0f);
  }
  std::vector<float> rank(const std::vector<costmodel::Features>& x) const override {
    std::uniform_real_distribution<float> draw(0, 1);
    std::vector<float> s;
    for (std::size_t i = 0; i < x.size(); ++i) s.push_back(draw(rng_) - static_cast<float>(calls_));
    ++calls_;
    const std::size_t best = std::max_element(s.begin(), s.end()) - s.begin();
    last_best_ = x[best].stages;
    last_size_ = x.size();
    return s;
  }
  std::string payload() const override { return ""; }
  void load_payload(const std::string&) override {}
  mutable std::mt19937 rng_{7};
  mutable std::vector<costmodel::FeatureRow> last_best_;
  mutable std::size_t last_size_ = 0;
  mutable int calls_ = 0;
};
}  // namespace

TEST_CASE("search: the model ranks the final population in one call, and its favourite is measured first") {
  // A comparator (xgb-pairs) orders the candidates of one rank() call; the survivors of every
  // generation must meet in one call for it to choose among them.
  auto w = library_workload("matmul", "M=96,N=96,K=96");
  tuner::Space space(w, kAvx512);
  auto model = std::make_unique<DrawingModel>();
  const DrawingModel& seen = *model;
  tuner::SearchContext context;
  context.pretrained = std::move(model);
  auto search = tuner::make_search("xgb", space, 4, std::move(context));
  auto batch = search->propose(1, {});
  REQUIRE(batch.size() == 1);
  CHECK(seen.calls_ >= 3);  // the first population, generations' children, the survivors
  CHECK(seen.last_size_ >= 256);
  CHECK(costmodel::featurize(w, batch[0], kAvx512).stages == seen.last_best_);
}

TEST_CASE("search: a batch's picks take each blocking's best-ranked config before a second of any blocking") {
  auto w = library_workload("matmul", "M=96,N=96,K=96");
  tuner::Space space(w, kAvx512);
  tuner::Rng rng(5);
  ir::Schedule a = space.sample(rng);
  a.stages[0].tile = {{"m", {8}}, {"n", {32}}, {"k", {4}}};
  a.stages[0].vectorize = "n";
  a.stages[0].order = {"m.0", "n.0", "k.0"};
  a.stages[0].unroll = 2;
  a.stages[0].parallel = 1;
  ir::Schedule a_reordered = a, a_unrolled = a, b = a, c = a;
  a_reordered.stages[0].order = {"n.0", "m.0", "k.0"};
  a_reordered.stages[0].parallel = 2;
  a_unrolled.stages[0].unroll = 8;
  a_unrolled.stages[0].prefetch = 2;
  b.stages[0].tile["m"] = {4};  // another register tile
  c.stages[0].vectorize = "";   // the same tiles in scalars
  CHECK(tuner::blocking_of(a) == tuner::blocking_of(a_reordered));
  CHECK(tuner::blocking_of(a) == tuner::blocking_of(a_unrolled));
  CHECK(tuner::blocking_of(a) != tuner::blocking_of(b));
  CHECK(tuner::blocking_of(a) != tuner::blocking_of(c));
  // Ranked best first: a's blocking three times, then b and c.
  CHECK(tuner::spread_over_blockings({a, a_reordered, a_unrolled, b, c}) == std::vector<std::size_t>{0, 3, 4, 1, 2});
  CHECK(tuner::spread_over_blockings({}).empty());
}

TEST_CASE("tune: model-guided strategies learn from other workloads' records and survive a bad saved model") {
  TempDir dir;
  auto be = codegen::make_backend("cpu");
  auto store = db::open_sqlite_store(dir.file("t.db"));
  tuner::TuneOptions o = test::quick_tune_options(6, 6);
  tuner::tune(library_workload("matmul", "M=32,N=32,K=32"), *be, *store, o);
  store->put_model({"xgb", be->target().key, 0, 6, "{}", "not a model", 0});
  o.strategy = "xgb";
  o.models = store.get();
  o.trials = 4;
  o.batch_size = 4;
  auto w = library_workload("matmul", "M=24,N=40,K=16");
  auto s = tuner::tune(w, *be, *store, o);
  CHECK(s.measured == 4);
  REQUIRE(s.notes.size() == 1);
  CHECK(s.notes[0].find("ignored the saved xgb model") != std::string::npos);
  auto data = tuner::load_dataset(*store, be->target().key, be->target().traits, w.key);
  CHECK(data.samples.size() == 6);  // the other workload's records only
  CHECK(data.skipped == 0);
  CHECK(tuner::load_dataset(*store, be->target().key, be->target().traits).samples.size() == 10);
  // A rerun with no trials left builds no search: it neither reads the saved model nor trains
  // one on the records (seconds per workload on a large database), so it has nothing to note.
  auto again = tuner::tune(w, *be, *store, o);
  CHECK(again.measured == 0);
  CHECK(again.already == 4);
  CHECK(again.notes.empty());
}

TEST_CASE("tune: the trial budget counts stored records; a rerun measures nothing, a larger budget the difference") {
  TempDir dir;
  auto w = library_workload("matmul", "M=32,N=32,K=32");
  auto be = codegen::make_backend("cpu");
  auto store = db::open_sqlite_store(dir.file("t.db"));
  tuner::TuneOptions o;
  o.trials = 5;
  o.batch_size = 4;
  o.measure.cache_dir = test::kernel_cache();
  o.measure.min_seconds = 0.005;
  int progress_calls = 0;
  auto first = tuner::tune(w, *be, *store, o, [&](const tuner::Progress&) { ++progress_calls; });
  CHECK(first.already == 0);
  CHECK(first.measured == 5);
  CHECK(progress_calls >= 2);
  REQUIRE(first.naive.has_value());  // the baseline is always measured
  REQUIRE(first.best.has_value());
  CHECK(first.best->median_s() <= first.naive->median_s());
  auto again = tuner::tune(w, *be, *store, o);
  CHECK(again.already == 5);
  CHECK(again.measured == 0);
  o.trials = 8;
  auto more = tuner::tune(w, *be, *store, o);
  CHECK(more.already == 5);
  CHECK(more.measured == 3);
  CHECK(store->count_records(w.key, be->target().key) == 8);
  auto found = tuner::find_best(*store, w.key, be->target());
  REQUIRE(found.has_value());
  CHECK(found->exact_target);
}

TEST_CASE("lookup: falls back to the same device family, never to another backend") {
  TempDir dir;
  auto store = db::open_sqlite_store(dir.file("t.db"));
  auto w = library_workload("matmul", "M=8,N=8,K=8");
  store->put_workload(tuner::workload_row(w));
  codegen::TargetInfo here{"cpu", "1111111111111111", "fam", "{}", {}, ""};
  codegen::TargetInfo sibling{"cpu", "2222222222222222", "fam", "{}", {}, ""};
  codegen::TargetInfo other_backend{"opencl", "3333333333333333", "fam", "{}", {}, ""};
  for (auto* t : {&sibling, &other_backend}) {
    store->put_target(tuner::target_row(*t));
    db::Record r;
    r.workload_key = w.key;
    r.target_key = t->key;
    r.config_key = "0000000000000001";
    r.config_json = "{}";
    r.times_s = {t == &sibling ? 2.0 : 1.0};
    store->add_record(r);
  }
  auto found = tuner::find_best(*store, w.key, here);
  REQUIRE(found.has_value());
  CHECK_FALSE(found->exact_target);
  CHECK(found->record.target_key == sibling.key);
  codegen::TargetInfo stranger{"cpu", "4444444444444444", "other-family", "{}", {}, ""};
  CHECK_FALSE(tuner::find_best(*store, w.key, stranger).has_value());
}

TEST_CASE("tune: a workload whose tensors exceed the allowed share of memory is refused before anything runs") {
  auto w = library_workload("matmul", "M=64,N=64,K=64");  // 48 KiB of tensors
  tuner::check_memory(w, 0.5);
  ErrorKind kind{};
  CHECK(test::error_of([&] { tuner::check_memory(w, 1e-12); }, &kind).find("its tensors need 0.00 GiB") !=
        std::string::npos);
  CHECK(kind == ErrorKind::InvalidInput);
  auto store = db::make_memory_record_store();
  auto be = codegen::make_backend("cpu");
  tuner::TuneOptions o;
  o.max_memory_share = 1e-12;
  CHECK(test::error_of([&] { tuner::tune(w, *be, *store, o); }).find("of this machine's") != std::string::npos);
  CHECK(store->count_records(w.key, be->target().key) == 0);
}
