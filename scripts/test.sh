#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), starts a PostgreSQL server for the store tests, then
# runs the default tests. Slow tests are left
# out; run them with: ctest --test-dir build -L slow --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# One throwaway PostgreSQL server for the tests that need one (tests/postgres.hpp), removed on exit.
pg_dir=$(mktemp -u /tmp/tiletune-pg-ci-XXXXXX)
scripts/pg_server.sh start "$pg_dir" > /dev/null
trap 'scripts/pg_server.sh remove "$pg_dir"' EXIT
export TILETUNE_TEST_PG_HOST=$pg_dir
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" -LE slow
