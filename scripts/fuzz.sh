#!/bin/sh
# Fuzzes every input surface under AddressSanitizer: the op-text parser, the REST request bodies
# and the ONNX importer (fuzz/*.cpp, libFuzzer from Debian's clang). Builds them in build-fuzz/,
# then runs each for RUNS executions (default 10^6) from its seeds; any crash, leak or ASan
# report in the fuzzed process fails, and the input that caused it is left in build-fuzz/crashes/
# (make it a regular test). ONNX's shape inference runs in a child process (libonnx crashes on
# some malformed models; the importer turns that into an input error): a crash there writes an
# artifact too but does not fail the run. The ONNX harness forks per model: ~400 executions/s. Run on purpose, or through the slow tests: ctest --test-dir build -L slow
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-1000000}
b="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$b" -DTILETUNE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$b" -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_op_text fuzz_onnx fuzz_rest
mkdir -p "$b/crashes"
testdata=/usr/share/libonnx-testdata/data
for harness in op_text onnx rest; do
  corpus="$b/corpus/$harness"
  mkdir -p "$corpus"
  case $harness in
    op_text) cp "$root"/ops/*.tile "$root"/fuzz/seeds/op_text/* "$corpus"/ ;;
    rest) cp "$root"/fuzz/seeds/rest/* "$corpus"/ ;;
    onnx)
      # Small models of the mapped kinds, as shipped with ONNX's tests.
      for t in node/test_conv_with_strides_padding node/test_maxpool_2d_pads node/test_gemm_default_vector_bias \
               node/test_softmax_axis_2 node/test_layer_normalization_4d_axis1 node/test_reduce_sum_keepdims_example \
               node/test_add_bcast node/test_relu pytorch-converted/test_Conv2d_groups; do
        [ -f "$testdata/$t/model.onnx" ] && cp "$testdata/$t/model.onnx" "$corpus/$(basename "$t").onnx"
      done ;;
  esac
  echo "fuzz_$harness: $runs executions"
  log="$b/fuzz_$harness.log"
  if ! ASAN_OPTIONS=detect_leaks=1 "$b/fuzz_$harness" -runs="$runs" -max_len=65536 -rss_limit_mb=4096 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$b/crashes/$harness-" "$corpus" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "fuzz_$harness failed: see $log and build-fuzz/crashes/" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
echo "fuzz: every harness ran $runs executions without a crash"
