#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with ASan and UBSan) in the
# sanitized build (build-sanitize/, scripts/configure-sanitize.sh)
# and runs each for FUZZ_SECONDS (default 60) from its seed corpus
# (fuzz/corpus/NAME, copied so that what a run finds stays out of the
# repository), after replaying every regression input once
# (fuzz/regressions/NAME). A crash stops the script with the fuzzer's
# report; its input (crash-*) is left in build-sanitize/findings/NAME.
# Usage: scripts/fuzz.sh [NAME...]   (default: all; docs/fuzzing.md)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
all="safetensors config bundle tuning-db kernel-cache ir"
names=${*:-$all}
./scripts/configure-sanitize.sh
targets=""
for n in $names; do targets="$targets kiln-fuzz-$n"; done
cmake --build build-sanitize --target $targets >/dev/null
for n in $names; do
  bin=build-sanitize/bin/kiln-fuzz-$n
  if [ -d "fuzz/regressions/$n" ]; then
    "$bin" -runs=0 "fuzz/regressions/$n" >/dev/null 2>&1 || {
      echo "fuzz: $n: a regression input fails again:"
      "$bin" -runs=0 "fuzz/regressions/$n" 2>&1 | tail -30
      exit 1
    }
  fi
  work=build-sanitize/corpus/$n findings=build-sanitize/findings/$n
  rm -rf "$work" && mkdir -p "$work" "$findings"
  cp -r "fuzz/corpus/$n/." "$work/"
  if ! "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$findings/" "$work" \
    >"build-sanitize/$n.log" 2>&1; then
    echo "fuzz: $n: found a crash (input in $findings):"
    tail -40 "build-sanitize/$n.log"
    exit 1
  fi
  echo "fuzz: $n: $(grep -o 'Done [0-9]* runs' "build-sanitize/$n.log" | tail -1) in ${seconds} s, no crash"
done
