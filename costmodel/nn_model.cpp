// The neural ranker, at TenSet's MLP shape: each loop nest's feature row goes through two
// 256-wide layers, the nests' vectors are summed (sum pooling), two residual 256-wide layers
// and a linear head give the candidate's score, and training minimises a LambdaRank loss within
// workloads (pairwise logistic, each pair weighted by how much swapping it changes the NDCG of
// the current ranking, so that the fast end is learned first). LibTorch lives in this file only.
#include <torch/torch.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>

#include "costmodel/kinds.hpp"
#include "support/error.hpp"

namespace tiletune::costmodel {

namespace {

constexpr int kHidden = 256;
constexpr int kGroupBatch = 64;  // candidates of one workload per step: 2016 pairs at most
constexpr double kLearningRate = 1e-3;
constexpr double kFineTuneRate = 3e-4;
constexpr double kWeightDecay = 1e-5;

struct NetImpl : torch::nn::Module {
  NetImpl(int in, int hidden)
      : enc1(register_module("enc1", torch::nn::Linear(in, hidden))),
        enc2(register_module("enc2", torch::nn::Linear(hidden, hidden))),
        res1(register_module("res1", torch::nn::Linear(hidden, hidden))),
        res2(register_module("res2", torch::nn::Linear(hidden, hidden))),
        head(register_module("head", torch::nn::Linear(hidden, 1))) {}
  //! x: [batch, nests, features], mask: [batch, nests] -> [batch]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    auto h = torch::relu(enc2(torch::relu(enc1(x))));
    h = (h * mask.unsqueeze(-1)).sum(1);
    h = h + torch::relu(res1(h));
    h = h + torch::relu(res2(h));
    return head(h).squeeze(-1);
  }
  torch::nn::Linear enc1, enc2, res1, res2, head;
};
TORCH_MODULE(Net);

//! LambdaRank: the pairwise logistic loss of every ordered pair (i faster than j), weighted by
//! |gain_i - gain_j| * |discount_i - discount_j| at the scores' current ranks.
torch::Tensor lambda_rank_loss(const torch::Tensor& score, const torch::Tensor& label) {
  auto better = (label.unsqueeze(1) > label.unsqueeze(0)).to(torch::kFloat);
  auto order = std::get<1>(score.detach().sort(0, /*descending=*/true));
  auto rank = torch::empty_like(order);
  rank.index_put_({order}, torch::arange(order.size(0), order.options()));
  auto discount = 1.0 / torch::log2(rank.to(torch::kFloat) + 2.0);
  auto gain = torch::pow(2.0, label * 4.0) - 1.0;  // labels are relative speeds in [0, 1]
  auto weight = (gain.unsqueeze(1) - gain.unsqueeze(0)).abs() * (discount.unsqueeze(1) - discount.unsqueeze(0)).abs();
  weight = weight * better;
  auto total = weight.sum();
  if (total.item<float>() <= 0) return torch::zeros({}, score.options());
  auto diff = score.unsqueeze(1) - score.unsqueeze(0);
  return (torch::nn::functional::softplus(-diff) * weight).sum() / total;
}

class NnModel final : public CostModel {
 public:
  explicit NnModel(std::uint64_t seed) : seed_(seed) {
    // One intra-op thread: OpenMP workers spin between calls and would take the core that
    // measurements and the compiler need; these matrices are small.
    static std::once_flag once;
    std::call_once(once, [] { torch::set_num_threads(1); });
  }

  std::string kind() const override { return "nn"; }
  bool trained() const override { return trained_; }
  std::size_t width() const override { return width_; }

  void fit(const std::vector<Sample>& samples) override {
    if (samples.empty()) throw_error(ErrorKind::InvalidInput, "nn: no samples to train on");
    try {
      train(samples);
    } catch (const c10::Error& e) {
      throw_error(ErrorKind::Internal, std::string("LibTorch while training: ") + e.what_without_backtrace());
    }
  }

  std::vector<float> predict(const std::vector<Features>& x) const override {
    if (!trained_) throw_error(ErrorKind::Internal, "nn: predict before training");
    if (x.empty()) return {};
    try {
      torch::NoGradGuard no_grad;
      std::vector<const Features*> rows;
      for (auto& f : x) rows.push_back(&f);
      auto [in, mask] = batch(rows);
      auto out = net_->forward(in, mask).contiguous();
      return std::vector<float>(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
    } catch (const c10::Error& e) {
      throw_error(ErrorKind::Internal, std::string("LibTorch while predicting: ") + e.what_without_backtrace());
    }
  }

  std::string payload() const override {
    torch::serialize::OutputArchive archive;
    archive.write("mean", mean_);
    archive.write("scale", scale_);
    net_->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  }

  void load_payload(const std::string& bytes) override {
    try {
      torch::serialize::InputArchive archive;
      archive.load_from(bytes.data(), bytes.size());
      torch::Tensor mean, scale;
      archive.read("mean", mean);
      archive.read("scale", scale);
      const auto width = static_cast<std::size_t>(mean.numel());
      check_payload_width(width, "nn");
      if (scale.numel() != mean.numel())
        throw_error(ErrorKind::InvalidInput, "the nn model scales " + std::to_string(scale.numel()) + " of its " +
                                                 std::to_string(width) + " features");
      Net net(static_cast<int>(width), kHidden);
      net->load(archive);
      net_ = net;
      width_ = width;
      mean_ = mean;
      scale_ = scale;
      trained_ = true;
    } catch (const c10::Error& e) {
      throw_error(ErrorKind::InvalidInput, std::string("LibTorch rejected the model: ") + e.what_without_backtrace());
    }
  }

 private:
  //! Normalized, zero-padded rows and the mask of real nests.
  std::pair<torch::Tensor, torch::Tensor> batch(const std::vector<const Features*>& rows) const {
    const std::int64_t f = static_cast<std::int64_t>(width_);
    std::int64_t nests = 1;
    for (auto* r : rows) nests = std::max<std::int64_t>(nests, static_cast<std::int64_t>(r->stages.size()));
    auto in = torch::zeros({static_cast<std::int64_t>(rows.size()), nests, f});
    auto mask = torch::zeros({static_cast<std::int64_t>(rows.size()), nests});
    float* p = in.data_ptr<float>();
    float* m = mask.data_ptr<float>();
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t s = 0; s < rows[i]->stages.size(); ++s) {
        const FeatureRow& row = rows[i]->stages[s];
        check_feature_row(row);
        std::copy_n(row.begin(), f, p + (static_cast<std::int64_t>(i) * nests + static_cast<std::int64_t>(s)) * f);
        m[static_cast<std::int64_t>(i) * nests + static_cast<std::int64_t>(s)] = 1;
      }
    return {(in - mean_) * scale_ * mask.unsqueeze(-1), mask};
  }

  void train(const std::vector<Sample>& samples) {
    torch::manual_seed(seed_);
    Grouped g = group_samples(samples);
    // Feature scaling from every nest row seen.
    const std::int64_t f = static_cast<std::int64_t>(feature_count());
    std::vector<float> all;
    for (auto* s : g.samples)
      for (auto& row : s->x.stages) {
        check_feature_row(row);
        all.insert(all.end(), row.begin(), row.end());
      }
    auto rows = torch::from_blob(all.data(), {static_cast<std::int64_t>(all.size()) / f, f}).clone();
    mean_ = rows.mean(0);
    scale_ = 1.0 / (rows.std(0, /*unbiased=*/false) + 1e-3);
    net_ = Net(static_cast<int>(f), kHidden);
    width_ = feature_count();
    trained_ = true;
    // About 24 passes over the data, within [300, 2000] steps.
    run_steps(g, std::clamp(static_cast<int>(24 * g.samples.size() / kGroupBatch), 300, 2000), kLearningRate);
  }

  void fine_tune(const std::vector<Sample>& samples) override {
    if (!trained_) throw_error(ErrorKind::Internal, "nn: fine-tuning an untrained model");
    if (samples.empty()) return;
    try {
      torch::manual_seed(seed_);
      // The base's feature scaling stays: its layers were trained on it.
      Grouped g = group_samples(samples);
      run_steps(g, std::clamp(static_cast<int>(8 * g.samples.size() / kGroupBatch), 50, 400), kFineTuneRate);
    } catch (const c10::Error& e) {
      throw_error(ErrorKind::Internal, std::string("LibTorch while fine-tuning: ") + e.what_without_backtrace());
    }
  }

  //! Adam steps, each on up to kGroupBatch candidates of one workload drawn in proportion to
  //! the workload's size, among the workloads that can teach an ordering.
  void run_steps(const Grouped& g, int steps, double rate) {
    std::mt19937_64 rng(seed_);
    torch::optim::Adam opt(net_->parameters(), torch::optim::AdamOptions(rate).weight_decay(kWeightDecay));
    std::vector<std::pair<std::size_t, std::size_t>> groups;  // [begin, end) in g.samples
    std::vector<double> weight;
    for (std::size_t at = 0, gi = 0; gi < g.group_sizes.size(); at += g.group_sizes[gi++]) {
      std::size_t end = at + g.group_sizes[gi];
      if (std::any_of(g.labels.begin() + at, g.labels.begin() + end, [&](float l) { return l != g.labels[at]; })) {
        groups.push_back({at, end});
        weight.push_back(static_cast<double>(end - at));
      }
    }
    if (groups.empty()) return;  // nothing to order
    std::discrete_distribution<std::size_t> pick(weight.begin(), weight.end());
    for (int step = 0; step < steps; ++step) {
      auto [begin, end] = groups[pick(rng)];
      std::vector<std::size_t> idx(end - begin);
      std::iota(idx.begin(), idx.end(), begin);
      std::shuffle(idx.begin(), idx.end(), rng);
      if (idx.size() > kGroupBatch) idx.resize(kGroupBatch);
      std::vector<const Features*> xs;
      std::vector<float> labels;
      for (auto i : idx) {
        xs.push_back(&g.samples[i]->x);
        labels.push_back(g.labels[i]);
      }
      auto [in, mask] = batch(xs);
      auto y = torch::from_blob(labels.data(), {static_cast<std::int64_t>(labels.size())}).clone();
      auto loss = lambda_rank_loss(net_->forward(in, mask), y);
      if (!loss.requires_grad()) continue;  // no pair to order in this draw
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }

  std::uint64_t seed_;
  bool trained_ = false;
  mutable Net net_{nullptr};  // forward() is not const in LibTorch
  torch::Tensor mean_, scale_;
  std::size_t width_ = feature_count();  //!< features of each row the net reads (CostModel::width)
};

}  // namespace

std::unique_ptr<CostModel> make_nn_model(std::uint64_t seed) { return std::make_unique<NnModel>(seed); }

}  // namespace tiletune::costmodel
