#include "tuner/model_eval.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "support/error.hpp"
#include "support/hash.hpp"

namespace tiletune::tuner {

namespace {

//! One fold: which workloads are tested; the rest (or, for ops, the other ops) train.
struct Fold {
  std::set<std::string> test;
  std::set<std::string> train;
};

//! Held-out splits are k-fold: every op (or, for sizes, every workload of an op that has
//! several) lands in one of kFolds folds by a hash of its name; a fold's model trains on
//! everything outside its test set. With fewer ops than folds, one op per fold.
constexpr std::size_t kFolds = 5;

//! The two splits' names, which the learning curve's rows extend.
const std::string kHeldOutSizes = "held-out sizes", kHeldOutOps = "held-out ops";

std::vector<Fold> folds_for(const Dataset& data, const std::string& split) {
  std::map<std::string, std::vector<std::string>> by_op;
  for (auto& [key, row] : data.workloads) by_op[row.op_name].push_back(key);
  const bool sizes = split == kHeldOutSizes;
  // The units a fold holds out: ops, or the workloads of ops with several sizes.
  std::vector<std::vector<std::string>> units;
  for (auto& [op, keys] : by_op) {
    if (!sizes) {
      units.push_back(keys);
    } else if (keys.size() >= 2) {
      for (auto& k : keys) units.push_back({k});
    }
  }
  std::size_t k = std::min(kFolds, units.size());
  std::vector<Fold> out(k);
  for (std::size_t i = 0; i < units.size(); ++i) {
    const auto& unit = units[i];
    std::size_t f = units.size() <= kFolds ? i : fnv1a64(sizes ? unit[0] : data.workloads.at(unit[0]).op_name) % k;
    out[f].test.insert(unit.begin(), unit.end());
  }
  std::vector<Fold> kept;
  for (auto& fold : out) {
    for (auto& [key, row] : data.workloads)
      if (!fold.test.count(key)) fold.train.insert(key);
    if (!fold.test.empty() && !fold.train.empty()) kept.push_back(std::move(fold));
  }
  return kept;
}

costmodel::RankingMetrics test_on(const std::vector<const costmodel::Sample*>& test, const std::vector<float>& score) {
  std::vector<std::string> group;
  std::vector<double> latency;
  for (auto* s : test) {
    group.push_back(s->group);
    latency.push_back(s->latency_s);
  }
  return costmodel::evaluate_ranking(group, latency, score);
}

//! The model's scores of `test` (whose features `x` holds, in order), each workload's candidates
//! ranked together (CostModel::rank), as a search ranks its own.
std::vector<float> rank_by_workload(const costmodel::CostModel& model, const std::vector<const costmodel::Sample*>& test,
                                    const std::vector<costmodel::Features>& x) {
  std::map<std::string, std::vector<std::size_t>> of_workload;
  for (std::size_t i = 0; i < test.size(); ++i) of_workload[test[i]->group].push_back(i);
  std::vector<float> score(test.size());
  for (auto& [key, at] : of_workload) {
    std::vector<costmodel::Features> own;
    for (std::size_t i : at) own.push_back(x[i]);
    const std::vector<float> s = model.rank(own);
    for (std::size_t k = 0; k < at.size(); ++k) score[at[k]] = s[k];
  }
  return score;
}

//! Metrics of each op's workloads among `test`, for EvalRow::by_op: added to `parts`.
void test_by_op(const Dataset& data, const std::vector<const costmodel::Sample*>& test, const std::vector<float>& score,
                std::map<std::string, std::vector<costmodel::RankingMetrics>>& parts) {
  std::map<std::string, std::pair<std::vector<const costmodel::Sample*>, std::vector<float>>> of_op;
  for (std::size_t i = 0; i < test.size(); ++i) {
    auto& [samples, scores] = of_op[data.workloads.at(test[i]->group).op_name];
    samples.push_back(test[i]);
    scores.push_back(score[i]);
  }
  for (auto& [op, subset] : of_op) parts[op].push_back(test_on(subset.first, subset.second));
}

std::map<std::string, costmodel::RankingMetrics> combine_by_op(
    const std::map<std::string, std::vector<costmodel::RankingMetrics>>& parts) {
  std::map<std::string, costmodel::RankingMetrics> out;
  for (auto& [op, p] : parts) out[op] = costmodel::combine(p);
  return out;
}

std::vector<float> random_scores(std::size_t n, std::mt19937_64& rng) {
  std::vector<float> s(n);
  std::uniform_real_distribution<float> u(0, 1);
  for (auto& x : s) x = u(rng);
  return s;
}

//! Per-model metrics of a split, for EvalRow.
using Parts = std::map<std::string, std::vector<costmodel::RankingMetrics>>;

//! Metrics of `draws` evaluations of the same workloads, each counted once.
costmodel::RankingMetrics combine_draws(const std::vector<costmodel::RankingMetrics>& parts, int draws) {
  costmodel::RankingMetrics m = costmodel::combine(parts);
  m.groups /= draws;
  m.samples /= draws;
  return m;
}

//! Draws of the kept ops per fold in the learning curve: which ops a share keeps moves the
//! figure (a half of corpus v2's ops ranked its held-out ops at 0.818–0.839 in four draws).
constexpr int kShareDraws = 3;

//! The ops of `train` in draw `draw`'s order: by a hash of their names, the same on every
//! platform. A share keeps the first of them, so a smaller share keeps a subset of a larger one's.
std::vector<std::string> ops_in_draw_order(const Dataset& data, const std::vector<costmodel::Sample>& train,
                                           int draw) {
  std::set<std::string> ops;
  for (auto& s : train) ops.insert(data.workloads.at(s.group).op_name);
  std::vector<std::pair<std::uint64_t, std::string>> hashed;
  for (auto& op : ops) hashed.emplace_back(fnv1a64(op + "#" + std::to_string(draw)), op);
  std::sort(hashed.begin(), hashed.end());
  std::vector<std::string> order;
  for (auto& [hash, op] : hashed) order.push_back(op);
  return order;
}

//! The samples of `train` whose op is among the first `share` of `order` (at least one op).
std::vector<costmodel::Sample> share_of_ops(const Dataset& data, const std::vector<costmodel::Sample>& train,
                                            const std::vector<std::string>& order, double share) {
  const auto n = std::max<std::size_t>(1, std::lround(share * static_cast<double>(order.size())));
  const std::set<std::string> kept(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<costmodel::Sample> out;
  for (auto& s : train)
    if (kept.count(data.workloads.at(s.group).op_name)) out.push_back(s);
  return out;
}

//! A number in its shortest form: 0.5, 12.5, 1e-05.
std::string shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

//! The learning curve's split name: "held-out ops, 50 % of the other ops".
std::string share_split(double share) { return kHeldOutOps + ", " + shortest(share * 100) + " % of the other ops"; }

//! Draws of the measured records per workload in the transfer test: which k records a search
//! measures first changes what fine-tuning learns, so one draw is noisy.
constexpr int kTransferDraws = 5;

//! A model's results in the transfer test: per workload and draw, its metrics, and whether its
//! first 2k trials found a faster or a slower best than a cold start's (EvalRow).
struct TransferPart {
  std::vector<costmodel::RankingMetrics> metrics;
  int compared = 0;  //!< draws whose k picks were a choice (more than k records left); 0 for a cold start's own
  int faster = 0, slower = 0;
};
using TransferParts = std::map<std::string, TransferPart>;  //!< by model

//! The best latency of a search's first 2k trials: the k measured, then the k of `rest` that
//! `score` ranks first.
double best_after(const std::vector<const costmodel::Sample*>& measured,
                  const std::vector<const costmodel::Sample*>& rest, const std::vector<float>& score) {
  double best = INFINITY;
  for (auto* s : measured) best = std::min(best, s->latency_s);
  std::vector<std::size_t> order(rest.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t picks = std::min(measured.size(), rest.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(picks), order.end(),
                    [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
  for (std::size_t i = 0; i < picks; ++i) best = std::min(best, rest[order[i]]->latency_s);
  return best;
}

//! The transfer test (evaluate_models' `transfer`): for each workload among `test` with more
//! than k + 1 records, k drawn at random are "measured" and the others ranked by `base` as it
//! is, fine-tuned on the k, and by a model of its kind trained on the k alone; kTransferDraws
//! times, each a part of its own. The parts are named `name` + " pretrained", " fine-tuned" and
//! " cold".
void test_transfer(const std::vector<const costmodel::Sample*>& test, const costmodel::CostModel& base,
                   const std::string& name, int k, std::uint64_t seed, TransferParts& parts) {
  std::map<std::string, std::vector<const costmodel::Sample*>> of_workload;
  for (auto* s : test) of_workload[s->group].push_back(s);
  const std::string kind = base.kind(), payload = base.payload();
  std::mt19937_64 rng(seed);
  for (auto& [key, samples] : of_workload) {
    if (samples.size() < static_cast<std::size_t>(k) + 2) continue;  // fewer than two left to rank
    for (int draw = 0; draw < kTransferDraws; ++draw) {
      std::shuffle(samples.begin(), samples.end(), rng);
      const std::vector<const costmodel::Sample*> measured(samples.begin(), samples.begin() + k),
          rest(samples.begin() + k, samples.end());
      std::vector<costmodel::Sample> seen;
      for (auto* s : measured) seen.push_back(*s);
      std::vector<costmodel::Features> x;
      for (auto* s : rest) x.push_back(s->x);
      auto tuned = costmodel::make_model(kind, seed);
      tuned->load_payload(payload);  // as costmodel::OnlineModel starts each update from its base
      tuned->fine_tune(seen);
      auto cold = costmodel::make_model(kind, seed);
      cold->fit(seen);
      const std::vector<float> cold_score = cold->rank(x);
      const double cold_best = best_after(measured, rest, cold_score);
      parts[name + " cold"].metrics.push_back(test_on(rest, cold_score));
      for (auto& [model, score] :
           {std::pair{name + " pretrained", base.rank(x)}, std::pair{name + " fine-tuned", tuned->rank(x)}}) {
        TransferPart& part = parts[model];
        part.metrics.push_back(test_on(rest, score));
        if (rest.size() <= static_cast<std::size_t>(k)) continue;  // both pick every record left
        const double best = best_after(measured, rest, score);
        ++part.compared;
        part.faster += best < cold_best;
        part.slower += best > cold_best;
      }
    }
  }
}

//! The rows of the transfer test's parts: one split per k, a row per model.
void transfer_rows(const std::string& split, int folds, const std::map<int, TransferParts>& by_k,
                   std::vector<EvalRow>& out) {
  for (auto& [k, parts] : by_k)
    for (auto& [name, p] : parts) {
      EvalRow row{
          name, split + ", " + std::to_string(k) + " measured", folds, combine_draws(p.metrics, kTransferDraws), {}};
      if (p.compared > 0) {
        row.faster_than_cold = p.faster / static_cast<double>(p.compared);
        row.slower_than_cold = p.slower / static_cast<double>(p.compared);
      }
      out.push_back(row);
    }
}

//! Each base's payload, taken once for all the models that start from it (as
//! costmodel::OnlineModel keeps its base's); Error(InvalidInput) for a base that is missing,
//! untrained or not of the kind it is given for.
std::map<std::string, std::string> base_payloads(const std::map<std::string, Base>& bases) {
  std::map<std::string, std::string> out;
  for (auto& [kind, base] : bases) {
    if (!base.model || base.model->kind() != kind || !base.model->trained())
      throw_error(ErrorKind::InvalidInput, "a " + kind + " model starts from a trained " + kind + " model, not " +
                                               (base.model ? base.model->kind() : std::string("none")));
    out[kind] = base.model->payload();
  }
  return out;
}

//! The rows of a kind: its name, or "KIND from NAME" for one that starts from a base.
std::string row_name(const std::string& kind, const std::map<std::string, Base>& bases) {
  auto b = bases.find(kind);
  return b == bases.end() ? kind : kind + " from " + b->second.name;
}

//! A model of `kind` trained on `train`: from nothing, or from its base's payload fine-tuned on them.
std::unique_ptr<costmodel::CostModel> trained_on(const std::string& kind, const std::vector<costmodel::Sample>& train,
                                                 std::uint64_t seed,
                                                 const std::map<std::string, std::string>& payloads) {
  auto model = costmodel::make_model(kind, seed);
  auto payload = payloads.find(kind);
  if (payload == payloads.end()) {
    model->fit(train);
  } else {
    model->load_payload(payload->second);
    model->fine_tune(train);
  }
  return model;
}

}  // namespace

std::vector<EvalRow> evaluate_models(const Dataset& data, const std::vector<std::string>& kinds, std::uint64_t seed,
                                     const EvalOptions& options) {
  const std::vector<int>& transfer = options.transfer;
  const std::vector<double>& op_shares = options.op_shares;
  const std::map<std::string, std::string> payloads = base_payloads(options.bases);
  for (double share : op_shares)
    if (!(share > 0 && share < 1))
      throw_error(ErrorKind::InvalidInput,
                  "a share of the training ops must be above 0 and below 1, not " + shortest(share));
  std::set<double> shares(op_shares.begin(), op_shares.end());  // a share given twice is one curve point
  std::vector<EvalRow> out;
  for (const std::string& split : {kHeldOutSizes, kHeldOutOps}) {
    auto folds = folds_for(data, split);
    Parts parts;
    std::map<std::string, Parts> op_parts;        // by kind
    std::map<int, TransferParts> transfer_parts;  // by k
    std::map<double, Parts> share_parts;          // by share of the other ops
    for (auto& fold : folds) {
      std::vector<costmodel::Sample> train;
      std::vector<const costmodel::Sample*> test;
      std::vector<costmodel::Features> test_x;
      for (auto& s : data.samples) {
        if (fold.train.count(s.group)) train.push_back(s);
        if (fold.test.count(s.group)) {
          test.push_back(&s);
          test_x.push_back(s.x);
        }
      }
      if (train.empty() || test.empty()) continue;
      for (auto& kind : kinds) {
        auto model = trained_on(kind, train, seed, payloads);
        std::vector<float> score = rank_by_workload(*model, test, test_x);
        parts[kind].push_back(test_on(test, score));
        test_by_op(data, test, score, op_parts[kind]);
        for (int k : transfer) test_transfer(test, *model, row_name(kind, options.bases), k, seed, transfer_parts[k]);
      }
      // The learning curve: each share's subset drawn once a fold, whatever the kinds. A held-out
      // size trains on its own op's other sizes, which a share could drop: no curve there.
      if (split == kHeldOutOps && !shares.empty())
        for (int draw = 0; draw < kShareDraws; ++draw) {
          const std::vector<std::string> order = ops_in_draw_order(data, train, draw);
          for (double share : shares) {
            const std::vector<costmodel::Sample> subset = share_of_ops(data, train, order, share);
            for (auto& kind : kinds) {
              auto subset_model = trained_on(kind, subset, seed, payloads);
              share_parts[share][kind].push_back(test_on(test, rank_by_workload(*subset_model, test, test_x)));
            }
          }
        }
      // A random ranker, averaged over draws so that its figure is its expectation.
      std::mt19937_64 rng(seed);
      constexpr int kRandomDraws = 20;
      std::vector<costmodel::RankingMetrics> draws;
      for (int draw = 0; draw < kRandomDraws; ++draw) draws.push_back(test_on(test, random_scores(test.size(), rng)));
      parts["random"].push_back(combine_draws(draws, kRandomDraws));
    }
    std::vector<std::string> names = kinds;
    names.push_back("random");
    for (auto& name : names)
      out.push_back({name == "random" ? name : row_name(name, options.bases), split, static_cast<int>(folds.size()),
                     costmodel::combine(parts[name]), combine_by_op(op_parts[name])});
    transfer_rows(split, static_cast<int>(folds.size()), transfer_parts, out);
    for (auto& [share, by_kind] : share_parts)
      for (auto& [kind, p] : by_kind)
        out.push_back({row_name(kind, options.bases), share_split(share), static_cast<int>(folds.size()),
                       combine_draws(p, kShareDraws), {}});
  }
  return out;
}

std::vector<EvalRow> evaluate_trained(const Dataset& data, const costmodel::CostModel& model, const std::string& name,
                                      const std::vector<int>& transfer, std::uint64_t seed) {
  std::vector<const costmodel::Sample*> all;
  std::vector<costmodel::Features> x;
  for (auto& s : data.samples) {
    all.push_back(&s);
    x.push_back(s.x);
  }
  if (all.empty()) throw_error(ErrorKind::InvalidInput, "no records to rank: tune some ops first");
  std::vector<float> score = rank_by_workload(model, all, x);
  Parts op_parts;
  test_by_op(data, all, score, op_parts);
  std::vector<EvalRow> out = {{name, "as trained", 0, test_on(all, score), combine_by_op(op_parts)}};
  std::map<int, TransferParts> by_k;
  for (int k : transfer) test_transfer(all, model, name, k, seed, by_k[k]);
  transfer_rows("as trained", 0, by_k, out);
  return out;
}

db::ModelRow train_model(const Dataset& data, const std::string& kind, const std::string& target_key,
                         std::uint64_t seed, const Base* base) {
  if (data.samples.size() < 2)
    throw_error(ErrorKind::InvalidInput, "too few records to train a " + kind + " model on (" +
                                             std::to_string(data.samples.size()) + "): tune some ops first");
  EvalOptions options;
  if (base) options.bases[kind] = *base;
  const std::string name = row_name(kind, options.bases);
  nlohmann::json metrics = nlohmann::json::object();
  for (auto& row : evaluate_models(data, {kind}, seed, options))
    if (row.model == name && row.folds > 0)
      metrics[row.split] = {{"folds", row.folds},
                            {"pairwise_accuracy", row.metrics.pairwise_accuracy},
                            {"spearman", row.metrics.spearman},
                            {"top1", row.metrics.top1},
                            {"top5", row.metrics.top5}};
  auto model = trained_on(kind, data.samples, seed, base_payloads(options.bases));
  const int version = costmodel::feature_version_of(model->width());  // what save_model writes
  costmodel::ModelMeta meta{kind,           target_key, version, static_cast<std::int64_t>(data.samples.size()),
                            metrics.dump(), base ? base->name : ""};
  return {kind, target_key, version, meta.records, meta.metrics_json, costmodel::save_model(*model, meta), 0};
}

}  // namespace tiletune::tuner
