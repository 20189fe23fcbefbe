#!/usr/bin/env bash
# Every unit, lit and emu test again, in the sanitized build: kiln and the
# emu device's kernels with ASan and UBSan, a finding fails the test
# (docs/sanitizers.md). Arguments go to CTest (e.g. -R lit-e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/configure-sanitize.sh
cmake --build build-sanitize
# runtime-builds-alone checks the build configuration, not the code; the
# plain build ran it already.
ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)" \
  -E runtime-builds-alone "$@"
