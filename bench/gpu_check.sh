#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, CUDA, a C++ compiler and
# Python but none of kiln's packages and no network. Needs gpu-kit/ (built
# beforehand by scripts/build-gpu-kit.sh on a kiln build machine, carried
# along with the repository). Within a few minutes it
#   - validates both fixtures on the GPU (kiln-run --device cuda on the
#     fixtures' bundles, F32 and F16 weights: float16 tolerance, exact
#     greedy tokens, as test/compare_logits.py judges);
#   - measures the device's copy bandwidth (with PyTorch, when present);
#   - measures llama2-7b (random fp16 weights) at batch 1: decode ms/token
#     after prompts of 128 and 2048 tokens, and the prefill time of 512-
#     and 2048-token prompts (time to first token);
# and writes a Markdown report to $OUT/gpu_check.md (else
# /tmp/kiln-gpu-check), to be added to bench/RESULTS.md.
#   - runs the same shapes in PyTorch with Hugging Face transformers (eager,
#     and torch.compile with a static cache: bench/torch_peer.py) when they
#     are installed.
# Not yet here (issue 5): batches of 8 and 32 (they need the batch
# scheduler) and the ratios to the peers in one table.
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

# Model-bandwidth utilization: the bytes a decode step must read (fp16
# weights, and the KV cache at its context) over the time, over the copy
# bandwidth measured above.
bandwidth=$(sed -n 's/^Copy bandwidth: \([0-9.]*\) TB\/s.*/\1/p' "$out/bandwidth.txt")
say ""
say "llama2-7b, random fp16 weights, batch 1, kiln-run --device cuda:"
say ""
say "| prompt tokens | new tokens | prefill (TTFT) | decode | tokens/s | MBU |"
say "|---|---|---|---|---|---|"
for case in "128 128" "512 16" "2048 128"; do
  read -r p n <<<"$case"
  ids=$(python3 -c "import random; r = random.Random($p); print(','.join(str(r.randrange(1, 32000)) for _ in range($p)))")
  if "$run" "$kit/llama2-7b.kiln" --random-weights --device cuda \
    --prompt-ids "$ids" --max-new-tokens "$n" >"$out/7b-$p.txt" 2>&1; then
    prefill=$(sed -n 's/^ *prefill *//p' "$out/7b-$p.txt")
    decode=$(sed -n 's/^ *decode *//p' "$out/7b-$p.txt")
    rate=$(echo "$decode" | awk '{ if ($1 > 0) printf "%.0f", 1000 / $1 }')
    mbu=$(echo "$decode" | awk -v bw="$bandwidth" -v ctx="$((p + n / 2))" \
      '{ if ($1 > 0 && bw > 0) printf "%.0f%%", 100 * (13.48e9 + 524288 * ctx) / ($1 / 1000) / (bw * 1e12); else print "-" }')
    say "| $p | $n | $prefill | $decode | $rate | $mbu |"
  else
    status=1
    say "| $p | $n | FAIL: $(tail -1 "$out/7b-$p.txt") | | | |"
  fi
done

# The PyTorch peers on the same GPU, when PyTorch and transformers are here
# (time-boxed: torch.compile of llama2-7b takes minutes).
say ""
timeout 300 python3 bench/torch_peer.py --model llama2-7b --cases 128:128,2048:128 \
  2>"$out/torch_peer.log" | tee -a "$report" ||
  say "PyTorch peers: stopped ($(tail -1 "$out/torch_peer.log"))"
exit $status
