#!/usr/bin/env bash
# Installs what tiletune needs from Debian (only what is missing) and builds it into build/.
# Safe to run again: quick when everything is installed and built.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ make cmake pkg-config libsqlite3-dev nlohmann-json3-dev doctest-dev libcli11-dev
          libvalijson-dev json-schema-test-suite            # JSON Schema validation and its conformance suite
          libspdlog-dev libcpp-httplib-dev libboost-dev    # the daemon (server/, client/)
          libxgboost-dev xgboost libtorch-dev              # the cost models (costmodel/)
          ocl-icd-opencl-dev pocl-opencl-icd               # the OpenCL backend (PoCL runs it on CPUs)
          libonnx-dev libprotobuf-dev libonnx-testdata     # ONNX import (models/) and its test models
          libpq-dev postgresql                             # PostgreSQL stores (db/postgres_store.cpp) and the server their tests start
          libdnnl-dev libopenblas-dev                      # oneDNN for --compare-vendor and the benchmarks (vendor/, bench/)
          clang                                            # the fuzzers (scripts/fuzz.sh: libFuzzer, ASan)
          python3                                          # scripts/fit_erf.py, which a vector-math test runs
          chromium)                                        # the dashboard's browser test (tests/browser/)
# Node.js runs the browser test's driver (playwright-core from npm); any Node.js 20 on PATH will do.
command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$jobs" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
# The browser test's driver, pinned by tests/browser/package-lock.json (it downloads no browser:
# the test drives Debian's chromium).
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error >> build.log 2>&1 || { tail -20 build.log; exit 1; }
fi
echo "setup: built build/tiletune"
