#!/usr/bin/env bash
# Every test: install what is missing, build, then run lit, unit and
# end-to-end tests through CTest; then all of them again in the sanitized
# build (ASan + UBSan; SANITIZE=0 skips: docs/sanitizers.md); then each
# fuzzer for 45 s (FUZZ_SECONDS; 0 skips them: docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ "${SANITIZE:-1}" != 0 ]; then
  ./scripts/sanitize.sh
fi
if [ "${FUZZ_SECONDS:-45}" != 0 ]; then
  ./scripts/fuzz.sh
fi
