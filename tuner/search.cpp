#include "tuner/search.hpp"

#include <algorithm>
#include <cmath>

#include "support/error.hpp"

namespace tiletune::tuner {

namespace {

//! Draws distinct unmeasured configs from `draw`, giving up after enough repeats (a small
//! space can run out).
template <typename Draw>
std::vector<ir::Schedule> distinct(int n, const std::set<std::string>& measured, Draw draw) {
  std::vector<ir::Schedule> out;
  std::set<std::string> taken;
  for (int attempt = 0; static_cast<int>(out.size()) < n && attempt < 50 * n + 100; ++attempt) {
    ir::Schedule s = draw();
    std::string key = s.key();
    if (measured.count(key) || !taken.insert(key).second) continue;
    out.push_back(std::move(s));
  }
  return out;
}

//! A measured config.
struct Member {
  ir::Schedule config;
  double latency;
};

//! The k fastest successful members, fastest first.
std::vector<const Member*> fastest(const std::vector<Member>& members, std::size_t k) {
  std::vector<const Member*> out;
  for (auto& m : members)
    if (std::isfinite(m.latency)) out.push_back(&m);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->latency < b->latency; });
  if (out.size() > k) out.resize(k);
  return out;
}

class RandomSearch : public SearchStrategy {
 public:
  RandomSearch(const Space& space, std::uint64_t seed) : space_(space), rng_(seed) {}
  std::vector<ir::Schedule> propose(int n, const std::set<std::string>& measured) override {
    return distinct(n, measured, [&] { return space_.sample(rng_); });
  }
  void notify(const std::vector<ir::Schedule>&, const std::vector<double>&) override {}

 private:
  const Space& space_;
  Rng rng_;
};

//! A steady-state genetic search: children of the fastest measured configs by crossover and
//! mutation, plus a share of fresh random samples to keep exploring.
class EvolutionarySearch : public SearchStrategy {
 public:
  EvolutionarySearch(const Space& space, std::uint64_t seed) : space_(space), rng_(seed) {}

  std::vector<ir::Schedule> propose(int n, const std::set<std::string>& measured) override {
    std::vector<const Member*> elite = fastest(population_, kElite);
    if (elite.size() < kMinParents) return distinct(n, measured, [&] { return space_.sample(rng_); });
    auto parent = [&]() -> const ir::Schedule& {
      // Tournament of two, biased to the faster.
      size_t a = std::uniform_int_distribution<size_t>(0, elite.size() - 1)(rng_);
      size_t b = std::uniform_int_distribution<size_t>(0, elite.size() - 1)(rng_);
      return elite[std::min(a, b)]->config;
    };
    return distinct(n, measured, [&] {
      if (std::bernoulli_distribution(kExplore)(rng_)) return space_.sample(rng_);
      ir::Schedule child =
          std::bernoulli_distribution(0.3)(rng_) ? space_.crossover(parent(), parent(), rng_) : parent();
      int mutations = 1 + std::uniform_int_distribution<int>(0, 1)(rng_);
      for (int i = 0; i < mutations; ++i) child = space_.mutate(child, rng_);
      return child;
    });
  }

  void notify(const std::vector<ir::Schedule>& configs, const std::vector<double>& latency_s) override {
    for (size_t i = 0; i < configs.size(); ++i) population_.push_back({configs[i], latency_s[i]});
  }

 private:
  static constexpr size_t kElite = 16;
  static constexpr size_t kMinParents = 4;
  static constexpr double kExplore = 0.2;
  const Space& space_;
  Rng rng_;
  std::vector<Member> population_;
};

//! Model-guided evolution (after Ansor): a large population evolves for a few generations on
//! the cost model's predictions, starting from the fastest measured configs and fresh samples;
//! the best-predicted unmeasured configs are measured, the best of each blocking before a second
//! of any one (spread_over_blockings), plus an ε share of random ones so that the model keeps
//! seeing what it believes is bad. Every result retrains the model once enough
//! new ones have come.
class ModelGuidedSearch : public SearchStrategy {
 public:
  ModelGuidedSearch(const Space& space, std::uint64_t seed, std::unique_ptr<costmodel::CostModel> model,
                    SearchContext context)
      : space_(space), rng_(seed), model_(online(std::move(model), std::move(context))) {
    model_.update();
  }

  std::vector<ir::Schedule> propose(int n, const std::set<std::string>& measured) override {
    if (!model_.trained()) return distinct(n, measured, [&] { return space_.sample(rng_); });
    int explore = static_cast<int>(std::lround(n * kEpsilon));
    std::vector<Scored> population = evolve();  // best-predicted first
    std::vector<ir::Schedule> ranked;           // distinct keys (evolve)
    std::vector<std::string> keys;
    for (auto& c : population) {
      std::string key = c.config.key();
      if (measured.count(key)) continue;
      ranked.push_back(std::move(c.config));
      keys.push_back(std::move(key));
    }
    std::vector<ir::Schedule> out;
    std::set<std::string> taken;
    for (std::size_t i : spread_over_blockings(ranked)) {
      if (static_cast<int>(out.size()) >= n - explore) break;
      taken.insert(keys[i]);
      out.push_back(ranked[i]);
    }
    std::set<std::string> excluded = measured;
    excluded.insert(taken.begin(), taken.end());
    auto random = distinct(n - static_cast<int>(out.size()), excluded, [&] { return space_.sample(rng_); });
    out.insert(out.end(), random.begin(), random.end());
    return out;
  }

  void notify(const std::vector<ir::Schedule>& configs, const std::vector<double>& latency_s) override {
    std::vector<costmodel::Sample> samples;
    for (size_t i = 0; i < configs.size(); ++i) {
      measured_.push_back({configs[i], latency_s[i]});
      try {
        samples.push_back({costmodel::featurize(space_.workload(), configs[i], space_.traits()), space_.workload().key,
                           latency_s[i]});
      } catch (const Error&) {
        // A stored config this version cannot lower teaches nothing.
      }
    }
    model_.add(std::move(samples));
    model_.update();
  }

 private:
  static costmodel::OnlineModel online(std::unique_ptr<costmodel::CostModel> fresh, SearchContext c) {
    if (c.pretrained) return costmodel::OnlineModel(std::move(c.pretrained), std::move(c.prior));
    if (c.base)
      return costmodel::OnlineModel(costmodel::OnlineModel::FromBase{}, std::move(c.base), std::move(c.prior));
    return costmodel::OnlineModel(std::move(fresh), std::move(c.prior));
  }

  struct Scored {
    ir::Schedule config;
    float score;
    costmodel::Features x;  //!< kept for the final ranking of the survivors (evolve)
  };
  static constexpr int kPopulation = 512;
  static constexpr int kGenerations = 4;
  static constexpr int kSeeds = 32;  // fastest measured configs in the first generation
  static constexpr double kEpsilon = 0.125;

  void score(std::vector<Scored>& members) const {
    std::vector<ir::Schedule> configs;
    for (auto& m : members) configs.push_back(m.config);
    auto features = costmodel::featurize_all(space_.workload(), configs, space_.traits());
    std::vector<costmodel::Features> x;
    std::vector<Scored> kept;
    for (size_t i = 0; i < members.size(); ++i) {
      if (!features[i]) continue;
      x.push_back(std::move(*features[i]));
      kept.push_back(std::move(members[i]));
    }
    rank(kept, std::move(x));
    members = std::move(kept);
  }

  //! Scores members in one rank() call (all of one workload) over their features, x[i] being
  //! members[i]'s, and keeps each member's features with it.
  void rank(std::vector<Scored>& members, std::vector<costmodel::Features> x) const {
    const std::vector<float> s = model_.rank(x);
    for (size_t i = 0; i < members.size(); ++i) {
      members[i].score = s[i];
      members[i].x = std::move(x[i]);
    }
  }

  std::vector<Scored> evolve() {
    std::vector<Scored> pop;
    std::set<std::string> keys;
    auto add = [&](ir::Schedule s, std::vector<Scored>& to) {
      if (keys.insert(s.key()).second) to.push_back({std::move(s), 0, {}});
    };
    for (const Member* m : fastest(measured_, kSeeds)) add(m->config, pop);
    for (int tries = 0; static_cast<int>(pop.size()) < kPopulation && tries < 4 * kPopulation; ++tries)
      add(space_.sample(rng_), pop);
    score(pop);
    for (int g = 0; g < kGenerations && !pop.empty(); ++g) {
      std::sort(pop.begin(), pop.end(), [](auto& a, auto& b) { return a.score > b.score; });
      auto parent = [&]() -> const ir::Schedule& {
        // Tournament of two by predicted score (pop is sorted best first).
        size_t a = std::uniform_int_distribution<size_t>(0, pop.size() - 1)(rng_);
        size_t b = std::uniform_int_distribution<size_t>(0, pop.size() - 1)(rng_);
        return pop[std::min(a, b)].config;
      };
      std::vector<Scored> children;
      for (int tries = 0; static_cast<int>(children.size()) < kPopulation && tries < 4 * kPopulation; ++tries) {
        ir::Schedule child =
            std::bernoulli_distribution(0.3)(rng_) ? space_.crossover(parent(), parent(), rng_) : parent();
        add(space_.mutate(child, rng_), children);
      }
      score(children);
      pop.insert(pop.end(), std::make_move_iterator(children.begin()), std::make_move_iterator(children.end()));
      std::sort(pop.begin(), pop.end(), [](auto& a, auto& b) { return a.score > b.score; });
      if (pop.size() > static_cast<size_t>(kPopulation)) pop.resize(kPopulation);
    }
    // The survivors of all generations ranked once more in one call: a model that orders its
    // first picks by comparing them (xgb-pairs) then chooses among every generation's, not only
    // within each generation's children. The other kinds' scores and order do not change. Their
    // features are those computed when they were first scored.
    std::vector<costmodel::Features> x;
    x.reserve(pop.size());
    for (auto& m : pop) x.push_back(std::move(m.x));
    rank(pop, std::move(x));
    std::stable_sort(pop.begin(), pop.end(), [](auto& a, auto& b) { return a.score > b.score; });
    return pop;
  }

  const Space& space_;
  Rng rng_;
  costmodel::OnlineModel model_;
  std::vector<Member> measured_;
};

}  // namespace

std::string blocking_of(ir::Schedule s) {
  for (auto& stage : s.stages) {
    stage.order.clear();
    stage.unroll = stage.prefetch = stage.parallel = 0;
  }
  return s.key();
}

std::vector<std::size_t> spread_over_blockings(const std::vector<ir::Schedule>& ranked) {
  std::vector<std::size_t> first, rest;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < ranked.size(); ++i)
    (seen.insert(blocking_of(ranked[i])).second ? first : rest).push_back(i);
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

std::vector<std::string> search_names() {
  std::vector<std::string> names = {"random", "evolutionary"};
  for (auto& kind : costmodel::model_kinds()) names.push_back(kind);  // a model-guided search each
  return names;
}

std::string model_of_strategy(const std::string& name) {
  const auto kinds = costmodel::model_kinds();
  return std::find(kinds.begin(), kinds.end(), name) != kinds.end() ? name : "";
}

std::unique_ptr<SearchStrategy> make_search(const std::string& name, const Space& space, std::uint64_t seed,
                                            SearchContext context) {
  if (name == "random") return std::make_unique<RandomSearch>(space, seed);
  if (name == "evolutionary") return std::make_unique<EvolutionarySearch>(space, seed);
  if (!model_of_strategy(name).empty())
    return std::make_unique<ModelGuidedSearch>(space, seed, costmodel::make_model(name, seed), std::move(context));
  std::string known;
  for (auto& n : search_names()) known += (known.empty() ? "" : ", ") + n;
  throw_error(ErrorKind::InvalidInput, "unknown search strategy '" + name + "'; known: " + known);
}

}  // namespace tiletune::tuner
