#!/usr/bin/env bash
# Compile time of `kiln compile MODEL -o model.kiln` for one target (every
# kernel of prefill, decode and sampling, and the launch plan of every
# prefill bucket), with a cold kernel cache (every kernel through NVRTC) and
# a warm one. Prints a
# Markdown table row per case; `--record` appends them to bench/RESULTS.md.
# Usage: bench/compile_time.sh [MODEL] [TARGET] [--record]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-llama2-7b}
target=${2:-sm_90}
runs=5
kiln=build/bin/kiln
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

time_once() { # prints seconds
  local start end
  start=$(date +%s.%N)
  "$kiln" compile "$model" --target "$target" -o "$work/m.kiln" \
    --cache-dir "$work/cache" >/dev/null
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cold=$(for i in $(seq $runs); do rm -rf "$work/cache"; time_once; done | median)
warm=$(for i in $(seq $runs); do time_once; done | median)
kernels=$("$kiln" compile "$model" --target "$target" -o "$work/m.kiln" \
  --cache-dir "$work/cache" | sed -n 's/.*bundle .*: \([0-9]*\) kernels.*/\1/p')
buckets=$("$kiln" inspect "$work/m.kiln" | sed -n 's/^  prefill *\([0-9]*\) buckets.*/\1/p')
machine="$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
what="kiln compile $model -o model.kiln ($kernels kernels, $buckets prefill buckets, $target)"
rows=$(printf '| %s | %s | cold kernel cache | %.2f s |\n| %s | %s | warm kernel cache | %.2f s |\n' \
  "$(date +%F)" "$what" "$cold" "$(date +%F)" "$what" "$warm")
echo "machine: $machine; median of $runs runs"
echo "$rows"
if [ "${3:-}" = "--record" ]; then
  printf '\n| date | what | case | time |\n|---|---|---|---|\n%s\n\nMachine: %s. Median of %s runs.\n' \
    "$rows" "$machine" "$runs" >> bench/RESULTS.md
fi
