#include "costmodel/model.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "costmodel/kinds.hpp"
#include "costmodel/ranking.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"

namespace tiletune::costmodel {

namespace {
constexpr const char* kBlobFormat = "tiletune-model/1";

[[noreturn]] void bad(const std::string& why) { throw_error(ErrorKind::InvalidInput, "cost model blob: " + why); }
}  // namespace

std::vector<std::string> model_kinds() { return {"xgb", "nn", "xgb-pairs"}; }
std::vector<std::string> default_model_kinds() { return {"xgb", "nn"}; }

std::unique_ptr<CostModel> make_model(const std::string& kind, std::uint64_t seed) {
  if (kind == "xgb") return make_xgb_model(seed);
  if (kind == "nn") return make_nn_model(seed);
  if (kind == "xgb-pairs") return make_pair_model(seed);
  std::string known;
  for (auto& k : model_kinds()) known += (known.empty() ? "" : ", ") + k;
  throw_error(ErrorKind::InvalidInput, "unknown cost model '" + kind + "'; known: " + known);
}

std::string built_on_kind(const std::string& kind) { return kind == "xgb-pairs" ? "xgb" : ""; }

std::unique_ptr<CostModel> make_model_on(const std::string& kind, std::unique_ptr<CostModel> base, std::uint64_t seed) {
  const std::string on = built_on_kind(kind);
  if (on.empty()) throw_error(ErrorKind::InvalidInput, kind + " does not start from a model of another kind");
  if (!base || base->kind() != on || !base->trained())
    throw_error(ErrorKind::InvalidInput, kind + " starts from a trained " + on + " model; given: " +
                                             (base ? base->kind() + (base->trained() ? "" : " (untrained)") : "none"));
  return make_pair_model(seed, std::move(base));
}

Grouped group_samples(const std::vector<Sample>& samples) {
  std::map<std::string, std::vector<const Sample*>> groups;
  for (auto& s : samples) groups[s.group].push_back(&s);
  Grouped g;
  std::vector<std::string> names;
  std::vector<double> latency;
  for (auto& [name, members] : groups) {
    g.group_sizes.push_back(static_cast<unsigned>(members.size()));
    for (auto* s : members) {
      g.samples.push_back(s);
      names.push_back(name);
      latency.push_back(s->latency_s);
    }
  }
  g.labels = relative_speed(names, latency);
  return g;
}

void check_payload_width(std::size_t width, const std::string& model) {
  if (feature_version_of(width) == 0)
    throw_error(ErrorKind::InvalidInput, "the " + model + " model reads " + std::to_string(width) +
                                             " features, the count of no feature version this build reads");
}

std::string save_model(const CostModel& model, const ModelMeta& meta) {
  if (!model.trained()) throw_error(ErrorKind::InvalidInput, "cannot save an untrained " + model.kind() + " model");
  std::string payload = model.payload();
  nlohmann::json header = {{"format", kBlobFormat},
                           {"kind", model.kind()},
                           {"target_key", meta.target_key},
                           {"feature_version", feature_version_of(model.width())},
                           {"feature_count", model.width()},
                           {"records", meta.records},
                           {"metrics", nlohmann::json::parse(meta.metrics_json.empty() ? "{}" : meta.metrics_json)},
                           {"payload_bytes", payload.size()},
                           {"payload_hash", hash_hex(payload)}};
  if (!meta.base.empty()) header["base"] = meta.base;
  return header.dump() + "\n" + payload;
}

std::unique_ptr<CostModel> load_model(const std::string& blob, ModelMeta* meta) {
  auto nl = blob.find('\n');
  if (nl == std::string::npos) bad("no header line (not a tiletune model)");
  nlohmann::json h = nlohmann::json::parse(blob.substr(0, nl), nullptr, false);
  if (h.is_discarded() || !h.is_object() || !h.contains("format") || h["format"] != kBlobFormat)
    bad("header is not a " + std::string(kBlobFormat) + " header (not a tiletune model, or from another version)");
  std::string payload = blob.substr(nl + 1);
  try {
    if (h.at("payload_bytes").get<std::size_t>() != payload.size() ||
        h.at("payload_hash").get<std::string>() != hash_hex(payload))
      bad("payload is truncated or corrupt (size or hash differs from the header)");
    int version = h.at("feature_version").get<int>();
    const std::size_t width = h.at("feature_count").get<std::size_t>();
    if (feature_count(version) == 0 || width != feature_count(version))
      bad("trained with feature version " + std::to_string(version) + " (" + std::to_string(width) +
          " features), which this build (version " + std::to_string(kFeatureVersion) +
          ") cannot read: retrain it (tiletune model train)");
    auto model = make_model(h.at("kind").get<std::string>());
    model->load_payload(payload);
    if (model->width() != width)
      bad("the payload reads " + std::to_string(model->width()) + " features, the header says " +
          std::to_string(width));
    if (meta) {
      meta->kind = model->kind();
      meta->target_key = h.at("target_key").get<std::string>();
      meta->feature_version = version;
      meta->records = h.at("records").get<std::int64_t>();
      meta->metrics_json = h.at("metrics").dump();
      meta->base = h.value("base", "");
    }
    return model;
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("header field missing or of the wrong type: ") + e.what());
  }
}

OnlineModel::OnlineModel(std::unique_ptr<CostModel> model, std::vector<Sample> prior)
    : model_(std::move(model)), samples_(std::move(prior)), prior_(samples_.size()) {
  if (model_->trained()) trained_on_ = samples_.size();
}

OnlineModel::OnlineModel(FromBase, std::unique_ptr<CostModel> base, std::vector<Sample> prior)
    : model_(std::move(base)), samples_(std::move(prior)), prior_(samples_.size()) {
  if (!model_->trained()) throw_error(ErrorKind::Internal, "a pretrained base must be trained");
  base_ = model_->payload();
}

void OnlineModel::add(std::vector<Sample> samples) {
  for (auto& s : samples) samples_.push_back(std::move(s));
}

bool OnlineModel::update(int min_new) {
  std::size_t fresh = samples_.size() - trained_on_;
  std::size_t own = trained_on_ > prior_ ? trained_on_ - prior_ : 0;
  std::size_t needed = std::max<std::size_t>(static_cast<std::size_t>(std::max(1, min_new)), own / 10);
  if (samples_.empty() || (model_->trained() && fresh < needed)) return false;
  if (base_) {
    model_->load_payload(*base_);
    model_->fine_tune(samples_);
  } else {
    model_->fit(samples_);
  }
  trained_on_ = samples_.size();
  return true;
}

}  // namespace tiletune::costmodel
