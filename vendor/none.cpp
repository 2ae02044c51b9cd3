// A build without oneDNN: no vendor layers (the report says so rather than guessing).
#include "support/error.hpp"
#include "vendor/vendor.hpp"

namespace tiletune::vendor {

bool available() { return false; }

Layer onednn_layer(const nlohmann::json&, int, const std::vector<float*>&) {
  throw_error(ErrorKind::NotFound, "this tiletune was built without oneDNN (install libdnnl-dev and rebuild)");
}

}  // namespace tiletune::vendor
