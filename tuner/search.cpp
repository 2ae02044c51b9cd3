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
    std::vector<const Member*> elite;
    for (auto& m : population_)
      if (std::isfinite(m.latency)) elite.push_back(&m);
    std::sort(elite.begin(), elite.end(), [](auto* a, auto* b) { return a->latency < b->latency; });
    if (elite.size() > kElite) elite.resize(kElite);
    if (elite.size() < kMinParents) return distinct(n, measured, [&] { return space_.sample(rng_); });
    auto parent = [&]() -> const ir::Schedule& {
      // Tournament of two, biased to the faster.
      size_t a = std::uniform_int_distribution<size_t>(0, elite.size() - 1)(rng_);
      size_t b = std::uniform_int_distribution<size_t>(0, elite.size() - 1)(rng_);
      return elite[std::min(a, b)]->config;
    };
    return distinct(n, measured, [&] {
      if (std::bernoulli_distribution(kExplore)(rng_)) return space_.sample(rng_);
      ir::Schedule child = std::bernoulli_distribution(0.3)(rng_) ? space_.crossover(parent(), parent(), rng_) : parent();
      int mutations = 1 + std::uniform_int_distribution<int>(0, 1)(rng_);
      for (int i = 0; i < mutations; ++i) child = space_.mutate(child, rng_);
      return child;
    });
  }

  void notify(const std::vector<ir::Schedule>& configs, const std::vector<double>& latency_s) override {
    for (size_t i = 0; i < configs.size(); ++i) population_.push_back({configs[i], latency_s[i]});
  }

 private:
  struct Member {
    ir::Schedule config;
    double latency;
  };
  static constexpr size_t kElite = 16;
  static constexpr size_t kMinParents = 4;
  static constexpr double kExplore = 0.2;
  const Space& space_;
  Rng rng_;
  std::vector<Member> population_;
};

}  // namespace

std::vector<std::string> search_names() { return {"random", "evolutionary"}; }

std::unique_ptr<SearchStrategy> make_search(const std::string& name, const Space& space, std::uint64_t seed) {
  if (name == "random") return std::make_unique<RandomSearch>(space, seed);
  if (name == "evolutionary") return std::make_unique<EvolutionarySearch>(space, seed);
  std::string known;
  for (auto& n : search_names()) known += (known.empty() ? "" : ", ") + n;
  throw_error(ErrorKind::InvalidInput, "unknown search strategy '" + name + "'; known: " + known);
}

}  // namespace tiletune::tuner
