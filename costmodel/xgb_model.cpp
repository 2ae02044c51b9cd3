// The gradient-boosted ranker: XGBoost's C API over the program features, each nest scored apart
// as a time and the times added (Pooling::NestTimes), or, in models of before, the scores added
// (Pooling::PerNest) or one pooled row (Pooling).
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>

#include "costmodel/kinds.hpp"
#include "costmodel/tree_walk.hpp"
#include "support/error.hpp"
#include "support/parallel.hpp"

namespace tiletune::costmodel {

namespace {

//! The rows XGBoost and CompleteTrees read for candidates x[begin, end), their first `width`
//! features, row-major: one pooled row each, or with a per-nest pooling one per nest (a program
//! of none keeps one row of zeros). Candidate begin + i owns rows [starts[i], starts[i + 1]).
struct DenseRows {
  Pooling how = Pooling::PerNest;
  std::vector<float> data;
  std::vector<std::size_t> starts{0};
  std::size_t rows() const { return starts.back(); }
  std::size_t candidates() const { return starts.size() - 1; }
  //! Each candidate's score from its rows' to out[0, candidates()): their sum, or with
  //! Pooling::NestTimes minus the log of their times added, -log(sum of exp(-score)). With
  //! `row_weight`, each row's derivative of its candidate's score to row_weight[0, rows()): 1 for
  //! a sum, the nest's share of the time (exp(-score) over the sum) for times added.
  void combine(const float* row_scores, float* out, double* row_weight = nullptr) const {
    for (std::size_t i = 0; i < candidates(); ++i) {
      const std::size_t first = starts[i], last = starts[i + 1];
      if (how != Pooling::NestTimes || last - first < 2) {
        out[i] = 0.0f;
        for (std::size_t r = first; r < last; ++r) out[i] += row_scores[r];
        if (row_weight) std::fill(row_weight + first, row_weight + last, 1.0);
        continue;
      }
      double top = -INFINITY;  // the largest exponent, taken out of the sum so that none overflows
      for (std::size_t r = first; r < last; ++r) top = std::max(top, -static_cast<double>(row_scores[r]));
      double total = 0;
      for (std::size_t r = first; r < last; ++r) {
        const double time = std::exp(-row_scores[r] - top);
        total += time;
        if (row_weight) row_weight[r] = time;
      }
      out[i] = static_cast<float>(-(top + std::log(total)));
      if (row_weight)
        for (std::size_t r = first; r < last; ++r) row_weight[r] /= total;
    }
  }
};

DenseRows dense(const std::vector<const Features*>& x, std::size_t begin, std::size_t end, Pooling how,
                std::size_t width) {
  DenseRows d;
  d.how = how;
  d.starts.reserve(end - begin + 1);
  for (std::size_t i = begin; i < end; ++i)
    d.starts.push_back(d.starts.back() + (per_nest(how) ? std::max<std::size_t>(1, x[i]->stages.size()) : 1));
  d.data.assign(d.rows() * width, 0.0f);
  for (std::size_t i = begin; i < end; ++i) {
    float* at = &d.data[d.starts[i - begin] * width];
    if (!per_nest(how))
      x[i]->pool_into(at, how, width);
    else
      for (std::size_t r = 0; r < x[i]->stages.size(); ++r) x[i]->nest_row_into(r, at + r * width, width);
  }
  return d;
}

//! The booster attribute (saved in the payload) naming how a booster's rows are pooled, and its
//! values (read_pooling_attr). xgb models trained before the attribute existed have none and
//! were trained on sums; those trained before feature version 9 pool by max, the shipped ones of
//! version 9 by the dominant nest, then by each nest's score added ("nests"); new ones add the
//! nests' times (Pooling's comment).
constexpr const char* kPoolingAttr = "tiletune_pooling";
constexpr std::pair<Pooling, const char*> kPoolingNames[] = {{Pooling::Sum, "sum"},
                                                             {Pooling::Max, "max"},
                                                             {Pooling::Dominant, "dominant"},
                                                             {Pooling::PerNest, "nests"},
                                                             {Pooling::NestTimes, "nest-times"}};
constexpr Pooling kNewModelPooling = Pooling::NestTimes;

//! Owns a DMatrix of DenseRows.
class Matrix {
 public:
  Matrix(const DenseRows& d, std::size_t width) {
    check_xgboost(XGDMatrixCreateFromMat(d.data.data(), d.rows(), width, NAN, &handle_), ErrorKind::Internal,
                  "creating a matrix");
  }
  ~Matrix() {
    if (handle_) XGDMatrixFree(handle_);
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  Matrix(Matrix&& o) noexcept : handle_(o.handle_) { o.handle_ = nullptr; }
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

// Hyperparameters, for a few hundred to a few thousand samples of ~70 features:
// - A pairwise loss learns orderings within a workload, which is all the search asks of it;
//   absolute latencies differ by orders of magnitude between workloads and would dominate a
//   regression loss. It is XGBoost's rank:pairwise (pairwise logistic), computed here (PairLoss)
//   over every pair of a workload's records, each pair of one weight. Pairs weighted by their
//   latencies' gap (1 - exp(-ln(ratio) / 0.3), so that near ties, which timing again often
//   flips, weighed little) ranked the corpus's folds 0.004 better but picked worse kernels where
//   a search's candidates crowd near the best: on the search bench's five held-out ops (one
//   sitting, one database, the same fine-tuning and cold starts) the shipped model's first 16
//   trials beat a cold start's on 2 of 5 ops, a model trained with every pair weighing one on
//   5 of 5, and the best-ranked of 16,361 of the bench's records was 0.71 of the best's speed
//   against 0.93 (docs/cost-models.md: three models in one sitting).
// - eta 0.2 is the value TVM's XGBoost tuners settled on for schedule features. Depth 6 and 150
//   rounds: on `tiletune model eval` (12 workloads, 1264 records) they rank as well as depth 8 and
//   200 rounds (held-out pairwise 0.691 vs 0.689, top-5 0.89 vs 0.91) and predict 10,000
//   candidates in 25 ms instead of 84 ms, which the search spends thousands of times.
// - min_child_weight 0 and gamma 0.001 let small groups split at all (pairwise hessians are tiny).
// - subsample 1: training sets are small and rankings are needed to be deterministic per seed.
// - nthread 1: OpenMP worker threads spin after each parallel region and take the core the
//   measurements, the compiler and the daemon need (and the featurization that follows a
//   prediction: 30 ms for 10,000 candidates after one, 21 ms without); one thread trains these
//   sizes in < 1 s, and predict slices its rows over plain threads, which end with the call.
constexpr int kRounds = 150;
const std::pair<const char*, const char*> kParams[] = {
    {"objective", "rank:pairwise"},  // scores as is; PairLoss gives the gradients
    {"eta", "0.2"},
    {"max_depth", "6"},
    {"min_child_weight", "0"},
    {"gamma", "0.001"},
    {"lambda", "1"},
    {"subsample", "1"},
    {"tree_method", "hist"},
    {"nthread", "1"},
    {"verbosity", "0"},
};

//! The training pairs: a record is paired with every other of its workload, or, in a workload of
//! more records (a long tuning run's thousands), draws kPartners of them at random once per
//! training (and is drawn about as often).
constexpr std::size_t kPartners = 31;
//! Pairs' weights, scaled so that a record's pairs weigh this many pairs of weight 1 in all, in
//! a workload of any size. 4, 8 and 16 ranked within 0.003 of each other (model eval, corpora
//! v1 and v2, measured with pairs weighted by their gap).
constexpr double kPairsPerRecord = 4;

//! XGBoost's pairwise logistic loss over the pairs of each workload's records.
class PairLoss {
 public:
  PairLoss(const Grouped& g, std::uint64_t seed) : records_(g.labels.size()) {
    std::mt19937_64 rng(seed);
    for (std::size_t at = 0, gi = 0; gi < g.group_sizes.size(); at += g.group_sizes[gi++]) {
      const std::size_t size = g.group_sizes[gi];
      if (size < 2) continue;
      auto add = [&](std::size_t a, std::size_t b, double norm) {
        const float la = g.labels[a], lb = g.labels[b];  // relative speeds: 0 failed
        if (la == lb) return;
        const std::size_t faster = la > lb ? a : b, slower = la > lb ? b : a;
        pairs_.push_back(
            {static_cast<std::uint32_t>(faster), static_cast<std::uint32_t>(slower), static_cast<float>(norm)});
      };
      if (size - 1 <= kPartners) {
        // Every pair once: each record is in size - 1 of them.
        for (std::size_t a = at; a < at + size; ++a)
          for (std::size_t b = a + 1; b < at + size; ++b) add(a, b, kPairsPerRecord / static_cast<double>(size - 1));
      } else {
        // Each record draws kPartners others, and is drawn about as often.
        std::uniform_int_distribution<std::size_t> other(0, size - 2);
        for (std::size_t a = at; a < at + size; ++a)
          for (std::size_t k = 0; k < kPartners; ++k) {
            std::size_t b = at + other(rng);
            add(a, b >= a ? b + 1 : b, kPairsPerRecord / (2.0 * kPartners));
          }
      }
    }
  }

  //! Per record, the loss's gradient and hessian at the scores.
  void gradients(const float* score, std::vector<float>& grad, std::vector<float>& hess) const {
    grad.assign(records_, 0.0f);
    hess.assign(records_, 1e-6f);  // a record of no pair moves no leaf
    for (const Pair& p : pairs_) {
      const double right = 1.0 / (1.0 + std::exp(static_cast<double>(score[p.slower]) - score[p.faster]));
      const double g = (right - 1.0) * p.weight, h = 2.0 * std::max(right * (1.0 - right), 1e-16) * p.weight;
      grad[p.faster] += static_cast<float>(g);
      grad[p.slower] -= static_cast<float>(g);
      hess[p.faster] += static_cast<float>(h);
      hess[p.slower] += static_cast<float>(h);
    }
  }

 private:
  struct Pair {
    std::uint32_t faster, slower;
    float weight;
  };
  std::size_t records_;
  std::vector<Pair> pairs_;
};

//! Plain prediction with every tree; no value is missing (the features are finite).
constexpr const char* kPredictConfig =
    R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "missing": NaN, "cache_id": 0})";

class XgbModel final : public CostModel {
 public:
  explicit XgbModel(std::uint64_t seed) : seed_(seed) {
    static std::once_flag quiet;
    std::call_once(quiet, [] { XGBSetGlobalConfig(R"({"verbosity": 0})"); });
  }
  ~XgbModel() override { reset(); }

  std::string kind() const override { return "xgb"; }
  bool trained() const override { return booster_ != nullptr; }
  std::size_t width() const override { return width_; }

  void fit(const std::vector<Sample>& samples) override {
    if (samples.empty()) throw_error(ErrorKind::InvalidInput, "xgb: no samples to train on");
    Grouped g = group_samples(samples);
    auto [m, d] = training_matrix(g, kNewModelPooling, feature_count());
    reset();
    pooling_ = kNewModelPooling;  // before anything can throw: a booster left half-trained pools so too
    width_ = feature_count();
    DMatrixHandle train[] = {m.get()};
    check_xgboost(XGBoosterCreate(train, 1, &booster_), ErrorKind::Internal, "creating a booster");
    write_pooling_attr(booster_, pooling_);
    // A candidate's score comes from its nests' (Pooling::NestTimes): a base score is a factor of
    // every nest's time, no help; where a model adds the scores (PerNest) it would count once per
    // nest, and the programs of one workload differ in nests (an inlined stage has none).
    check_xgboost(XGBoosterSetParam(booster_, "base_score", "0"), ErrorKind::Internal, "base score");
    boost(m, d, g, 0, kRounds);
    compile_trees(payload());
  }

  void fine_tune(const std::vector<Sample>& samples) override {
    if (!booster_) throw_error(ErrorKind::Internal, "xgb: fine-tuning an untrained model");
    if (samples.empty()) return;
    Grouped g = group_samples(samples);
    auto [m, d] = training_matrix(g, pooling_, width_);  // the base's trees read its pooling and width
    int done = 0;
    check_xgboost(XGBoosterBoostedRounds(booster_, &done), ErrorKind::Internal, "reading the rounds");
    trees_.reset();  // until the new trees are laid out: a failure midway leaves XGBoost to score them
    // New trees fit what the base's trees get wrong on these samples.
    boost(m, d, g, done, xgb_fine_tune_rounds(samples.size()));
    compile_trees(payload());
  }

  std::vector<float> predict(const std::vector<Features>& x) const override {
    if (!booster_) throw_error(ErrorKind::Internal, "xgb: predict before training");
    if (x.empty()) return {};
    // In slices on all cores, each pooling its own rows. The compiled trees score them when
    // they hold the model; else XGBoost does, in place (no DMatrix to build), each call on one
    // thread (see kParams' nthread): in-place prediction is thread-safe and keeps its output
    // per calling thread.
    std::vector<const Features*> rows;
    rows.reserve(x.size());
    for (auto& f : x) {
      for (auto& stage : f.stages) check_feature_row(stage);  // here, so that slices cannot throw
      rows.push_back(&f);
    }
    std::vector<float> scores(x.size());
    std::mutex error_lock;
    std::string error;  // of any slice
    for_slices(x.size(), 1024, [&](size_t begin, size_t end) {
      const DenseRows d = dense(rows, begin, end, pooling_, width_);
      // Rows of one nest each are scored in place; those of programs of several, then combined.
      const bool per_row = d.rows() != d.candidates();
      std::vector<float> row_scores(per_row ? d.rows() : 0);
      float* out = per_row ? row_scores.data() : &scores[begin];
      std::string why;
      if (trees_)
        trees_->predict(d.data.data(), d.rows(), out);
      else
        why = xgb_predict_dense(booster_, d.data.data(), d.rows(), width_, out);
      if (!why.empty()) {
        std::lock_guard<std::mutex> hold(error_lock);
        error = std::move(why);
        return;
      }
      if (per_row) d.combine(out, &scores[begin]);
    });
    if (!error.empty()) throw_error(ErrorKind::Internal, "XGBoost: predicting: " + error);
    return scores;
  }

  Pooling pooling() const { return pooling_; }

  std::string payload() const override {
    bst_ulong n = 0;
    const char* bytes = nullptr;
    check_xgboost(XGBoosterSaveModelToBuffer(booster_, R"({"format": "ubj"})", &n, &bytes), ErrorKind::Internal, "saving");
    return std::string(bytes, n);
  }

  void load_payload(const std::string& bytes) override {
    reset();
    check_xgboost(XGBoosterCreate(nullptr, 0, &booster_), ErrorKind::Internal, "creating a booster");
    int rc = XGBoosterLoadModelFromBuffer(booster_, bytes.data(), bytes.size());
    if (rc != 0) {
      std::string why = XGBGetLastError();
      reset();
      throw_error(ErrorKind::InvalidInput, "XGBoost rejected the model: " + why);
    }
    // A loaded model keeps no training parameters: it predicts on one thread too.
    check_xgboost(XGBoosterSetParam(booster_, "nthread", "1"), ErrorKind::Internal, "parameter nthread");
    try {
      pooling_ = read_pooling_attr(booster_, Pooling::Sum);
    } catch (const Error&) {
      reset();
      throw;
    }
    // A model of an earlier feature version reads the prefix of each row it was trained on.
    bst_ulong features = 0;
    try {
      check_xgboost(XGBoosterGetNumFeature(booster_, &features), ErrorKind::InvalidInput, "reading the features");
      check_payload_width(features, "xgb");
    } catch (const Error&) {
      reset();
      throw;
    }
    width_ = features;
    compile_trees(bytes);  // payload()'s UBJSON, not saved again; another format is scored by XGBoost
  }

 private:
  //! The samples' rows with their labels and groups (in rows): what training reads.
  static std::pair<Matrix, DenseRows> training_matrix(const Grouped& g, Pooling how, std::size_t width) {
    std::vector<const Features*> rows;
    for (auto* s : g.samples) rows.push_back(&s->x);
    DenseRows d = dense(rows, 0, rows.size(), how, width);
    Matrix m(d, width);
    std::vector<float> labels(d.rows());
    for (std::size_t i = 0; i < g.labels.size(); ++i)
      std::fill(labels.begin() + d.starts[i], labels.begin() + d.starts[i + 1], g.labels[i]);
    std::vector<unsigned> groups;
    for (std::size_t at = 0, gi = 0; gi < g.group_sizes.size(); at += g.group_sizes[gi++])
      groups.push_back(static_cast<unsigned>(d.starts[at + g.group_sizes[gi]] - d.starts[at]));
    check_xgboost(XGDMatrixSetFloatInfo(m.get(), "label", labels.data(), labels.size()), ErrorKind::Internal, "labels");
    check_xgboost(XGDMatrixSetUIntInfo(m.get(), "group", groups.data(), groups.size()), ErrorKind::Internal, "groups");
    return {std::move(m), std::move(d)};
  }

  //! Rounds [first, first + rounds) on the matrix of `g`'s samples; parameters are set each
  //! time, since a loaded model keeps its trees but not its training parameters.
  void boost(const Matrix& m, const DenseRows& d, const Grouped& g, int first, int rounds) {
    for (auto& [k, v] : kParams)
      check_xgboost(XGBoosterSetParam(booster_, k, v), ErrorKind::Internal, std::string("parameter ") + k);
    check_xgboost(XGBoosterSetParam(booster_, "seed", std::to_string(seed_ % 2147483647).c_str()), ErrorKind::Internal, "seed");
    const PairLoss loss(g, seed_);
    std::vector<float> candidate_score(d.candidates()), grad, hess, row_grad(d.rows()), row_hess(d.rows());
    std::vector<double> weight(d.rows());
    for (int i = first; i < first + rounds; ++i) {
      bst_ulong n = 0;
      const float* score = nullptr;
      check_xgboost(XGBoosterPredict(booster_, m.get(), 0, 0, /*training=*/1, &n, &score), ErrorKind::Internal,
            "scoring round " + std::to_string(i));
      if (n != d.rows()) throw_error(ErrorKind::Internal, "XGBoost: scores of the wrong shape while training");
      // Each row takes its candidate's gradient times how much the candidate's score moves with
      // the row's (Gauss-Newton: the hessian times its square).
      d.combine(score, candidate_score.data(), weight.data());
      loss.gradients(candidate_score.data(), grad, hess);
      for (std::size_t c = 0; c < d.candidates(); ++c)
        for (std::size_t r = d.starts[c]; r < d.starts[c + 1]; ++r) {
          row_grad[r] = static_cast<float>(grad[c] * weight[r]);
          row_hess[r] = static_cast<float>(std::max(hess[c] * weight[r] * weight[r], 1e-6));
        }
      check_xgboost(XGBoosterBoostOneIter(booster_, m.get(), row_grad.data(), row_hess.data(), n), ErrorKind::Internal,
                    "training round " + std::to_string(i));
    }
  }

  //! The trees of the model saved as `ubj`, laid out for scoring (tree_walk.hpp); XGBoost scores
  //! a model they cannot hold.
  void compile_trees(const std::string& ubj) {
    trees_ = CompleteTrees::from_ubjson(ubj);
    if (trees_ && trees_->features() != width_) trees_.reset();
  }

  void reset() {
    if (booster_) XGBoosterFree(booster_);
    booster_ = nullptr;
    trees_.reset();
  }
  std::uint64_t seed_;
  Pooling pooling_ = kNewModelPooling;   //!< how the trees read a candidate's rows (kPoolingAttr)
  std::size_t width_ = feature_count();  //!< features of each row the trees read (CostModel::width)
  BoosterHandle booster_ = nullptr;
  std::optional<CompleteTrees> trees_;
};

}  // namespace

std::string xgb_predict_dense(void* booster, const float* data, std::size_t rows, std::size_t width, float* out) {
  const std::string array = R"({"data": [)" + std::to_string(reinterpret_cast<std::uintptr_t>(data)) +
                            R"(, true], "shape": [)" + std::to_string(rows) + ", " + std::to_string(width) +
                            R"(], "typestr": "<f4", "version": 3})";
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* scores = nullptr;
  if (XGBoosterPredictFromDense(booster, array.c_str(), kPredictConfig, nullptr, &shape, &dims, &scores) != 0)
    return XGBGetLastError();
  if (dims == 0 || shape[0] != rows) return "scores of the wrong shape for " + std::to_string(rows) + " rows";
  std::copy(scores, scores + rows, out);
  return "";
}

void check_xgboost(int rc, ErrorKind kind, const std::string& what) {
  if (rc != 0) throw_error(kind, "XGBoost: " + what + ": " + XGBGetLastError());
}

std::unique_ptr<CostModel> make_xgb_model(std::uint64_t seed) { return std::make_unique<XgbModel>(seed); }

Pooling read_pooling_attr(void* booster, Pooling absent) {
  const char* value = nullptr;
  int found = 0;
  check_xgboost(XGBoosterGetAttr(booster, kPoolingAttr, &value, &found), ErrorKind::Internal, "reading the pooling");
  if (!found) return absent;
  const std::string name = value;
  for (auto [pooling, known] : kPoolingNames)
    if (name == known) return pooling;
  throw_error(ErrorKind::InvalidInput, "the model pools its rows by '" + name + "', unknown to this build");
}

void write_pooling_attr(void* booster, Pooling how) {
  for (auto [pooling, name] : kPoolingNames)
    if (pooling == how) {
      check_xgboost(XGBoosterSetAttr(booster, kPoolingAttr, name), ErrorKind::Internal, "setting the pooling");
      return;
    }
  throw_error(ErrorKind::Internal, "xgb: a pooling with no name");
}

Pooling xgb_pooling(const CostModel& xgb) {
  auto* model = dynamic_cast<const XgbModel*>(&xgb);
  if (!model) throw_error(ErrorKind::Internal, "the pooling of a " + xgb.kind() + " model asked of xgb");
  return model->pooling();
}

int xgb_fine_tune_rounds(std::size_t samples) {
  const std::size_t steps = std::max<std::size_t>(1, (samples + kXgbFineTuneStep - 1) / kXgbFineTuneStep);
  return static_cast<int>(std::min<std::size_t>(steps * kXgbFineTuneRounds, kRounds));
}

}  // namespace tiletune::costmodel
