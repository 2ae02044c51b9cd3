// The vendor layers tiletune is judged against: oneDNN builds and runs each layer an import
// describes (with the post-ops it fuses), bound to plain tensors or to buffers of its own, and
// refuses a malformed description clearly.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "helpers.hpp"
#include "support/error.hpp"
#include "vendor/vendor.hpp"

using namespace tiletune;

TEST_CASE("vendor: oneDNN layers with their post-ops compute on plain tensors") {
  if (!vendor::available()) TT_SKIP("built without oneDNN");
  // A matmul with a bias and relu, bound to our tensors: the result is checked.
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1}, bias = {-10, 0.5}, y(4, 0);
  auto layer = vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "matmul", "a": [2, 3], "b": [3, 2],
      "bias": true, "post_ops": [{"eltwise": "relu"}]})"),
                                    1, {a.data(), b.data(), bias.data(), y.data()});
  REQUIRE(layer.run);
  layer.run();
  // [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] = [4 5; 10 11]; + bias, relu.
  CHECK(y == std::vector<float>{0, 5.5f, 0, 11.5f});
  // A grouped, padded, strided convolution with a residual (sum) and a per-channel operand.
  auto conv = vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "convolution", "src": [1, 8, 9, 9],
      "weights": [8, 4, 3, 3], "groups": 2, "strides": [2, 2], "dilations": [1, 1], "pads_begin": [1, 1],
      "pads_end": [1, 1], "bias": true, "post_ops": [{"binary": "add", "dims": [1, 8, 5, 5]},
      {"binary": "mul", "dims": [1, 8, 1, 1]}, {"eltwise": "clip", "alpha": 0, "beta": 6}], "unfused": ["Sin"]})"),
                                   1);
  REQUIRE(conv.run);
  conv.run();
  CHECK(conv.unfused == std::vector<std::string>{"Sin"});
  for (const char* text :
       {R"({"primitive": "pooling", "algorithm": "max", "src": [1, 16, 8, 8], "kernel": [3, 3], "strides": [2, 2],
            "pads_begin": [1, 1], "pads_end": [1, 1]})",
        R"({"primitive": "softmax", "src": [4, 10]})",
        R"({"primitive": "layer_normalization", "src": [4, 10], "epsilon": 1e-5, "scale_shift": true})",
        R"({"primitive": "matmul", "a": [3, 4, 5], "b": [3, 5, 6], "trans_b": true})"}) {
    auto l = vendor::onednn_layer(nlohmann::json::parse(text), 1);
    CHECK_MESSAGE(l.run, text);
    if (l.run) l.run();
  }
  CHECK(vendor::median_seconds(conv.run, 0.01) > 0);
}

TEST_CASE("vendor: a malformed layer is a clear error") {
  if (!vendor::available()) TT_SKIP("built without oneDNN");
  ErrorKind kind = ErrorKind::Internal;
  CHECK(test::error_of([] { vendor::onednn_layer(nlohmann::json::parse(R"({"src": [1]})"), 1); }, &kind)
            .find("\"primitive\"") != std::string::npos);
  CHECK(kind == ErrorKind::InvalidInput);
  CHECK(test::error_of([] {
          vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "matmul", "a": [2, 3], "b": [4, 2]})"), 1);
        }).find("do not fit") != std::string::npos);
  CHECK(test::error_of([] {
          vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "convolution", "src": "x"})"), 1);
        }).find("'src' must be a list of integers") != std::string::npos);
  // A primitive oneDNN does not have is no layer, not an error.
  CHECK(!vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "fft"})"), 1).run);
}
