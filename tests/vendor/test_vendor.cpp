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

TEST_CASE("vendor: oneDNN matmuls in bf16 and in int8 with a requantization, on typed tensors") {
  if (!vendor::available()) TT_SKIP("built without oneDNN");
  // bf16 [1 2; 3 4] x [1 1; 0 1] into f32.
  std::vector<std::uint16_t> a = {0x3f80, 0x4000, 0x4040, 0x4080}, b = {0x3f80, 0x3f80, 0, 0x3f80};
  std::vector<float> y(4, 0);
  auto bf = vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "matmul", "a": [2, 2], "b": [2, 2],
      "types": {"src": "bf16", "weights": "bf16", "dst": "f32"}})"),
                                 1, {reinterpret_cast<float*>(a.data()), reinterpret_cast<float*>(b.data()), y.data()});
  // oneDNN runs bf16 from AVX-512 on; Debian's has no implementation below that (AVX2), which
  // is a layer that is not timed, said so.
  if (bf.run) {
    bf.run();
    CHECK(y == std::vector<float>{1, 3, 3, 7});
  } else {
    CHECK_FALSE(__builtin_cpu_supports("avx512bw"));
    CHECK(bf.name.find("oneDNN has no matmul for this layer") == 0);
  }
  // u8 [10 20; 200 0] x s8 [1; -2] = [-30; 200], * 2 + 100 = [40; 500]: 500 saturates at 255.
  std::vector<std::uint8_t> u = {10, 20, 200, 0}, out(2, 0);
  std::vector<std::int8_t> s = {1, -2};
  auto q = vendor::onednn_layer(
      nlohmann::json::parse(R"({"primitive": "matmul", "a": [2, 2], "b": [2, 1],
      "types": {"src": "u8", "weights": "i8", "dst": "u8"}, "alpha": 2, "dst_zero_point": 100})"),
      1,
      {reinterpret_cast<float*>(u.data()), reinterpret_cast<float*>(s.data()), reinterpret_cast<float*>(out.data())});
  REQUIRE(q.run);
  q.run();
  CHECK(out == std::vector<std::uint8_t>{40, 255});
  CHECK(test::error_of([] {
          vendor::onednn_layer(nlohmann::json::parse(R"({"primitive": "matmul", "a": [2, 3], "b": [3, 2],
              "types": {"src": "f64"}})"),
                               1);
        }).find("unknown element type \"f64\" for src") != std::string::npos);
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
