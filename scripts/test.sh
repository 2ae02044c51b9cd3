#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs the default tests. Slow tests are left
# out; run them with: ctest --test-dir build -L slow --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" -LE slow
