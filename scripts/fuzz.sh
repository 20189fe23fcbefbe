#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with ASan and UBSan) in the
# sanitized build (build-sanitize/, scripts/configure-sanitize.sh)
# and runs each for FUZZ_SECONDS (default 45) from its seed corpus
# (fuzz/corpus/NAME, copied so that what a run finds stays out of the
# repository), after replaying every regression input once
# (fuzz/regressions/NAME), as many at once as there are cores. A crash
# fails the script with the fuzzer's report; its input (crash-*) is left
# in build-sanitize/findings/NAME.
# Usage: scripts/fuzz.sh [NAME...]   (default: all; docs/fuzzing.md)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-45}
all="safetensors gguf llama2c tokenizer config bundle tuning-db measurements kernel-cache ir openai-request"
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
done
# One fuzzer per core at a time (each is one process, one thread).
fuzz_one() {
  local n=$1 bin=build-sanitize/bin/kiln-fuzz-$1
  local work=build-sanitize/corpus/$1 findings=build-sanitize/findings/$1
  rm -rf "$work" && mkdir -p "$work" "$findings"
  cp -r "fuzz/corpus/$n/." "$work/"
  local rc=0
  "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$findings/" "$work" \
    >"build-sanitize/$n.log" 2>&1 || rc=$?
  echo $rc >"build-sanitize/$n.rc"
}
for n in $names; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  rm -f "build-sanitize/$n.rc"
  fuzz_one "$n" &
done
wait
failed=0
for n in $names; do
  if [ "$(cat "build-sanitize/$n.rc" 2>/dev/null)" != 0 ]; then
    echo "fuzz: $n: found a crash (input in build-sanitize/findings/$n):"
    tail -40 "build-sanitize/$n.log"
    failed=1
  else
    echo "fuzz: $n: $(grep -o 'Done [0-9]* runs' "build-sanitize/$n.log" | tail -1) in ${seconds} s, no crash"
  fi
done
exit $failed
