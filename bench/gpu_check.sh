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
# /tmp/kiln-gpu-check), to be added to bench/RESULTS.md. $OUT gets only the
# files worth fetching (the device tool brings back 8 at most): the report,
# measurements*.json and logs.tar.gz (every run's output); the rest stays in
# a scratch folder. Every step is time-boxed against one budget
# (GPU_CHECK_SECONDS, 570 by default, inside the device run's 590 s), so
# that a hung kernel costs its step, not the report.
#   - profiles llama2-7b's steps at batches 1 and 32 (kiln-run --profile:
#     each kernel's share of the step and its weight bandwidth);
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
work=$(mktemp -d /tmp/kiln-gpu-work.XXXXXX)
report="$out/gpu_check.md"
kit=gpu-kit
: >"$report"
say() { echo "$@" | tee -a "$report"; }
# Every run's output goes back as one archive, however the script ends.
trap 'tar -C "$work" --exclude="cand*" -czf "$out/logs.tar.gz" . 2>/dev/null; rm -rf "$work"' EXIT

budget=${GPU_CHECK_SECONDS:-570}
# box WANT RESERVE: WANT seconds, or fewer when the budget, less RESERVE
# for the steps that follow, has less left; 0 when under 5 are left.
box() {
  local left=$((budget - SECONDS - $2)) want=$1
  ((left < want)) && want=$left
  ((want < 5)) && want=0
  echo "$want"
}
# bounded SECONDS CMD...: CMD, killed after SECONDS (exit 124, saying so
# last on stderr), not run at 0.
bounded() {
  local seconds=$1
  shift
  if ((seconds == 0)); then
    echo "skipped: the check's $budget s were spent" >&2
    return 124
  fi
  timeout -k 5 "$seconds" "$@"
  local code=$?
  ((code == 124)) && echo "stopped by its time box ($seconds s)" >&2
  return $code
}

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
    tools/kiln-run/kiln-run.cpp -o "$work/kiln-run" \
    -Wl,--start-group "$kit"/lib/libabsl_*.a -Wl,--end-group -ldl -lpthread \
    2>"$work/kiln-run-build.log" || {
    say "FAIL: building kiln-run: $(head -3 "$work/kiln-run-build.log")"
    exit 1
  }
  run="$work/kiln-run"
fi

status=0
# A fixture that fails (the run, or its logits against Meta's) is run again
# without CUDA graphs, to tell a capture problem from a kernel's.
say "| fixture | weights | result | kiln-run says |"
say "|---|---|---|---|"
for m in tiny-gqa tiny-mha; do
  fixture="test/fixtures/$m"
  read -r prompt count < <(python3 -c "import json; d = json.load(open('$fixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
  for weights in model model-f16; do
    dump="$work/$m-$weights.safetensors"
    log="$work/$m-$weights.txt"
    # Runs the fixture and sets `result` (compare_logits.py's verdict, or
    # the error); fails unless the logits match.
    fixture_check() {
      rm -f "$dump"
      if bounded "$(box 60 400)" "$run" "$kit/$m.kiln" \
        --weights "$fixture/$weights" --device cuda --prompt-ids "$prompt" \
        --max-new-tokens "$count" --dump-logits "$dump" >"$log" 2>&1; then
        result=$(python3 test/compare_logits.py \
          "$fixture/expected.safetensors" "$dump" 5e-2)
      else
        result="FAIL: $(tail -1 "$log")"
        return 1
      fi
    }
    note=""
    if ! fixture_check; then
      status=1
      first=$result
      cp "$log" "${log%.txt}-graphs.txt"
      if KILN_CUDA_GRAPHS=0 fixture_check; then
        note=" (with CUDA graphs: $first; this is without them)"
      else
        note=" (also without CUDA graphs)"
      fi
    fi
    timing=$(grep -E "prefill|decode " "$log" | tr -s ' ' | paste -sd';')
    say "| $m | $weights | $result$note | $timing |"
  done
done
say ""

# compute-sanitizer on one fixture: memcheck (an out-of-bounds access or a
# misaligned load that the logits would not show) and racecheck (a shared
# memory race that the emu device's fixed thread order hides). The tool
# refuses some virtualized GPUs; that is reported, not counted as kiln's
# failure.
sanitizer=$(command -v compute-sanitizer ||
  echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ -x "$sanitizer" ]; then
  fixture=test/fixtures/tiny-gqa
  for tool in memcheck racecheck; do
    bounded "$(box 45 380)" "$sanitizer" --tool "$tool" --error-exitcode 9 \
      "$run" "$kit/tiny-gqa.kiln" --weights "$fixture/model-f16" --device cuda \
      --prompt-ids 1,2,3,4,5 --max-new-tokens 8 >"$work/$tool.txt" 2>&1
    case $? in
    0) say "compute-sanitizer $tool (tiny-gqa, prefill + 8 decode steps): no errors." ;;
    9)
      status=1
      say "FAIL: compute-sanitizer $tool: $(grep -m1 -E "Invalid|Misaligned|hazard|Race|error" "$work/$tool.txt")"
      ;;
    124) say "compute-sanitizer $tool: stopped by its time box." ;;
    *) say "compute-sanitizer $tool did not run here: $(grep -m1 -i "error" "$work/$tool.txt")" ;;
    esac
  done
  say ""
fi

bounded "$(box 30 340)" python3 - <<'PY' 2>&1 | tee -a "$report" | tee "$work/bandwidth.txt"
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
# run_7b SECONDS CASE BATCH NEW [FLAGS...]: kiln-run on llama2-7b with the
# case's prompts, twice on one device (the second run is reported).
run_7b() {
  local seconds=$1 name=$2 b=$3 n=$4
  shift 4
  bounded "$seconds" "$run" "$kit/llama2-7b.kiln" --random-weights \
    --device cuda --no-logits --repeat 2 --max-batch "$b" \
    --prompt-ids "@$work/prompts-$name.txt" --max-new-tokens "$n" "$@"
}
kiln_rows="$work/kiln.tsv"
: >"$kiln_rows"
while read -r name p n b; do
  python3 -c "
import random
for i in range($b):
    r = random.Random($p * 1000 + i)
    print(','.join(str(r.randrange(1, 32000)) for _ in range($p)))
" >"$work/prompts-$name.txt"
  if run_7b "$(box 90 300)" "$name" "$b" "$n" >"$work/7b-$name.txt" 2>&1; then
    python3 - "$work/7b-$name.txt" "$name" "$p" "$n" "$b" >>"$kiln_rows" <<'PY'
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
    say "FAIL: llama2-7b $name: $(tail -1 "$work/7b-$name.txt")"
  fi
done <<<"$cases"

# Where the time goes: every launch of llama2-7b's prefill and decode
# steps timed alone (kiln-run --profile; the second of two runs): a
# 2048-token prompt at batch 1 (cuBLAS and the tiled attention in prefill,
# the GEMVs and a long context's attention in decode), and 32 128-token
# prompts (the batched decode plan): each kernel's share and the bandwidth
# of its weight reads, for the next round of kernel work.
for spec in "decode-2048 1 2048 64" "batch-32 32 128 16"; do
  read -r name b p n <<<"$spec"
  if run_7b "$(box 60 260)" "$name" "$b" "$n" --profile \
    >"$work/profile-$name.txt" 2>&1; then
    say ""
    say "Profile of llama2-7b, batch $b ($p-token prompts, $n new tokens):"
    say ""
    say '```'
    sed -n '/profile /,$p' "$work/profile-$name.txt" | tee -a "$report"
    say '```'
  else
    status=1
    say "FAIL: profile of llama2-7b $name: $(tail -1 "$work/profile-$name.txt")"
  fi
done

# Tuning: llama2-7b's candidates (the kit's cand.tar.xz, from kiln tune
# --emit-candidates) timed with CUDA events, each folder time-boxed (cand:
# 512 and 2048 tokens; cand-short: the GEMMs of 16- and 64-token prompts
# and of decode steps of 8 and 32 sequences, cuBLAS against kiln's own); measurements*.json come back for kiln tune
# --measurements on the kiln machine (docs/tuning-db.md).
time_candidates() { # folder, seconds, measurements file
  local dir=$1 seconds=$2 file=$3
  if ((seconds == 0)); then
    say ""
    say "Timing $dir: skipped, the check's $budget s were spent."
  elif bounded "$seconds" "$run" --time-candidates "$work/$dir" --device cuda \
    --repeats 10 --measurements "$file" >"$work/time-$dir.txt" 2>&1; then
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
    say "FAIL: timing the tuning candidates in $dir: $(tail -1 "$work/time-$dir.txt")"
  fi
  rm -rf "${work:?}/$dir"
}
if [ -f "$kit/cand.tar.xz" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$kit/cand.tar.xz" "$work"
  time_candidates cand "$(box 150 120)" "$out/measurements.json"
  [ -d "$work/cand-short" ] &&
    time_candidates cand-short "$(box 50 90)" "$out/measurements-short.json"
fi

# The PyTorch peers on the same GPU, when PyTorch and transformers are here
# (time-boxed: torch.compile of llama2-7b takes minutes; each result is
# kept as it comes).
peers="$work/peers.jsonl"
: >"$peers"
PYTHONUNBUFFERED=1 bounded "$(box 240 15)" python3 bench/torch_peer.py \
  --model llama2-7b --cases 128:128:1,2048:128:1,128:128:8,128:128:32,512:2:1 \
  --json "$peers" >"$work/torch_peer.md" 2>"$work/torch_peer.log" ||
  echo "(PyTorch peers stopped: $(tail -1 "$work/torch_peer.log"))" >>"$work/torch_peer.md"

# One table: kiln, its model-bandwidth utilization (the weight and KV bytes
# a decode step reads, over the step time, over the copy bandwidth), each
# peer and kiln's ratio to it (above 1: kiln is faster), and the targets.
say ""
python3 bench/gpu_table.py "$kiln_rows" "$peers" "$work/bandwidth.txt" | tee -a "$report"
say ""
say "PyTorch peers as measured:"
say ""
tee -a "$report" <"$work/torch_peer.md"
say ""
say "The check took $SECONDS s of its $budget."
exit $status
