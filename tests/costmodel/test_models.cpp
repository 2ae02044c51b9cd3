#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <xgboost/c_api.h>
#include "costmodel/kinds.hpp"
#include "costmodel/model.hpp"
#include "costmodel/ranking.hpp"
#include "helpers.hpp"
#include "support/hash.hpp"

using namespace tiletune;
using costmodel::Features;
using costmodel::Sample;
using test::error_of;

namespace {

std::size_t feature_index(const std::string& name) {
  const auto& docs = costmodel::feature_docs();
  auto it = std::find_if(docs.begin(), docs.end(), [&](auto& d) { return d.first == name; });
  REQUIRE(it != docs.end());
  return static_cast<std::size_t>(it - docs.begin());
}

//! Random feature rows whose latency is a known function of a few features; one or two nests
//! per candidate, so the pooling of nests is exercised. As in a program, the nests' latencies
//! add up, each nest's share of them is its stage_share, the whole-program features are the
//! first row's, and each latency grows exponentially with features that are log-scale like
//! the real ones.
std::vector<Sample> synthetic(int groups, int per_group, std::uint64_t seed) {
  const std::size_t share = feature_index("stage_share");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 4);
  std::vector<Sample> out;
  for (int g = 0; g < groups; ++g)
    for (int i = 0; i < per_group; ++i) {
      Features f;
      int nests = 1 + static_cast<int>(rng() % 2);
      double latency = 0;
      std::vector<double> own;  // each nest's
      for (int n = 0; n < nests; ++n) {
        costmodel::FeatureRow row(costmodel::feature_count());
        for (std::size_t k = 0; k < row.size(); ++k) row[k] = n > 0 && costmodel::whole_program_feature(k) ? 0 : u(rng);
        double cost = 1.0 + g + 2.0 * row[3] + std::max(0.0f, row[7] - 2.0f) - 0.5 * row[11];
        own.push_back(std::exp(0.3 * cost) * 1e-3);  // groups differ in scale: only orderings within one count
        latency += own.back();
        f.stages.push_back(row);
      }
      for (int n = 0; n < nests; ++n) f.stages[n][share] = static_cast<float>(own[n] / latency);
      out.push_back({f, "w" + std::to_string(g), latency});
    }
  return out;
}

//! An xgb payload whose pooling attribute is set to `name` (removed if null).
std::string with_pooling(const std::string& payload, const char* name) {
  BoosterHandle b = nullptr;
  REQUIRE(XGBoosterCreate(nullptr, 0, &b) == 0);
  REQUIRE(XGBoosterLoadModelFromBuffer(b, payload.data(), payload.size()) == 0);
  REQUIRE(XGBoosterSetAttr(b, "tiletune_pooling", name) == 0);
  bst_ulong n = 0;
  const char* bytes = nullptr;
  REQUIRE(XGBoosterSaveModelToBuffer(b, R"({"format": "ubj"})", &n, &bytes) == 0);
  std::string out(bytes, n);
  XGBoosterFree(b);
  return out;
}

//! Programs of two nests, the second of the larger share of the program's cycles, each as the
//! one row of each pooling (the dominant one is the second nest's row with the first's
//! whole-program features), and its first nest alone.
struct TwoNests {
  std::vector<Features> two, as_dominant, as_max, as_sum, first_nest;
};
TwoNests two_nests(std::uint64_t seed) {
  const std::size_t share = feature_index("stage_share");
  TwoNests out;
  for (auto& s : synthetic(1, 40, seed)) {
    Features f = s.x;
    if (f.stages.size() < 2) {
      f.stages.push_back(f.stages[0]), f.stages[1][3] *= 0.5f;
      for (std::size_t k = 0; k < f.stages[1].size(); ++k)
        if (costmodel::whole_program_feature(k)) f.stages[1][k] = 0;
    }
    f.stages[0][share] = 0.25f, f.stages[1][share] = 0.75f;
    out.two.push_back(f);
    costmodel::FeatureRow dominant = f.stages[1];
    for (std::size_t k = 0; k < dominant.size(); ++k)
      if (costmodel::whole_program_feature(k)) dominant[k] = f.stages[0][k];
    out.as_dominant.push_back(Features{{dominant}});
    out.as_max.push_back(Features{{f.pooled(costmodel::Pooling::Max)}});
    out.as_sum.push_back(Features{{f.pooled(costmodel::Pooling::Sum)}});
    out.first_nest.push_back(Features{{f.stages[0]}});
  }
  return out;
}

//! A model's scores of the programs' two nests, each nest's row scored alone (the second with
//! the first's whole-program features, as_dominant), combined by `f(first, second)`.
template <class F>
std::vector<float> nests_combined(const costmodel::CostModel& m, const TwoNests& p, F f) {
  std::vector<float> out = m.predict(p.first_nest);
  const std::vector<float> second = m.predict(p.as_dominant);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(out[i], second[i]);
  return out;
}
//! The nests' scores added.
std::vector<float> nests_added(const costmodel::CostModel& m, const TwoNests& p) {
  return nests_combined(m, p, [](float a, float b) { return a + b; });
}
//! Minus the log of the nests' times added, each nest's time exp(-score).
std::vector<float> nest_times_added(const costmodel::CostModel& m, const TwoNests& p) {
  return nests_combined(m, p, [](float a, float b) { return -std::log(std::exp(-a) + std::exp(-b)); });
}

//! Whether two score lists agree within float rounding of a log of sums (the tolerance of
//! test_pretrained.cpp's shipped-model check).
bool close_to(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != doctest::Approx(b[i]).epsilon(1e-5)) return false;
  return true;
}

//! An xgb-pairs payload's parts: its tag, the ranker's size, the ranker, the comparator.
struct PairsPayload {
  std::string tag, ranker, comparator;
  explicit PairsPayload(const std::string& payload) {
    const std::size_t tag_end = payload.find('\n'), size_end = payload.find('\n', tag_end + 1);
    const std::size_t ranker_size = std::stoull(payload.substr(tag_end + 1, size_end - tag_end - 1));
    tag = payload.substr(0, tag_end);
    ranker = payload.substr(size_end + 1, ranker_size);
    comparator = payload.substr(size_end + 1 + ranker_size);
  }
  std::string str() const { return tag + "\n" + std::to_string(ranker.size()) + "\n" + ranker + comparator; }
};

costmodel::RankingMetrics metrics_on(const costmodel::CostModel& m, const std::vector<Sample>& test) {
  // Each workload's candidates ranked together, as a search ranks them (CostModel::rank).
  std::map<std::string, std::vector<const Sample*>> by_group;
  for (auto& s : test) by_group[s.group].push_back(&s);
  std::vector<std::string> group;
  std::vector<double> latency;
  std::vector<float> score;
  for (auto& [name, samples] : by_group) {
    std::vector<Features> x;
    for (auto* s : samples) {
      x.push_back(s->x);
      group.push_back(name);
      latency.push_back(s->latency_s);
    }
    for (float v : m.rank(x)) score.push_back(v);
  }
  return costmodel::evaluate_ranking(group, latency, score);
}

}  // namespace

TEST_CASE("ranking metrics: perfect, reversed and failed picks") {
  std::vector<std::string> g(6, "a");
  std::vector<double> lat = {1, 2, 3, 4, 5, INFINITY};
  auto perfect = costmodel::evaluate_ranking(g, lat, {6, 5, 4, 3, 2, 1});
  CHECK(perfect.pairwise_accuracy == 1.0);
  CHECK(perfect.spearman == doctest::Approx(1.0));
  CHECK(perfect.top1 == 1.0);
  CHECK(perfect.groups == 1);
  auto reversed = costmodel::evaluate_ranking(g, lat, {1, 2, 3, 4, 5, 6});
  CHECK(reversed.pairwise_accuracy == 0.0);
  CHECK(reversed.spearman == doctest::Approx(-1.0));
  CHECK(reversed.top1 == 0.0);                         // the first pick failed
  CHECK(reversed.top5 == doctest::Approx(1.0 / 2.0));  // picks 5,4,3,2 and the failure: best 2
  auto labels = costmodel::relative_speed(g, lat);
  CHECK(labels[0] == 1.0f);
  CHECK(labels[1] == 0.5f);
  CHECK(labels[5] == 0.0f);
}

TEST_CASE("models learn a synthetic ranking and generalize to unseen samples") {
  auto train = synthetic(4, 150, 1), test = synthetic(4, 100, 2);
  for (auto& kind : costmodel::model_kinds()) {
    CAPTURE(kind);
    auto m = costmodel::make_model(kind, 7);
    CHECK(!m->trained());
    m->fit(train);
    CHECK(m->trained());
    auto on_train = metrics_on(*m, train), on_test = metrics_on(*m, test);
    // The nn's LambdaRank loss weights pairs by what they change at the fast end: it orders the
    // slow pairs, which count as much in pairwise accuracy, less carefully than xgb does. A sum
    // of two nests' exponentials is exact in neither pooling (xgb's max, the nn's sum of
    // embeddings): 0.97 and 0.93 on the training samples, 0.87 and 0.88 on the others.
    CHECK(on_train.pairwise_accuracy > (kind == "nn" ? 0.9 : 0.95));
    CHECK(on_test.pairwise_accuracy > 0.85);
    CHECK(on_test.top5 > 0.9);
    CHECK(on_test.groups == 4);
  }
}

TEST_CASE("xgb: a large batch, predicted in slices on all cores, scores each row as it alone would be") {
  auto train = synthetic(3, 60, 3), many = synthetic(1, 3001, 4);  // slices of uneven size
  {
    auto m = costmodel::make_model("xgb", 7);
    m->fit(train);
    std::vector<Features> x;
    for (auto& s : many) x.push_back(s.x);
    auto together = m->predict(x);
    REQUIRE(together.size() == x.size());
    int differ = 0;
    for (size_t i = 0; i < x.size(); i += 97) differ += m->predict({x[i]}).at(0) != together[i];
    CHECK(differ == 0);
    CHECK(m->predict({x.back()}).at(0) == together.back());
    // A loaded model predicts the same way.
    auto loaded =
        costmodel::load_model(costmodel::save_model(*m, {"xgb", "t", costmodel::kFeatureVersion, 180, "{}", ""}));
    CHECK(loaded->predict(x) == together);
  }
}

TEST_CASE("models: save/load round-trips with metadata; corrupt and mismatched blobs are clear errors") {
  auto train = synthetic(2, 60, 3);
  for (auto& kind : costmodel::model_kinds()) {
    CAPTURE(kind);
    auto m = costmodel::make_model(kind);
    CHECK(error_of([&] { costmodel::save_model(*m, {}); }).find("untrained") != std::string::npos);
    m->fit(train);
    const std::string metrics = R"({"pairwise_accuracy":0.9})";
    costmodel::ModelMeta meta{kind, "target1", costmodel::kFeatureVersion, 120, metrics, "base.model"};
    std::string blob = costmodel::save_model(*m, meta);
    costmodel::ModelMeta back;
    auto loaded = costmodel::load_model(blob, &back);
    CHECK(loaded->kind() == kind);
    CHECK(back.target_key == "target1");
    CHECK(back.records == 120);
    CHECK(back.metrics_json.find("0.9") != std::string::npos);
    CHECK(back.base == "base.model");
    std::vector<Features> x;
    for (auto& s : synthetic(1, 20, 9)) x.push_back(s.x);
    CHECK(loaded->predict(x) == m->predict(x));

    ErrorKind k{};
    CHECK(error_of([&] { costmodel::load_model(blob.substr(0, blob.size() - 10)); }, &k).find("corrupt") !=
          std::string::npos);
    CHECK(k == ErrorKind::InvalidInput);
    CHECK(error_of([&] { costmodel::load_model("garbage"); }).find("not a tiletune model") != std::string::npos);
    CHECK(error_of([&] { costmodel::load_model("{\"format\":1}\nxx"); }).find("header") != std::string::npos);
    std::string old = blob;
    auto at = old.find("\"feature_version\":");
    old.replace(at, std::string("\"feature_version\":").size() + 1, "\"feature_version\":0");
    CHECK(error_of([&] { costmodel::load_model(old); }).find("feature version 0") != std::string::npos);
    // A payload the library itself rejects, with a header that vouches for it.
    auto nl = blob.find('\n');
    nlohmann::json h = nlohmann::json::parse(blob.substr(0, nl));
    std::string junk(200, 'x');
    h["payload_bytes"] = junk.size();
    h["payload_hash"] = hash_hex(junk);
    CHECK(error_of([&] { costmodel::load_model(h.dump() + "\n" + junk); }, &k).find("rejected") != std::string::npos);
    CHECK(k == ErrorKind::InvalidInput);
    // A header of version 3, whose features this build reads as a prefix, over a payload that
    // reads all of this build's: refused, not scored on the wrong columns.
    nlohmann::json h3 = nlohmann::json::parse(blob.substr(0, nl));
    h3["feature_version"] = 3;
    h3["feature_count"] = costmodel::feature_count(3);
    CHECK(error_of([&] { costmodel::load_model(h3.dump() + "\n" + blob.substr(nl + 1)); }, &k)
              .find("the payload reads " + std::to_string(costmodel::feature_count())) != std::string::npos);
    CHECK(k == ErrorKind::InvalidInput);
    // A version whose count does not match the header's.
    h3["feature_count"] = costmodel::feature_count();
    CHECK(error_of([&] { costmodel::load_model(h3.dump() + "\n" + blob.substr(nl + 1)); }).find("cannot read") !=
          std::string::npos);
  }
}

TEST_CASE("xgb: a new model scores each nest apart as a time and adds the times, through save, load and fine-tuning") {
  auto train = synthetic(3, 60, 3);
  auto m = costmodel::make_model("xgb", 7);
  m->fit(train);
  // A program of two nests scores as minus the log of its nests' times added, each nest's time
  // exp(-score) of its row scored alone (with the first row's whole-program features); not as
  // the nests' scores added, nor as one pooled row.
  const TwoNests p = two_nests(5);
  CHECK(p.as_dominant.front().stages[0] == p.two.front().pooled(costmodel::Pooling::Dominant));
  CHECK(close_to(m->predict(p.two), nest_times_added(*m, p)));
  CHECK(!close_to(m->predict(p.two), nests_added(*m, p)));
  CHECK(m->predict(p.two) != m->predict(p.as_dominant));
  CHECK(m->predict(p.two) != m->predict(p.as_max));
  auto loaded =
      costmodel::load_model(costmodel::save_model(*m, {"xgb", "t", costmodel::kFeatureVersion, 180, "{}", ""}));
  CHECK(close_to(loaded->predict(p.two), nest_times_added(*loaded, p)));
  loaded->fine_tune(synthetic(2, 30, 6));
  CHECK(close_to(loaded->predict(p.two), nest_times_added(*loaded, p)));
  // Models saved as adding the nests' scores (the shipped cpu-simd16 one before) still read so,
  // also fine-tuned.
  auto summed = costmodel::make_model("xgb");
  summed->load_payload(with_pooling(m->payload(), "nests"));
  CHECK(summed->predict(p.two) == nests_added(*summed, p));
  summed->fine_tune(synthetic(2, 30, 6));
  CHECK(summed->predict(p.two) == nests_added(*summed, p));
  CHECK(!close_to(summed->predict(p.two), nest_times_added(*summed, p)));
  // Models saved as pooling by the dominant nest or by max still read so, also fine-tuned.
  for (const char* pooling : {"dominant", "max"}) {
    CAPTURE(pooling);
    const bool by_max = std::string(pooling) == "max";
    auto old = costmodel::make_model("xgb");
    old->load_payload(with_pooling(m->payload(), pooling));
    CHECK(old->predict(p.two) == old->predict(by_max ? p.as_max : p.as_dominant));
    CHECK(old->predict(p.two) != old->predict(by_max ? p.as_dominant : p.as_max));
    old->fine_tune(synthetic(2, 30, 6));
    CHECK(old->predict(p.two) == old->predict(by_max ? p.as_max : p.as_dominant));
  }
  // A pooling this build does not know is refused, by name, not read as another.
  const std::string odd = with_pooling(m->payload(), "median");
  ErrorKind k{};
  CHECK(error_of([&] { costmodel::make_model("xgb")->load_payload(odd); }, &k).find("'median'") != std::string::npos);
  CHECK(k == ErrorKind::InvalidInput);
  // A booster of a width no feature version has is refused, not scored on the wrong columns.
  std::vector<float> x(40 * 10), y(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  DMatrixHandle d = nullptr;
  BoosterHandle b = nullptr;
  bst_ulong n = 0;
  const char* bytes = nullptr;
  REQUIRE(XGDMatrixCreateFromMat(x.data(), 40, 10, NAN, &d) == 0);
  REQUIRE(XGDMatrixSetFloatInfo(d, "label", y.data(), y.size()) == 0);
  REQUIRE(XGBoosterCreate(&d, 1, &b) == 0);
  REQUIRE(XGBoosterUpdateOneIter(b, 0, d) == 0);
  REQUIRE(XGBoosterSaveModelToBuffer(b, R"({"format": "ubj"})", &n, &bytes) == 0);
  const std::string narrow(bytes, n);
  XGBoosterFree(b);
  XGDMatrixFree(d);
  CHECK(error_of([&] { costmodel::make_model("xgb")->load_payload(narrow); }, &k).find("reads 10 features") !=
        std::string::npos);
  CHECK(k == ErrorKind::InvalidInput);
}

TEST_CASE("models: library failures and misuse are errors, not crashes") {
  for (auto& kind : costmodel::model_kinds()) {
    CAPTURE(kind);
    auto m = costmodel::make_model(kind);
    CHECK(!error_of([&] { m->predict({Features{{costmodel::FeatureRow(costmodel::feature_count())}}}); }).empty());
    CHECK(!error_of([&] { m->fit({}); }).empty());
    Sample wrong{Features{{costmodel::FeatureRow(3, 1.0f)}}, "w", 1.0};
    ErrorKind k{};
    CHECK(error_of([&] { m->fit({wrong, wrong}); }, &k).find("expected") != std::string::npos);
    CHECK(k == ErrorKind::InvalidInput);
  }
  CHECK(error_of([] { costmodel::make_model("svm"); }).find("xgb, nn") != std::string::npos);
}

TEST_CASE("online model: retrains only when enough new samples have come") {
  auto data = synthetic(1, 200, 4);
  std::vector<Sample> prior(data.begin(), data.begin() + 100);
  costmodel::OnlineModel online(costmodel::make_model("xgb"), prior);
  CHECK(online.update());  // first training on the prior
  online.add({data.begin() + 100, data.begin() + 105});
  CHECK(!online.update(8));
  online.add({data.begin() + 105, data.begin() + 120});
  CHECK(online.update(8));
  CHECK(!online.update(8));
  // A model that arrives trained counts as trained on the prior.
  auto pre = costmodel::make_model("xgb");
  pre->fit(prior);
  costmodel::OnlineModel warm(std::move(pre), prior);
  CHECK(warm.trained());
  CHECK(!warm.update(8));
}

TEST_CASE("models: fine-tuning a trained model on a few samples keeps what it learned") {
  auto base_data = synthetic(6, 120, 11), few = synthetic(1, 16, 12), test = synthetic(3, 100, 13);
  for (auto& kind : costmodel::model_kinds()) {
    CAPTURE(kind);
    auto untrained = costmodel::make_model(kind, 3);
    CHECK_THROWS_AS(untrained->fine_tune(few), Error);
    auto tuned = costmodel::make_model(kind, 3);
    tuned->fit(base_data);
    double before = metrics_on(*tuned, test).pairwise_accuracy;
    tuned->fine_tune(few);
    double after = metrics_on(*tuned, test).pairwise_accuracy;
    auto scratch = costmodel::make_model(kind, 3);
    scratch->fit(few);
    double alone = metrics_on(*scratch, test).pairwise_accuracy;
    CHECK(after > 0.85);
    CHECK(after > before - 0.05);
    CHECK(after >= alone);
    // A fine-tuned model saves and loads like any other.
    auto blob = costmodel::save_model(*tuned, {kind, "t", costmodel::kFeatureVersion, 16, "{}", ""});
    CHECK(metrics_on(*costmodel::load_model(blob), test).pairwise_accuracy == doctest::Approx(after));
  }
}

TEST_CASE("xgb: fine-tuning adds rounds as the samples grow, up to a fresh model's") {
  using costmodel::kXgbFineTuneRounds, costmodel::kXgbFineTuneStep, costmodel::xgb_fine_tune_rounds;
  CHECK(xgb_fine_tune_rounds(0) == kXgbFineTuneRounds);
  CHECK(xgb_fine_tune_rounds(1) == kXgbFineTuneRounds);
  CHECK(xgb_fine_tune_rounds(kXgbFineTuneStep) == kXgbFineTuneRounds);
  CHECK(xgb_fine_tune_rounds(kXgbFineTuneStep + 1) == 2 * kXgbFineTuneRounds);
  CHECK(xgb_fine_tune_rounds(3 * kXgbFineTuneStep) == 3 * kXgbFineTuneRounds);
  // A large prior fine-tunes as many rounds as training afresh, and no more.
  const int most = xgb_fine_tune_rounds(100000);
  CHECK(most == xgb_fine_tune_rounds(1000000));
  CHECK(most > 3 * kXgbFineTuneRounds);
  // The trees a fine-tuning adds are these rounds: tests/costmodel/test_tree_walk.cpp.
}

TEST_CASE("online model from a pretrained base: fine-tunes the base again on everything seen") {
  auto data = synthetic(3, 60, 21);
  auto base = costmodel::make_model("xgb", 1);
  base->fit(synthetic(4, 100, 22));
  auto base_scores = [&] {
    std::vector<Features> x;
    for (auto& s : data) x.push_back(s.x);
    return x;
  }();
  std::vector<float> untouched = base->predict(base_scores);
  costmodel::OnlineModel online(costmodel::OnlineModel::FromBase{}, std::move(base), {});
  CHECK(online.trained());
  CHECK(!online.update(8));  // nothing seen yet: the base as shipped
  CHECK(online.predict(base_scores) == untouched);
  online.add({data.begin(), data.begin() + 5});
  CHECK(!online.update(8));
  online.add({data.begin() + 5, data.begin() + 12});
  CHECK(online.update(8));
  CHECK(online.predict(base_scores) != untouched);
  CHECK(error_of([] {
          costmodel::OnlineModel bad(costmodel::OnlineModel::FromBase{}, costmodel::make_model("nn"), {});
        }).find("trained") != std::string::npos);
}

TEST_CASE("xgb-pairs: the comparator orders the ranker's first picks of a workload again; saved and loaded alike") {
  auto train = synthetic(4, 150, 1), one = synthetic(1, 100, 2);
  auto m = costmodel::make_model("xgb-pairs", 7);
  m->fit(train);
  std::vector<Features> x;
  std::vector<double> latency;
  for (auto& s : one) {
    x.push_back(s.x);
    latency.push_back(s.latency_s);
  }
  const std::vector<float> predicted = m->predict(x), ranked = m->rank(x);
  // predict is the xgb ranker's own.
  auto xgb = costmodel::make_model("xgb", 7);
  xgb->fit(train);
  CHECK(xgb->predict(x) == predicted);
  // The ranker's 32 first picks stay first, their own scores dealt out again among them (so that
  // scores of separate calls still compare); the others keep the ranker's.
  std::vector<std::size_t> by_predicted(x.size()), by_rank(x.size());
  std::iota(by_predicted.begin(), by_predicted.end(), 0);
  by_rank = by_predicted;
  std::sort(by_predicted.begin(), by_predicted.end(), [&](auto a, auto b) { return predicted[a] > predicted[b]; });
  std::sort(by_rank.begin(), by_rank.end(), [&](auto a, auto b) { return ranked[a] > ranked[b]; });
  std::set<std::size_t> first(by_predicted.begin(), by_predicted.begin() + 32);
  CHECK(std::set<std::size_t>(by_rank.begin(), by_rank.begin() + 32) == first);
  std::multiset<float> first_predicted, first_ranked;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (first.count(i)) {
      first_predicted.insert(predicted[i]);
      first_ranked.insert(ranked[i]);
    } else {
      CHECK(ranked[i] == predicted[i]);
    }
  CHECK(first_ranked == first_predicted);
  // Among them, the comparator's order is the measured one as a rule.
  std::vector<std::string> group(32, "w");
  std::vector<double> first_latency;
  std::vector<float> first_score;
  for (std::size_t i : first) {
    first_latency.push_back(latency[i]);
    first_score.push_back(ranked[i]);
  }
  CHECK(costmodel::evaluate_ranking(group, first_latency, first_score).pairwise_accuracy > 0.75);
  // Saved and loaded, it ranks alike; a broken payload is a clear error.
  auto loaded =
      costmodel::load_model(costmodel::save_model(*m, {"xgb-pairs", "t", costmodel::kFeatureVersion, 600, "{}", ""}));
  CHECK(loaded->rank(x) == ranked);
  auto fresh = costmodel::make_model("xgb-pairs");
  ErrorKind k{};
  CHECK(error_of([&] { fresh->load_payload("garbage"); }, &k).find("xgb-pairs/1") != std::string::npos);
  CHECK(k == ErrorKind::InvalidInput);
  const std::string payload = m->payload();
  CHECK(error_of([&] { fresh->load_payload(payload.substr(0, 40)); }).find("cut short") != std::string::npos);
  CHECK(error_of([&] { fresh->load_payload(payload.substr(0, payload.size() - 10)); }).find("rejected") !=
        std::string::npos);
  // A payload rejected midway leaves a loaded model as it was.
  CHECK_THROWS(loaded->load_payload(payload.substr(0, payload.size() - 10)));
  CHECK(loaded->rank(x) == ranked);
  CHECK(m->rank({x[0]}) == m->predict({x[0]}));
}

TEST_CASE("xgb-pairs: the comparator reads a program's nests as its ranker does, in one row") {
  // A ranker saved as pooling by the dominant nest or by max: the comparator fine-tuned on top of
  // each must read the programs alike, or its first picks' order would differ between a program
  // and its pooled row.
  const TwoNests programs = two_nests(5);
  auto trained = costmodel::make_model("xgb", 4);
  trained->fit(synthetic(4, 150, 1));
  for (const std::string pooling : {"dominant", "max"}) {
    CAPTURE(pooling);
    auto ranker = costmodel::make_model("xgb", 4);
    ranker->load_payload(with_pooling(trained->payload(), pooling.c_str()));
    auto m = costmodel::make_model_on("xgb-pairs", std::move(ranker));
    m->fine_tune(synthetic(2, 60, 7));
    const bool by_max = pooling == "max";
    const auto& own = by_max ? programs.as_max : programs.as_dominant;
    const auto& other = by_max ? programs.as_dominant : programs.as_max;
    CHECK(m->rank(programs.two) != m->predict(programs.two));  // the comparator orders them
    CHECK(m->rank(programs.two) == m->rank(own));
    CHECK(m->rank(programs.two) != m->rank(other));
  }
  // A ranker that scores each nest apart (every new one): its comparator, which sees one row per
  // candidate, reads the dominant nest's. With the same ranker read by the dominant nest, the
  // program and its dominant row rank alike.
  auto nests_ranker = costmodel::make_model("xgb", 4);
  nests_ranker->load_payload(trained->payload());
  auto m = costmodel::make_model_on("xgb-pairs", std::move(nests_ranker));
  m->fine_tune(synthetic(2, 60, 7));
  CHECK(m->rank(programs.two) != m->predict(programs.two));
  PairsPayload parts(m->payload());
  parts.ranker = with_pooling(parts.ranker, "dominant");
  auto by_dominant = costmodel::make_model("xgb-pairs");
  by_dominant->load_payload(parts.str());
  CHECK(by_dominant->rank(programs.two) == by_dominant->rank(programs.as_dominant));
  parts.comparator = with_pooling(parts.comparator, "max");
  by_dominant->load_payload(parts.str());
  CHECK(by_dominant->rank(programs.two) != by_dominant->rank(programs.as_dominant));
}

TEST_CASE("xgb-pairs: a comparator saved before it named its pooling reads by max, as it was trained") {
  auto trained = costmodel::make_model("xgb", 4);
  trained->fit(synthetic(4, 150, 1));
  auto ranker = costmodel::make_model("xgb", 4);
  ranker->load_payload(with_pooling(trained->payload(), "max"));
  auto m = costmodel::make_model_on("xgb-pairs", std::move(ranker));
  m->fine_tune(synthetic(2, 60, 7));
  const PairsPayload parts(m->payload());
  auto comparator_named = [&](const char* name) {
    PairsPayload named = parts;
    named.comparator = with_pooling(parts.comparator, name);
    auto loaded = costmodel::make_model("xgb-pairs");
    loaded->load_payload(named.str());
    return loaded;
  };
  const TwoNests programs = two_nests(5);
  const auto ranked = m->rank(programs.two);
  CHECK(comparator_named(nullptr)->rank(programs.two) == ranked);
  CHECK(comparator_named("max")->rank(programs.two) == ranked);
  CHECK(comparator_named("dominant")->rank(programs.two) != ranked);
  ErrorKind k{};
  CHECK(error_of([&] { comparator_named("median"); }, &k) ==
        "xgb-pairs: the comparator: the model pools its rows by 'median', unknown to this build");
  CHECK(k == ErrorKind::InvalidInput);
  // A comparator sees one row per candidate: one said to score nests apart (adding their scores
  // or their times) is refused at load, not failed on its first ranking.
  for (const char* per_nest : {"nests", "nest-times"}) {
    CAPTURE(per_nest);
    CHECK(error_of([&] { comparator_named(per_nest); }, &k) ==
          "xgb-pairs: the comparator reads one row per candidate, not one per nest");
    CHECK(k == ErrorKind::InvalidInput);
  }
}

TEST_CASE("xgb-pairs started from a trained xgb ranks as it does, until fine-tuning brings a comparator") {
  auto xgb = costmodel::make_model("xgb", 4);
  xgb->fit(synthetic(4, 150, 1));
  std::vector<Features> x;
  for (auto& s : synthetic(1, 100, 2)) x.push_back(s.x);
  const std::vector<float> scores = xgb->predict(x);
  auto m = costmodel::make_model_on("xgb-pairs", std::move(xgb));
  CHECK(m->kind() == "xgb-pairs");
  CHECK(m->trained());
  CHECK(m->rank(x) == scores);
  const std::size_t without = m->payload().size();
  m->fine_tune(synthetic(2, 30, 7));
  CHECK(m->payload().size() > without + 1000);  // the comparator's trees
  CHECK(m->rank(x) != m->predict(x));
  // As a search's base: each update starts again from it, and a comparator comes with the records.
  auto ranker = costmodel::make_model("xgb", 4);
  ranker->fit(synthetic(4, 150, 1));
  costmodel::OnlineModel online(costmodel::OnlineModel::FromBase{},
                                costmodel::make_model_on("xgb-pairs", std::move(ranker)), {});
  CHECK(online.rank(x) == scores);
  online.add(synthetic(2, 30, 7));
  CHECK(online.update(8));
  CHECK(online.model().kind() == "xgb-pairs");
  CHECK(online.rank(x) != online.predict(x));
  // Only a trained model of the kind it builds on.
  ErrorKind k{};
  CHECK(error_of([] { costmodel::make_model_on("xgb-pairs", costmodel::make_model("nn")); }, &k) ==
        "xgb-pairs starts from a trained xgb model; given: nn (untrained)");
  CHECK(k == ErrorKind::InvalidInput);
  auto nn = costmodel::make_model("nn");
  nn->fit(synthetic(4, 40, 3));
  CHECK(error_of([&] { costmodel::make_model_on("xgb-pairs", std::move(nn)); }) ==
        "xgb-pairs starts from a trained xgb model; given: nn");
  CHECK(error_of([] { costmodel::make_model_on("xgb-pairs", costmodel::make_model("xgb")); }) ==
        "xgb-pairs starts from a trained xgb model; given: xgb (untrained)");
  CHECK(error_of([] { costmodel::make_model_on("xgb", costmodel::make_model("xgb")); }) ==
        "xgb does not start from a model of another kind");
  CHECK(costmodel::built_on_kind("xgb-pairs") == "xgb");
  CHECK(costmodel::built_on_kind("nn") == "");
}

TEST_CASE("xgb-pairs: records with nothing to compare rank as the ranker does, until fine-tuning brings pairs") {
  // One record per workload: no pair of one workload to learn from.
  std::vector<Sample> single;
  for (auto& s : synthetic(1, 40, 5)) single.push_back({s.x, s.group + std::to_string(single.size()), s.latency_s});
  auto m = costmodel::make_model("xgb-pairs", 3);
  m->fit(single);
  CHECK(m->trained());
  std::vector<Features> x;
  for (auto& s : synthetic(1, 40, 6)) x.push_back(s.x);
  CHECK(m->rank(x) == m->predict(x));
  auto loaded =
      costmodel::load_model(costmodel::save_model(*m, {"xgb-pairs", "t", costmodel::kFeatureVersion, 40, "{}", ""}));
  CHECK(loaded->rank(x) == m->predict(x));
  const std::size_t without = loaded->payload().size();
  loaded->fine_tune(synthetic(2, 30, 7));
  CHECK(loaded->payload().size() > without + 1000);  // the comparator's trees, from the pairs it brought
}
