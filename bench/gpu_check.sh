#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, CUDA, a C++ compiler and
# Python but none of kiln's packages and no network. Needs gpu-kit/ (built
# beforehand by scripts/build-gpu-kit.sh on a kiln build machine, carried
# along with the repository). Within a few minutes it
#   - validates both fixtures on the GPU (kiln-run --device cuda on the
#     fixtures' bundles, F32 and F16 weights: float16 tolerance, exact
#     greedy tokens, as test/compare_logits.py judges);
#   - measures the device's copy bandwidth (with PyTorch, when present);
#   - measures llama2-7b (random fp16 weights): decode tokens/s at batch 1
#     after prompts of 128 and 2048 tokens, throughput at batches of 8 and
#     32, and the prefill time of 512- and 2048-token prompts (time to
#     first token);
# and writes a Markdown report to $OUT/gpu_check.md (else
# /tmp/kiln-gpu-check), to be added to bench/RESULTS.md.
#   - runs the same shapes in PyTorch with Hugging Face transformers (eager,
#     and torch.compile with a static cache: bench/torch_peer.py) when they
#     are installed;
#   - prints one table: tokens/s (or ms), model-bandwidth utilization, the
#     ratio to each peer, and the issue's targets;
#   - times llama2-7b's tuning candidates (decode and prefill attention,
#     cuBLASLt's GEMM algorithms, kiln's own GEMM for short prompts)
#     with CUDA events: a table of the default knobs against the best, and
#     $OUT/measurements.json (and measurements-short.json) for kiln tune
#     --measurements.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kiln-gpu-check}
mkdir -p "$out"
report="$out/gpu_check.md"
kit=gpu-kit
: >"$report"
say() { echo "$@" | tee -a "$report"; }

say "## GPU check ($(date -u +%F))"
say ""
say "Machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores."
say ""
if [ ! -x "$kit/kiln-run" ]; then
  say "FAIL: no $kit/kiln-run: run scripts/build-gpu-kit.sh and carry gpu-kit/"
  exit 1
fi
run="$kit/kiln-run"
if ! "$run" --help >/dev/null 2>&1; then
  # An older C library than the build machine's: build the runtime here
  # from the repository, with the headers and archives the kit carries.
  say "The prebuilt kiln-run does not start here ($("$run" --help 2>&1 | head -1)); building it."
  cuda=${CUDA_HOME:-/usr/local/cuda}
  ${CXX:-c++} -std=c++20 -O2 -I. -I"$kit/include" -isystem "$cuda/include" \
    -DKILN_EMU_HEADER="\"$PWD/runtime/emu/cuda_emu.h\"" \
    -DKILN_CUDA_INCLUDE_DIR="\"$cuda/include\"" \
    -DKILN_CUDA_LIBRARY_DIR="\"$cuda/lib64\"" \
    runtime/*.cpp runtime/emu/*.cpp runtime/cuda/*.cpp \
    tools/kiln-run/kiln-run.cpp -o "$out/kiln-run" \
    -Wl,--start-group "$kit"/lib/libabsl_*.a -Wl,--end-group -ldl -lpthread \
    2>"$out/kiln-run-build.log" || {
    say "FAIL: building kiln-run: $(head -3 "$out/kiln-run-build.log")"
    exit 1
  }
  run="$out/kiln-run"
fi

status=0
say "| fixture | weights | result | kiln-run says |"
say "|---|---|---|---|"
for m in tiny-gqa tiny-mha; do
  fixture="test/fixtures/$m"
  read -r prompt count < <(python3 -c "import json; d = json.load(open('$fixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
  for weights in model model-f16; do
    dump="$out/$m-$weights.safetensors"
    if "$run" "$kit/$m.kiln" --weights "$fixture/$weights" --device cuda \
      --prompt-ids "$prompt" --max-new-tokens "$count" --dump-logits "$dump" \
      >"$out/$m-$weights.txt" 2>&1; then
      result=$(python3 test/compare_logits.py "$fixture/expected.safetensors" "$dump" 5e-2) || status=1
      timing=$(grep -E "prefill|decode " "$out/$m-$weights.txt" | tr -s ' ' | paste -sd';')
    else
      status=1
      result="FAIL: $(tail -1 "$out/$m-$weights.txt")"
      timing=""
    fi
    say "| $m | $weights | $result | $timing |"
  done
done
say ""

python3 - <<'PY' 2>&1 | tee -a "$report" | tee "$out/bandwidth.txt"
try:
    import torch
except ImportError:
    print("Copy bandwidth: not measured (no PyTorch here).")
    raise SystemExit
if not torch.cuda.is_available():
    print("Copy bandwidth: not measured (PyTorch sees no GPU).")
    raise SystemExit
n = 1 << 30  # bytes per buffer
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
for _ in range(3):
    b.copy_(a)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
reps = 20
start.record()
for _ in range(reps):
    b.copy_(a)
end.record()
torch.cuda.synchronize()
seconds = start.elapsed_time(end) / 1e3
# A copy reads and writes every byte.
print(f"Copy bandwidth: {2 * n * reps / seconds / 1e12:.2f} TB/s "
      f"(device-to-device copies of 1 GiB, read + write).")
PY

# llama2-7b with random fp16 weights, on each case: kiln-run (the requests
# run twice on one device and the second run is measured: the first loads
# modules, lets cuBLAS choose and captures the decode graphs), then the
# PyTorch peers on the same cases, then one table.
#   name      prompt new batch
cases="decode-128  128  128 1
decode-2048 2048 128 1
batch-8     128  128 8
batch-32    128  128 32
ttft-512    512  1   1
ttft-2048   2048 1   1"
kiln_rows="$out/kiln.tsv"
: >"$kiln_rows"
while read -r name p n b; do
  python3 -c "
import random
for i in range($b):
    r = random.Random($p * 1000 + i)
    print(','.join(str(r.randrange(1, 32000)) for _ in range($p)))
" >"$out/prompts-$name.txt"
  if "$run" "$kit/llama2-7b.kiln" --random-weights --device cuda --no-logits \
    --repeat 2 --max-batch "$b" --prompt-ids "@$out/prompts-$name.txt" \
    --max-new-tokens "$n" >"$out/7b-$name.txt" 2>&1; then
    python3 - "$out/7b-$name.txt" "$name" "$p" "$n" "$b" >>"$kiln_rows" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
name, p, n, b = sys.argv[2], *map(int, sys.argv[3:])
if b == 1:  # one request: prefill X ms, decode Y ms/token
    ttft = float(re.search(r"prefill +([0-9.]+) ms", text).group(1))
    d = re.search(r"decode +([0-9.]+) ms/token", text)
    rate = 1000 / float(d.group(1)) if d else 0
else:  # a batch: decode S steps, T tokens, Z ms/step, R tokens/s
    ttft = 0
    rate = float(re.search(r"([0-9.]+) tokens/s\n", text).group(1))
print(f"{name}\t{p}\t{n}\t{b}\t{ttft}\t{rate}")
PY
  else
    status=1
    say "FAIL: llama2-7b $name: $(tail -1 "$out/7b-$name.txt")"
  fi
done <<<"$cases"

# Tuning: llama2-7b's candidates (the kit's cand.tar.xz, from kiln tune
# --emit-candidates) timed with CUDA events, each folder time-boxed (cand:
# 512 and 2048 tokens; cand-short: the GEMMs of 16- and 64-token prompts
# and of decode steps of 8 and 32 sequences, cuBLAS against kiln's own); measurements*.json come back for kiln tune
# --measurements on the kiln machine (docs/tuning-db.md).
time_candidates() { # folder, seconds, measurements file
  local dir=$1 seconds=$2 file=$3
  if timeout "$seconds" "$run" --time-candidates "$out/$dir" --device cuda \
    --repeats 10 --measurements "$file" >"$out/time-$dir.txt" 2>&1; then
    say ""
    python3 bench/measure_table.py "$file" | tee -a "$report"
  elif [ -f "$file.partial" ]; then
    # Stopped by the time box: what it measured is kept.
    mv "$file.partial" "$file"
    say ""
    say "(Timing $dir was stopped at $seconds s; these are the bundles it finished.)"
    python3 bench/measure_table.py "$file" | tee -a "$report"
  else
    status=1
    say ""
    say "FAIL: timing the tuning candidates in $dir: $(tail -1 "$out/time-$dir.txt")"
  fi
  rm -rf "${out:?}/$dir"
}
if [ -f "$kit/cand.tar.xz" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$kit/cand.tar.xz" "$out"
  time_candidates cand 150 "$out/measurements.json"
  [ -d "$out/cand-short" ] &&
    time_candidates cand-short 50 "$out/measurements-short.json"
fi

# The PyTorch peers on the same GPU, when PyTorch and transformers are here
# (time-boxed: torch.compile of llama2-7b takes minutes; each result is
# kept as it comes).
peers="$out/peers.jsonl"
: >"$peers"
timeout 240 python3 bench/torch_peer.py --model llama2-7b \
  --cases 128:128:1,2048:128:1,128:128:8,128:128:32,512:2:1 --json "$peers" \
  >"$out/torch_peer.md" 2>"$out/torch_peer.log" ||
  echo "(PyTorch peers stopped: $(tail -1 "$out/torch_peer.log"))" >>"$out/torch_peer.md"

# One table: kiln, its model-bandwidth utilization (the weight and KV bytes
# a decode step reads, over the step time, over the copy bandwidth), each
# peer and kiln's ratio to it (above 1: kiln is faster), and the targets.
say ""
python3 bench/gpu_table.py "$kiln_rows" "$peers" "$out/bandwidth.txt" | tee -a "$report"
say ""
say "PyTorch peers as measured:"
say ""
cat "$out/torch_peer.md" | tee -a "$report"
exit $status
