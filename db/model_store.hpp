// db/model_store.hpp
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tiletune::db {

//! A trained cost model of one kind for one target, with what it was trained on.
struct ModelRow {
  std::string kind;  //!< a cost model kind: "xgb", "nn", "xgb-pairs"
  std::string target_key;
  int feature_version = 0;
  std::int64_t records = 0;  //!< training records
  std::string metrics_json;  //!< held-out metrics at training time
  std::string blob;          //!< costmodel::save_model's bytes
  std::int64_t created_unix_ms = 0;
};

//! Trained cost models, one per kind and target.
class ModelStore {
 public:
  virtual ~ModelStore() = default;
  //! Stores a model, replacing the one of the same kind and target.
  virtual void put_model(const ModelRow& m) = 0;
  virtual std::optional<ModelRow> model(const std::string& kind, const std::string& target_key) = 0;
  //! Every model stored for the target, oldest first, without their blobs: what each retrain
  //! was trained on and its held-out metrics.
  virtual std::vector<ModelRow> model_history(const std::string& target_key) = 0;
};

}  // namespace tiletune::db
