// "xgb-pairs": the xgb ranker, whose first picks among one workload's candidates a comparator
// orders again. The comparator is gradient-boosted trees on a pair of candidates (the difference
// of their rows, pooled as the ranker pooled them when the comparator was made, and their mean)
// that give the chance the first is the faster. A model of one candidate at a time has to place
// every config of every workload on one scale; the comparator only has to say which of two
// configs of one workload is faster, which is what a search asks. Measured on the Intel Xeon's
// corpus (docs/cost-models.md): held-out sizes 0.880 -> 0.895, held-out ops 0.854 -> 0.870, in a
// throwaway harness before this model existed.
#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>

#include "costmodel/kinds.hpp"
#include "support/error.hpp"

namespace tiletune::costmodel {

namespace {

//! rank(): how many of the xgb ranker's first picks the comparator orders. All of a corpus
//! workload's 32 records; for a search's population of hundreds, the candidates its batch is
//! drawn from. 32 x 31 comparisons take about a millisecond.
constexpr std::size_t kCompared = 32;
//! The comparator's training pairs: each record with every other of its workload, or with this
//! many drawn at random in a larger workload (as the xgb ranker's PairLoss draws them).
constexpr std::size_t kPartners = 31;
constexpr int kComparatorRounds = 150;
// Depth 8: on the Intel Xeon's corpus, depth 8 and 150 rounds ranked held-out sizes at 0.895,
// depth 10 with eta 0.1 and 300 rounds at 0.894, 300 rounds of depth 8 at 0.895 (throwaway
// harness). Pairs weighted by their latencies' gap ranked 0.893. nthread 1 for the reasons
// of the xgb ranker's parameters (xgb_model.cpp).
const std::pair<const char*, const char*> kComparatorParams[] = {
    {"objective", "binary:logistic"}, {"eta", "0.2"},        {"max_depth", "8"}, {"min_child_weight", "1"},
    {"tree_method", "hist"},          {"nthread", "1"},      {"verbosity", "0"},
};
constexpr const char* kPayloadTag = "xgb-pairs/1";

//! A pair's row: the first's pooled row less the second's, then their mean.
void pair_row(const float* a, const float* b, std::size_t width, float* out) {
  for (std::size_t i = 0; i < width; ++i) {
    out[i] = a[i] - b[i];
    out[width + i] = 0.5f * (a[i] + b[i]);
  }
}

//! How a new comparator reads a candidate: as its ranker does, in one row (a ranker that scores
//! each nest apart reads the program by its dominant nest here).
Pooling comparator_pooling_of(Pooling ranker) { return per_nest(ranker) ? Pooling::Dominant : ranker; }

//! The pooled rows of `x`, `width` features each.
std::vector<float> pooled_rows(const std::vector<const Features*>& x, Pooling how, std::size_t width) {
  std::vector<float> rows(x.size() * width);
  for (std::size_t i = 0; i < x.size(); ++i) x[i]->pool_into(&rows[i * width], how, width);
  return rows;
}

class PairModel final : public CostModel {
 public:
  PairModel(std::uint64_t seed, std::unique_ptr<CostModel> ranker)
      : seed_(seed), ranker_(ranker ? std::move(ranker) : make_xgb_model(seed)) {}
  ~PairModel() override { reset_comparator(); }

  std::string kind() const override { return "xgb-pairs"; }
  //! Trained once the ranker is: the comparator comes with the first records that have two of one
  //! workload at different speeds, and until then rank() is the ranker's.
  bool trained() const override { return ranker_->trained(); }
  std::size_t width() const override { return ranker_->width(); }

  void fit(const std::vector<Sample>& samples) override {
    ranker_->fit(samples);
    reset_comparator();
    comparator_pooling_ = comparator_pooling_of(xgb_pooling(*ranker_));
    train_comparator(training_pairs(samples), kComparatorRounds);
  }

  void fine_tune(const std::vector<Sample>& samples) override {
    if (!trained()) throw_error(ErrorKind::Internal, "xgb-pairs: fine-tuning an untrained model");
    ranker_->fine_tune(samples);
    if (!comparator_) comparator_pooling_ = comparator_pooling_of(xgb_pooling(*ranker_));  // a loaded one keeps its own
    train_comparator(training_pairs(samples), comparator_ ? xgb_fine_tune_rounds(samples.size()) : kComparatorRounds);
  }

  std::vector<float> predict(const std::vector<Features>& x) const override {
    if (!trained()) throw_error(ErrorKind::Internal, "xgb-pairs: predict before training");
    return ranker_->predict(x);
  }

  std::vector<float> rank(const std::vector<Features>& x) const override {
    std::vector<float> score = predict(x);
    const std::size_t n = std::min(kCompared, x.size());
    if (n < 2 || !comparator_) return score;
    std::vector<std::size_t> order(x.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
    std::vector<const Features*> top;
    for (std::size_t i = 0; i < n; ++i) top.push_back(&x[order[i]]);
    const std::size_t w = width();
    const std::vector<float> rows = pooled_rows(top, comparator_pooling_, w);
    std::vector<float> pairs(n * n * 2 * w);  // every ordered pair (a, b); a == b is scored and unused
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b) pair_row(&rows[a * w], &rows[b * w], w, &pairs[(a * n + b) * 2 * w]);
    const std::vector<float> p = compare(pairs, n * n);
    // Each one's mean chance of beating the others, each pair asked both ways so that the order
    // does not depend on which comes first.
    std::vector<double> wins(n, 0.0);
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b)
        if (a != b) wins[a] += 0.5 * (p[a * n + b] + 1.0 - p[b * n + a]);
    // The first picks' own scores (order[0 .. n) holds them best first) dealt out again in the
    // comparator's order: the scores stay the ranker's, so that those of separate calls (a
    // search's generations) still compare, and the first picks stay above the others.
    std::vector<std::size_t> by_wins(n);
    std::iota(by_wins.begin(), by_wins.end(), 0);
    std::stable_sort(by_wins.begin(), by_wins.end(), [&](std::size_t a, std::size_t b) { return wins[a] > wins[b]; });
    std::vector<float> first(n);
    for (std::size_t i = 0; i < n; ++i) first[i] = score[order[i]];
    for (std::size_t i = 0; i < n; ++i) score[order[by_wins[i]]] = first[i];
    return score;
  }

  std::string payload() const override {
    // The tag, the ranker's size, the ranker's payload, then the comparator's trees (none yet: empty).
    const std::string ranker = ranker_->payload();
    bst_ulong size = 0;
    const char* bytes = nullptr;
    if (comparator_)
      check_xgboost(XGBoosterSaveModelToBuffer(comparator_, R"({"format": "ubj"})", &size, &bytes),
                    ErrorKind::Internal, "saving the comparator");
    return std::string(kPayloadTag) + "\n" + std::to_string(ranker.size()) + "\n" + ranker +
           (comparator_ ? std::string(bytes, size) : std::string());
  }

  //! All or nothing: a payload rejected midway leaves the model as it was.
  void load_payload(const std::string& bytes) override {
    const std::string tag = std::string(kPayloadTag) + "\n";
    const std::size_t eol = bytes.find('\n', tag.size());
    if (bytes.compare(0, tag.size(), tag) != 0 || eol == std::string::npos)
      throw_error(ErrorKind::InvalidInput, "xgb-pairs rejected the payload: it does not start with '" + std::string(kPayloadTag) + "'");
    std::size_t ranker_size = 0;
    try {
      std::size_t used = 0;
      ranker_size = std::stoull(bytes.substr(tag.size(), eol - tag.size()), &used);
      if (used != eol - tag.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw_error(ErrorKind::InvalidInput, "xgb-pairs rejected the payload: its ranker's size is not a number");
    }
    if (ranker_size > bytes.size() - eol - 1)
      throw_error(ErrorKind::InvalidInput, "xgb-pairs rejected the payload: it is cut short");
    auto ranker = make_xgb_model(seed_);
    ranker->load_payload(bytes.substr(eol + 1, ranker_size));
    const std::string comparator = bytes.substr(eol + 1 + ranker_size);
    BoosterHandle loaded = nullptr;
    Pooling pooling = comparator_pooling_of(xgb_pooling(*ranker));
    if (!comparator.empty()) {
      check_xgboost(XGBoosterCreate(nullptr, 0, &loaded), ErrorKind::Internal, "creating the comparator");
      std::string why;
      bst_ulong features = 0;
      if (XGBoosterLoadModelFromBuffer(loaded, comparator.data(), comparator.size()) != 0)
        why = std::string("XGBoost rejected the comparator: ") + XGBGetLastError();
      else if (XGBoosterGetNumFeature(loaded, &features) != 0)
        why = std::string("XGBoost: reading the comparator's features: ") + XGBGetLastError();
      else if (features != 2 * ranker->width())
        why = "xgb-pairs: the comparator reads " + std::to_string(features) + " features, not twice the ranker's " +
              std::to_string(ranker->width());
      else if (XGBoosterSetParam(loaded, "nthread", "1") != 0)
        why = std::string("XGBoost: parameter nthread: ") + XGBGetLastError();
      if (why.empty()) {
        try {
          // Comparators saved before the attribute pooled by max.
          pooling = read_pooling_attr(loaded, Pooling::Max);
          if (per_nest(pooling)) why = "xgb-pairs: the comparator reads one row per candidate, not one per nest";
        } catch (const Error& e) {
          why = std::string("xgb-pairs: the comparator: ") + e.what();
        }
      }
      if (!why.empty()) {
        XGBoosterFree(loaded);
        throw_error(ErrorKind::InvalidInput, why);
      }
    }
    ranker_ = std::move(ranker);
    reset_comparator();
    comparator_ = loaded;
    comparator_pooling_ = pooling;
  }

 private:
  //! Training rows of the comparator: per pair of one workload's records of different speed,
  //! its row in one order or the other (alternately, so that half the labels are 1). Both orders
  //! of every pair took half as long again to train for next to no gain (docs/cost-models.md).
  struct Pairs {
    std::size_t width = 0;
    std::vector<float> rows, labels;
    DMatrixHandle matrix() const {
      DMatrixHandle m = nullptr;
      check_xgboost(XGDMatrixCreateFromMat(rows.data(), labels.size(), 2 * width, NAN, &m), ErrorKind::Internal,
                    "creating the comparator's matrix");
      if (XGDMatrixSetFloatInfo(m, "label", labels.data(), labels.size()) != 0) {
        const std::string why = XGBGetLastError();
        XGDMatrixFree(m);
        throw_error(ErrorKind::Internal, "XGBoost: the comparator's labels: " + why);
      }
      return m;
    }
  };

  Pairs training_pairs(const std::vector<Sample>& samples) const {
    const Grouped g = group_samples(samples);
    Pairs p;
    p.width = width();
    std::vector<const Features*> x;
    for (const Sample* s : g.samples) x.push_back(&s->x);
    const std::vector<float> rows = pooled_rows(x, comparator_pooling_, p.width);
    std::mt19937_64 rng(seed_);
    bool flip = false;
    auto add = [&](std::size_t a, std::size_t b) {
      const float la = g.labels[a], lb = g.labels[b];  // relative speeds: 0 failed
      if (la == lb) return;
      if (flip) std::swap(a, b);
      flip = !flip;
      const std::size_t at = p.rows.size();
      p.rows.resize(at + 2 * p.width);
      pair_row(&rows[a * p.width], &rows[b * p.width], p.width, &p.rows[at]);
      p.labels.push_back(g.labels[a] > g.labels[b] ? 1.0f : 0.0f);
    };
    for (std::size_t at = 0, gi = 0; gi < g.group_sizes.size(); at += g.group_sizes[gi++]) {
      const std::size_t size = g.group_sizes[gi];
      if (size < 2) continue;
      if (size - 1 <= kPartners) {
        for (std::size_t a = at; a < at + size; ++a)
          for (std::size_t b = a + 1; b < at + size; ++b) add(a, b);
      } else {
        std::uniform_int_distribution<std::size_t> other(0, size - 2);
        for (std::size_t a = at; a < at + size; ++a)
          for (std::size_t k = 0; k < kPartners / 2 + 1; ++k) {
            const std::size_t b = at + other(rng);
            add(a, b >= a ? b + 1 : b);
          }
      }
    }
    return p;
  }

  //! `rounds` more rounds of the comparator on `pairs` (a new comparator if there is none);
  //! nothing without pairs. Parameters are set each time, since a loaded comparator keeps its
  //! trees but not its training parameters.
  void train_comparator(const Pairs& pairs, int rounds) {
    if (pairs.labels.empty()) return;  // no two records of one workload differ in speed
    struct Owned {
      DMatrixHandle handle;
      ~Owned() { XGDMatrixFree(handle); }
    } m{pairs.matrix()};
    int first = 0;
    if (comparator_)
      check_xgboost(XGBoosterBoostedRounds(comparator_, &first), ErrorKind::Internal, "reading the rounds");
    else {
      check_xgboost(XGBoosterCreate(&m.handle, 1, &comparator_), ErrorKind::Internal, "creating the comparator");
      write_pooling_attr(comparator_, comparator_pooling_);
    }
    for (auto& [k, v] : kComparatorParams)
      check_xgboost(XGBoosterSetParam(comparator_, k, v), ErrorKind::Internal, std::string("parameter ") + k);
    check_xgboost(XGBoosterSetParam(comparator_, "seed", std::to_string(seed_ % 2147483647).c_str()),
                  ErrorKind::Internal, "seed");
    for (int i = first; i < first + rounds; ++i)
      check_xgboost(XGBoosterUpdateOneIter(comparator_, i, m.handle), ErrorKind::Internal,
                    "comparator round " + std::to_string(i));
  }

  //! The comparator's chance that each row's first candidate is the faster.
  std::vector<float> compare(const std::vector<float>& rows, std::size_t count) const {
    std::vector<float> chance(count);
    const std::string why = xgb_predict_dense(comparator_, rows.data(), count, 2 * width(), chance.data());
    if (!why.empty()) throw_error(ErrorKind::Internal, "XGBoost: comparing: " + why);
    return chance;
  }

  void reset_comparator() {
    if (comparator_) XGBoosterFree(comparator_);
    comparator_ = nullptr;
  }

  std::uint64_t seed_;
  std::unique_ptr<CostModel> ranker_;  //!< the xgb ranker: predict(), and rank()'s first picks
  BoosterHandle comparator_ = nullptr;
  //! How the comparator reads a candidate's rows: as the ranker did when the comparator was made
  //! (kept in its payload; one saved before that pooled by max, whatever its ranker).
  Pooling comparator_pooling_ = Pooling::Max;
};

}  // namespace

std::unique_ptr<CostModel> make_pair_model(std::uint64_t seed, std::unique_ptr<CostModel> ranker) {
  return std::make_unique<PairModel>(seed, std::move(ranker));
}

}  // namespace tiletune::costmodel
