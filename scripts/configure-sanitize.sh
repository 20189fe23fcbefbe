#!/usr/bin/env bash
# Configures (once) build-sanitize/: everything with AddressSanitizer and
# UndefinedBehaviorSanitizer, plus the libFuzzer targets, which share it
# (-DKILN_FUZZ=ON; docs/sanitizers.md). Used by sanitize.sh and fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-sanitize/build.ninja ]; then
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
    -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DKILN_FUZZ=ON -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
fi
