#!/usr/bin/env bash
# Every test: install what is missing, build, then run lit, unit and
# end-to-end tests through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
