#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, CUDA, a C++ compiler and
# Python but none of kiln's packages and no network. Needs gpu-kit/ (built
# beforehand by scripts/build-gpu-kit.sh on a kiln build machine, carried
# along with the repository; another folder: GPU_CHECK_KIT). Within a few
# minutes it
#   - validates both fixtures on the GPU (kiln-run --device cuda on the
#     fixtures' bundles, F32 and F16 weights: float16 tolerance, exact
#     greedy tokens, as test/compare_logits.py judges);
#   - runs the kit's split models (tensor parallelism) against their
#     fixtures: NCCL's ranks as threads and as processes with a GPU a
#     rank, else the ranks on one GPU through host memory;
#   - runs each fixture's prompt four times as one batch, and once joining
#     a running batch, and holds every request's logits to Meta's, with
#     CUDA graphs and without;
#   - checks that llama2-7b (random weights) gives the same greedy tokens
#     to 8 copies of a prompt decoded as one batch as to the prompt alone,
#     with CUDA graphs and without;
#   - runs compute-sanitizer's memcheck and racecheck on kiln's kernels;
#   - measures the device's copy bandwidth (with PyTorch, when present);
#   - measures llama2-7b (random fp16 weights): decode tokens/s at batch 1
#     after prompts of 128 and 2048 tokens, throughput at batches of 8 and
#     32, and the prefill time of 512- and 2048-token prompts (time to
#     first token); and quantized (int4-g128, fp8), decode at batch 1 and
#     fp8's W8A8 prefill of 2048 tokens, each against f16;
#   - profiles llama2-7b's steps at batches 1 and 32 (kiln-run --profile:
#     each kernel's share of the step and its weight bandwidth; with the
#     kit's costs file, each kernel's achieved GB/s and TFLOP/s and the
#     cost model's predicted time beside the measured one);
#   - times llama2-7b's tuning candidates (decode and prefill attention,
#     cuBLASLt's GEMM algorithms, kiln's own GEMM for short prompts, the
#     int4-g128 decode GEMVs' split-K) with CUDA events: a table of the
#     default knobs against the best, and $OUT/measurements.json (and
#     measurements-short.json, measurements-quant.json) for kiln tune
#     --measurements;
#   - runs the same shapes in PyTorch with Hugging Face transformers (eager,
#     and torch.compile with a static cache: bench/torch_peer.py) when they
#     are installed;
#   - prints one table: tokens/s (or ms), model-bandwidth utilization, the
#     ratio to each peer, and the issue's targets;
# and writes a Markdown report to $OUT/gpu_check.md (else
# /tmp/kiln-gpu-check), to be added to bench/RESULTS.md. $OUT gets only the
# files worth fetching (the device tool brings back 8 at most): the report,
# measurements*.json and logs.tar.gz (every run's output); the rest stays in
# a scratch folder. Every step is time-boxed against one budget
# (GPU_CHECK_SECONDS, 420 by default, inside the device run's 450 s, so
# that a 15-minute session has room to run it again), so that a hung
# kernel costs its step, not the report.
#
# GPU_CHECK_DEVICE=emu runs every step on the emu device instead, as a dry
# run on a machine without a GPU (test/e2e/gpu-check-emu.test): the kit of
# scripts/build-gpu-kit.sh --emu (gpu-kit-emu/), tiny shapes, tiny-gqa
# standing in for llama2-7b; the steps that need a GPU (compute-sanitizer,
# the copy bandwidth, the PyTorch peers) say that they did not run.
# docs/gpu-check.md tells how to run it and how to read the report.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
device=${GPU_CHECK_DEVICE:-cuda}
# The shapes of each device. On emu, a tiny model stands in for llama2-7b
# with prompts of tens of tokens (the names of the cases stay, their shapes
# are in the table), so that every step takes seconds there.
case $device in
cuda)
  kit=${GPU_CHECK_KIT:-gpu-kit}
  model="$kit/llama2-7b.kiln" name=llama2-7b vocab=32000
  # The grouped int4 format of the quantized profile and split-K timings.
  qformat=int4-g128
  #   name      prompt new batch
  cases="decode-128  128  128 1
decode-2048 2048 128 1
batch-8     128  128 8
batch-32    128  128 32
ttft-512    512  1   1
ttft-2048   2048 1   1"
  #   case: batch, prompt tokens, new tokens
  profiles="decode-2048 1 2048 64
batch-32 32 128 16"
  same_batch=8 same_prompt=64 same_new=32 # the batch-1-against-8 check
  graph_modes="on off" repeats=10
  # The server under load: clients, seconds, prompt tokens, new tokens.
  serve_load="64 20 128 64"
  ;;
emu)
  kit=${GPU_CHECK_KIT:-gpu-kit-emu}
  model="$kit/stand-in.kiln" name="tiny-gqa (for llama2-7b)" vocab=320
  # tiny-gqa's rows of 64 hold no group of 128.
  qformat=int4-g32
  cases="decode-128  16 4 1
decode-2048 48 4 1
batch-8     16 4 2
batch-32    16 4 4
ttft-512    32 1 1
ttft-2048   48 1 1"
  profiles="decode-2048 1 48 4
batch-32 4 16 4"
  # emu has no graphs: one run of each ("-").
  same_batch=4 same_prompt=8 same_new=8 graph_modes="-" repeats=2
  serve_load="4 3 16 8"
  ;;
*)
  echo "GPU_CHECK_DEVICE: '$device' is not cuda or emu" >&2
  exit 2
  ;;
esac

# The kit travels packed (gpu-kit.tar.xz: its bundles share most of their
# bytes, and the device tool carries 64 MiB at most, the repository
# included): unpacked here, with Python (the machine may lack xz).
if [ ! -d "$kit" ] && [ -f "$kit.tar.xz" ]; then
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$kit.tar.xz" "$(dirname "$kit")" || exit 1
fi

out=${OUT:-/tmp/kiln-gpu-check}
mkdir -p "$out"
work=$(mktemp -d /tmp/kiln-gpu-work.XXXXXX)
report="$out/gpu_check.md"
: >"$report"
say() { echo "$@" | tee -a "$report"; }
# A table cell: a '|' in a message would end it.
cell() { echo "${1//|/\\|}"; }
# Every run's output goes back as one archive, however the script ends.
trap 'tar -C "$work" --exclude="cand*" -czf "$out/logs.tar.gz" . 2>/dev/null; rm -rf "$work"' EXIT

budget=${GPU_CHECK_SECONDS:-420}
# box WANT RESERVE: WANT seconds, or fewer when the budget, less RESERVE
# for the steps that follow, has less left; 0 when under 5 are left. The
# reserves are sized for the default budget and scale with another.
box() {
  local want=$1 left=$((budget - SECONDS - $2 * budget / 420))
  ((left < want)) && want=$left
  ((want < 5)) && want=0
  echo "$want"
}
skip="skipped: the check's $budget s were spent"
# bounded SECONDS CMD...: CMD, killed after SECONDS (exit 124, saying so
# last on stderr), not run at 0 (saying $skip).
bounded() {
  local seconds=$1
  shift
  if ((seconds == 0)); then
    echo "$skip" >&2
    return 124
  fi
  timeout -k 5 "$seconds" "$@"
  local code=$?
  ((code == 124)) && echo "stopped by its time box ($seconds s)" >&2
  return $code
}
# skipped LOG: whether the run that wrote LOG never started. A step the
# budget left out is reported as such, not as kiln's failure.
skipped() { [ "$(tail -1 "$1" 2>/dev/null)" = "$skip" ]; }
# not_run LOG: `result` for a run that did not succeed: the budget's skip
# (not a failure), else FAIL with the run's last line (and status 1).
not_run() {
  if skipped "$1"; then
    result=$skip
  else
    status=1
    result="FAIL: $(tail -1 "$1")"
  fi
}

# The GPU as nvidia-smi names it (its spec bandwidth, the modelled GPU of
# the profile's predictions); none on emu.
gpu_name=""
[ "$device" = cuda ] &&
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ "$device" = emu ]; then
  say "## GPU check, emu dry run ($(date -u +%F))"
  say ""
  say "Machine: no GPU; the emu device (the CUDA kernels on the CPU), $(nproc) CPU cores."
  say "A dry run: tiny shapes, $name; its times mean nothing."
else
  say "## GPU check ($(date -u +%F))"
  say ""
  say "Machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>/dev/null | head -1), $(nproc) CPU cores."
fi
say ""
if [ ! -x "$kit/kiln-run" ] || [ ! -f "$model" ]; then
  say "FAIL: no $kit/kiln-run or $model: run scripts/build-gpu-kit.sh$([ "$device" = emu ] && echo " --emu") and carry its folder"
  exit 1
fi
run="$kit/kiln-run"
if ! "$run" --help >/dev/null 2>&1; then
  if [ "$device" = emu ]; then
    say "FAIL: $run does not start: $("$run" --help 2>&1 | head -1)"
    exit 1
  fi
  # An older C library than the build machine's: build the runtime here
  # from the repository, with the headers and archives the kit carries.
  say "The prebuilt kiln-run does not start here ($("$run" --help 2>&1 | head -1)); building it."
  cuda=${CUDA_HOME:-/usr/local/cuda}
  ${CXX:-c++} -std=c++20 -O2 -I. -I"$kit/include" -isystem "$cuda/include" \
    -DKILN_EMU_HEADER="\"$PWD/runtime/emu/cuda_emu.h\"" \
    -DKILN_CUDA_INCLUDE_DIR="\"$cuda/include\"" \
    -DKILN_CUDA_LIBRARY_DIR="\"$cuda/lib64\"" \
    runtime/*.cpp runtime/emu/*.cpp runtime/cuda/*.cpp serve/*.cpp \
    tools/kiln-run/kiln-run.cpp -o "$work/kiln-run" \
    -Wl,--start-group "$kit"/lib/libabsl_*.a -Wl,--end-group -ldl -lpthread \
    2>"$work/kiln-run-build.log" || {
    say "FAIL: building kiln-run: $(head -3 "$work/kiln-run-build.log")"
    exit 1
  }
  run="$work/kiln-run"
fi

# The tuning candidates (the kit's cand.tar.xz, from kiln tune
# --emit-candidates), unpacked here and timed last.
[ -f "$kit/cand.tar.xz" ] &&
  python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
    "$kit/cand.tar.xz" "$work"
# The emu device compiles each kernel with the host compiler on first use
# (then its cache has it): every bundle's first, outside the budget, so
# that the boxes time runs, not compiles. A bundle that fails here fails
# in its step too.
if [ "$device" = emu ]; then
  for b in "$kit"/*.kiln "$work"/cand*/*.kiln; do
    [ -f "$b" ] && "$run" "$b" --random-weights --device emu --prompt-ids 1 \
      --max-new-tokens 1 --no-logits >>"$work/emu-compile.txt" 2>&1
  done
  say "(The emu kernels were compiled in $SECONDS s, outside the budget.)"
  say ""
  SECONDS=0
fi

# Timing a folder of tuning candidates with CUDA events, time-boxed;
# measurements*.json come back for kiln tune --measurements on the kiln
# machine (docs/tuning-db.md). A candidate that did not run is rejected
# with its error, which the table lists.
time_candidates() { # folder, seconds, measurements file
  local dir=$1 seconds=$2 file=$3
  if ((seconds == 0)); then
    say "Timing $dir: $skip."
  elif bounded "$seconds" "$run" --time-candidates "$work/$dir" --device "$device" \
    --repeats "$repeats" --measurements "$file" >"$work/time-$dir.txt" 2>&1; then
    python3 bench/measure_table.py "$file" | tee -a "$report"
  elif [ -f "$file.partial" ]; then
    # Stopped by the time box: what it measured is kept.
    mv "$file.partial" "$file"
    say "(Timing $dir was stopped at $seconds s; these are the bundles it finished.)"
    say ""
    python3 bench/measure_table.py "$file" | tee -a "$report"
  else
    status=1
    say "FAIL: timing the tuning candidates in $dir: $(tail -1 "$work/time-$dir.txt")"
  fi
  say ""
  rm -rf "${work:?}/$dir"
}

status=0
# The fixtures the kit holds bundles of (the emu kit: tiny-gqa and tiny-mha;
# the GPU's also the head dims 96 and 128, from transformers).
fixtures=""
for m in tiny-gqa tiny-mha tiny-dh96 tiny-dh128; do
  [ -f "$kit/$m.kiln" ] && fixtures+="$m "
done
# A fixture that fails (the run, or its logits against Meta's) is run again
# without CUDA graphs or PDL and synchronized after every launch
# (KILN_CUDA_SYNC=1): a capture or PDL problem passes then, and a kernel's
# fault is named (the kernel, its grid, block and plan) in the retry's last
# line.
say "| fixture | weights | result | kiln-run says |"
say "|---|---|---|---|"
for m in $fixtures; do
  fixture="test/fixtures/$m"
  read -r prompt count < <(python3 -c "import json; d = json.load(open('$fixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
  for weights in model model-f16; do
    [ -d "$fixture/$weights" ] || continue # the head-dim fixtures: model/ only
    dump="$work/$m-$weights.safetensors"
    log="$work/$m-$weights.txt"
    # fixture_check LOG: runs the fixture (its output in LOG) and sets
    # `result` (compare_logits.py's verdict, or the run's last line);
    # fails unless the logits match.
    fixture_check() {
      rm -f "$dump"
      if bounded "$(box 60 330)" "$run" "$kit/$m.kiln" \
        --weights "$fixture/$weights" --device "$device" --prompt-ids "$prompt" \
        --max-new-tokens "$count" --dump-logits "$dump" >"$1" 2>&1; then
        result=$(python3 test/compare_logits.py \
          "$fixture/expected.safetensors" "$dump" 5e-2)
      else
        not_run "$1"
        return 1
      fi
    }
    if ! fixture_check "$log" && [ "$result" != "$skip" ]; then
      status=1
      first=$result
      KILN_CUDA_GRAPHS=0 KILN_CUDA_PDL=0 KILN_CUDA_SYNC=1 fixture_check "${log%.txt}-retry.txt"
      result="$first; again without CUDA graphs or PDL, synchronized: $result"
    fi
    # The first run's times, else the retry's.
    timing=$(cat "$log" "${log%.txt}-retry.txt" 2>/dev/null |
      grep -E "^ +(prefill|decode) " | head -2 | tr -s ' ' | sed 's/^ //' |
      paste -sd';' | sed 's/;/; /g')
    say "| $m | $weights | $(cell "$result") | $timing |"
  done
done
say ""

# Quantized weights and KV caches (the kit's quantized.txt: a bundle, its
# weights, its transformers fixture and tolerance a line), each fixture's
# prompt and greedy continuation.
if [ -f "$kit/quantized.txt" ]; then
  say "Quantized weights and KV caches (issue 17), each against its transformers fixture:"
  say ""
  say "| bundle | fixture | result |"
  say "|---|---|---|"
  while read -r qname qweights qfixture tol; do
    read -r prompt count < <(python3 -c "import json; d = json.load(open('$qfixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
    dump="$work/$qname.safetensors"
    log="$work/$qname.txt"
    if bounded "$(box 30 330)" "$run" "$kit/$qname.kiln" --weights "$qweights" \
      --device "$device" --prompt-ids "$prompt" --max-new-tokens "$count" \
      --dump-logits "$dump" </dev/null >"$log" 2>&1; then
      result=$(python3 test/compare_logits.py "$qfixture/expected.safetensors" \
        "$dump" "$tol")
      case $result in ok:*) ;; *) status=1 ;; esac
    else
      not_run "$log"
    fi
    say "| $qname | ${qfixture#test/fixtures/} | $(cell "$result") |"
  done <"$kit/quantized.txt"
  say ""
fi

# Split models (issue 21; the kit's tp.txt: a bundle, its weights, its
# fixture and its ranks a line), each against its fixture. With a GPU a
# rank, NCCL's ranks as threads of kiln-run and as processes meeting at a
# rendezvous (test/e2e/Inputs/run_ranks.py starts them, as torchrun); with
# fewer GPUs than ranks NCCL cannot run (it refuses two ranks on one GPU),
# so the ranks share the GPU and meet in host memory
# (KILN_TP_COLLECTIVE=host), which checks the ranks' slices and plans.
if [ -f "$kit/tp.txt" ]; then
  gpus=1
  [ "$device" = cuda ] && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  say "Split models (issue 21), each against its fixture, on $([ "$device" = cuda ] && echo "$gpus GPU(s)" || echo emu):"
  say ""
  say "| bundle | ranks | ranks as | result |"
  say "|---|---|---|---|"
  while read -r tname tweights tfixture ranks; do
    read -r prompt count < <(python3 -c "import json; d = json.load(open('$tfixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
    if [ "$device" = emu ]; then
      modes="threads processes"
    elif ((gpus >= ranks)); then
      modes="threads processes"
    else
      modes="host"
    fi
    for mode in $modes; do
      dump="$work/$tname-$mode.safetensors"
      log="$work/$tname-$mode.txt"
      args=("$kit/$tname.kiln" --weights "$tweights" --device "$device"
        --prompt-ids "$prompt" --max-new-tokens "$count" --dump-logits "$dump")
      case $mode in
      processes)
        label="processes (--rendezvous)"
        bounded "$(box 40 300)" python3 test/e2e/Inputs/run_ranks.py \
          --world-size "$ranks" -- "$run" "${args[@]}" </dev/null >"$log" 2>&1
        ;;
      host)
        label="threads, one GPU (host memory)"
        KILN_TP_COLLECTIVE=host bounded "$(box 30 300)" "$run" "${args[@]}" \
          </dev/null >"$log" 2>&1
        ;;
      *)
        label="threads"
        bounded "$(box 30 300)" "$run" "${args[@]}" </dev/null >"$log" 2>&1
        ;;
      esac
      if [ -f "$dump" ]; then
        result=$(python3 test/compare_logits.py "$tfixture/expected.safetensors" \
          "$dump" 5e-2)
        case $result in ok:*) ;; *) status=1 ;; esac
      else
        not_run "$log"
      fi
      say "| $tname | $ranks | $label | $(cell "$result") |"
    done
  done <"$kit/tp.txt"
  [ "$device" = cuda ] && ((gpus < 2)) &&
    say "" && say "NCCL's ranks did not run: one GPU here (each rank needs its own)."
  say ""
fi

# Batches (the kit's fixtures are compiled for 4 sequences): the prompt
# four times at once, and the prompt joining a batch that is decoding. For
# the latter, request 0 is a prefix of the prompt that stops at its first
# token (bench/gpu_batch.py late-plan picks it and the stop id from Meta's
# logits), so that the last of the four copies behind it takes the freed
# slot at the second decode step, beside three running ones. Every copy's
# logits are held to Meta's.
say "Each fixture's prompt in batches (F16 weights, --max-batch 4; every copy's logits against Meta's):"
say ""
say "| fixture | requests | CUDA graphs | result |"
say "|---|---|---|---|"
for m in $fixtures; do
  fixture="test/fixtures/$m"
  f16="$fixture/model-f16"
  [ -d "$f16" ] || f16="$fixture/model"
  read -r prompt count < <(python3 -c "import json; d = json.load(open('$fixture/expected.json')); print(','.join(map(str, d['prompt_tokens'])), len(d['greedy_continuation']))")
  plan=$(python3 bench/gpu_batch.py late-plan "$fixture" 2>&1)
  read -r late stop <<<"$plan"
  for graphs in $graph_modes; do
    for kind in together late; do
      log="$work/batch-$m-$kind-graphs-${graphs/#-/na}.txt"
      dump="${log%.txt}.safetensors"
      if [ "$kind" = together ]; then
        ids="$prompt;$prompt;$prompt;$prompt" args=() first=0 last=3
        what="4 x the prompt, one batch"
      else
        ids=$late args=(--stop-ids "$stop") first=1 last=4
        what="the prompt joining 3 running copies"
      fi
      env=()
      [ "$graphs" = off ] && env=(KILN_CUDA_GRAPHS=0)
      if [ "$kind" = late ] && [[ $plan != [0-9]* ]]; then
        status=1
        result="FAIL: bench/gpu_batch.py late-plan: $plan"
      elif bounded "$(box 30 320)" env "${env[@]}" "$run" "$kit/$m.kiln" \
        --weights "$f16" --device "$device" --max-batch 4 \
        --prompt-ids "$ids" --max-new-tokens "$count" "${args[@]}" \
        --dump-logits "$dump" >"$log" 2>&1; then
        result=$(python3 bench/gpu_batch.py dumps \
          "$fixture/expected.safetensors" "$dump" "$first" "$last") || status=1
        if [ "$kind" = late ]; then
          # A join that did not happen comes first: then the row fails.
          if joined=$(python3 bench/gpu_batch.py joined "$log" "$count" 5); then
            result="$result; $joined"
          else
            status=1
            result="$joined; $result"
          fi
        fi
      else
        not_run "$log"
      fi
      say "| $m | $what | $graphs | $(cell "$result") |"
    done
  done
done
say ""

# The batched decode plan against the batch-1 plan on llama2-7b's shapes:
# copies of one prompt, all but one decoded as a batch, the last alone
# after them (a batch of 1): the greedy tokens must agree. Where they part,
# the lone run's logits tell a near tie (fp16 rounding of random weights)
# from a fault.
say "$name, random weights: $((same_batch + 1)) copies of a $same_prompt-token prompt at --max-batch $same_batch ($same_batch decoded as one batch, the last alone), $same_new greedy tokens each:"
say ""
say "| CUDA graphs | result |"
say "|---|---|"
python3 -c "
import random
r = random.Random(7)
p = ','.join(str(r.randrange(1, $vocab)) for _ in range($same_prompt))
print('\n'.join([p] * ($same_batch + 1)))
" >"$work/prompts-same.txt"
for graphs in $graph_modes; do
  log="$work/7b-same-graphs-${graphs/#-/na}.txt"
  env=()
  [ "$graphs" = off ] && env=(KILN_CUDA_GRAPHS=0)
  if bounded "$(box 60 300)" env "${env[@]}" "$run" "$model" --random-weights \
    --device "$device" --max-batch "$same_batch" \
    --prompt-ids "@$work/prompts-same.txt" --max-new-tokens "$same_new" \
    --dump-logits "${log%.txt}.safetensors" >"$log" 2>&1; then
    result=$(python3 bench/gpu_batch.py tokens "$log" \
      "${log%.txt}.safetensors") || status=1
  else
    not_run "$log"
  fi
  say "| $graphs | $(cell "$result") |"
  rm -f "${log%.txt}".*.safetensors # llama2-7b's: too big for the logs
done
say ""

# compute-sanitizer on one fixture: memcheck (an out-of-bounds access or a
# misaligned load that the logits would not show) and racecheck (a shared
# memory race that the emu device's fixed thread order hides), on kiln's
# kernels only (their entry names start with kiln_; cuBLAS's are not
# ours to fix). A finding exits with --error-exitcode; any other failure
# is the tool's (it refuses some virtualized GPUs) and is reported as not
# run, not counted as kiln's. racecheck cannot run cuBLAS's Hopper GEMM
# (an H200, 2026-12-04: "Internal Sanitizer Error: The Sanitizer failed to
# handle a hardware exception" in cublasLtMatmul, graphs on or off), so it
# runs the bundles whose GEMMs are kiln's own (gemm-algo=-2): tiny-gqa's,
# and an int4-g128 one (the quantized GEMM and GEMVs); memcheck runs the
# default bundle, cuBLAS and all.
sanitizer=$(command -v compute-sanitizer ||
  echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
if [ "$device" = emu ]; then
  say "compute-sanitizer: not run (emu dry run: there is no GPU)."
elif [ ! -x "$sanitizer" ]; then
  say "compute-sanitizer: not run (not found at $sanitizer)."
else
  F=test/fixtures
  while read -r tool log bundle weights what; do
    bounded "$(box 30 280)" "$sanitizer" --tool "$tool" --error-exitcode 9 \
      --kernel-name kns=kiln_ \
      "$run" "$kit/$bundle" --weights "$weights" --device cuda \
      --prompt-ids 1,2,3,4,5 --max-new-tokens 8 >"$work/$log.txt" 2>&1
    code=$?
    tool="$tool (kiln's kernels, ${what//_/ }, prefill + 8 decode steps)"
    case $code in
    0) say "compute-sanitizer $tool: no errors." ;;
    9)
      status=1
      # Its first finding: the first of its own lines (=========) after
      # the banner.
      say "FAIL: compute-sanitizer $tool: $(grep -E '^=+ ' "$work/$log.txt" |
        grep -m1 -vE 'COMPUTE-SANITIZER|^=+ *$' | sed 's/^=* *//')"
      ;;
    124)
      if skipped "$work/$log.txt"; then
        say "compute-sanitizer $tool: $skip."
      else
        say "compute-sanitizer $tool: stopped by its time box."
      fi
      ;;
    *)
      first=$(grep -m1 -E '^=+ .*([Ee]rror|[Uu]nsupported|not supported)|error:' \
        "$work/$log.txt" || tail -1 "$work/$log.txt")
      first=${first#"${first%%[!= ]*}"} # less the tool's "========= "
      say "compute-sanitizer $tool did not run here (exit $code): $first"
      ;;
    esac
    #  tool    log           bundle                          weights               what
  done <<EOF
memcheck  memcheck       tiny-gqa.kiln                   $F/tiny-gqa/model-f16 tiny-gqa
racecheck racecheck      tiny-gqa-own-gemm.kiln          $F/tiny-gqa/model-f16 tiny-gqa_with_kiln's_GEMM
racecheck racecheck-int4 q-tiny-dh128-int4-own-gemm.kiln $F/tiny-dh128/model   tiny-dh128_int4-g128_with_kiln's_GEMM
EOF
fi
say ""

if [ "$device" = emu ]; then
  echo "Copy bandwidth: not measured (emu dry run: there is no GPU)." >"$work/bandwidth.txt"
else
  bounded "$(box 30 260)" python3 - >"$work/bandwidth.txt" 2>&1 <<'PY'
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
  skipped "$work/bandwidth.txt" &&
    echo "Copy bandwidth: not measured ($skip)." >"$work/bandwidth.txt"
fi
tee -a "$report" <"$work/bandwidth.txt"
say ""

# llama2-7b with random fp16 weights, on each case: kiln-run (the requests
# run twice on one device and the second run is measured: the first loads
# modules, lets cuBLAS choose and captures the decode graphs), then the
# PyTorch peers on the same cases, then one table.
# run_7b SECONDS CASE BATCH NEW [FLAGS...]: kiln-run on llama2-7b with the
# case's prompts, twice on one device (the second run is reported).
run_7b() {
  local seconds=$1 shape=$2 b=$3 n=$4
  shift 4
  bounded "$seconds" "$run" "$model" --random-weights \
    --device "$device" --no-logits --repeat 2 --max-batch "$b" \
    --prompt-ids "@$work/prompts-$shape.txt" --max-new-tokens "$n" "$@"
}
kiln_rows="$work/kiln.tsv"
: >"$kiln_rows"
said=0 # a case's line in the report, then a blank line after them
while read -r shape p n b; do
  python3 -c "
import random
for i in range($b):
    r = random.Random($p * 1000 + i)
    print(','.join(str(r.randrange(1, $vocab)) for _ in range($p)))
" >"$work/prompts-$shape.txt"
  if run_7b "$(box 90 220)" "$shape" "$b" "$n" >"$work/7b-$shape.txt" 2>&1; then
    python3 - "$work/7b-$shape.txt" "$shape" "$p" "$n" "$b" >>"$kiln_rows" <<'PY'
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
  elif skipped "$work/7b-$shape.txt"; then
    say "$name $shape: $skip." && said=1
  else
    status=1
    say "FAIL: $name $shape: $(tail -1 "$work/7b-$shape.txt")" && said=1
  fi
done <<<"$cases"
((said)) && say ""

# Quantized llama2-7b (issue 17's speed targets), where the kit has the
# bundles (the cuda kit all, the emu kit int4-g32's): decode at batch 1
# after a 128-token prompt in int4-g128 and fp8, and fp8's W8A8 prefill
# (quant-gemm=2) of a 2048-token prompt, each beside the f16 row above.
qsaid=0
for q in $qformat:decode-128 fp8-w8a8:decode-128 fp8-w8a8:ttft-2048; do
  bundle="${model%.kiln}-${q%%:*}.kiln" shape=${q##*:}
  [ -f "$bundle" ] && [ -f "$work/prompts-$shape.txt" ] || continue
  if ((!qsaid)); then
    say "$name, random weights, quantized (kiln-run; the f16 row is the table's below):"
    say ""
    say "| weights | case | kiln | f16 | speedup over f16 |"
    say "|---|---|---|---|---|"
    qsaid=1
  fi
  read -r n < <(awk -v s="$shape" '$1 == s {print $3}' <<<"$cases")
  log="$work/7b-${q%%:*}-$shape.txt"
  if model="$bundle" run_7b "$(box 40 250)" "$shape" 1 "$n" >"$log" 2>&1; then
    result=$(python3 - "$log" "$kiln_rows" "$shape" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
f16 = {r.split("\t")[0]: r.split("\t") for r in open(sys.argv[2]).read().splitlines()}
shape = sys.argv[3]
if shape.startswith("ttft"):
    got = float(re.search(r"prefill +([0-9.]+) ms", text).group(1))
    base = float(f16[shape][4]) if shape in f16 else 0
    print(f"{got:.1f} ms | " + (f"{base:.1f} ms | {base / got:.2f}x" if base else "- | -"))
else:
    got = 1000 / float(re.search(r"decode +([0-9.]+) ms/token", text).group(1))
    base = float(f16[shape][5]) if shape in f16 else 0
    print(f"{got:.0f} tokens/s | " + (f"{base:.0f} tokens/s | {got / base:.2f}x" if base else "- | -"))
PY
)
  else
    not_run "$log"
    result="$(cell "$result") | - | -"
  fi
  say "| ${q%%:*} | $shape | $result |"
done
((qsaid)) && say ""

# The quantized GEMVs timed alone (issue 17): int4-g128's decode steps
# after a 128-token prompt (kiln-run --profile, 16 new tokens; the emu
# kit's stand-in, int4-g32, after its prompt), each kernel's weight
# bandwidth beside the cost model's prediction. The model's issue share
# is fit to 2026-12-04's times (docs/cost-model.md, "Calibration"); it
# calls today's GEMVs memory-bound with issue within 10% of their bytes,
# and these times say whether a warp's few passes overlap the two (a
# launch timed alone adds about 3.6 us to the model's).
qbundle="${model%.kiln}-$qformat.kiln"
if [ -f "$qbundle" ] && [ -f "$work/prompts-decode-128.txt" ]; then
  log="$work/profile-int4.txt"
  read -r qp < <(awk '$1 == "decode-128" {print $2}' <<<"$cases")
  if model="$qbundle" run_7b "$(box 40 120)" decode-128 1 16 --profile \
    >"$log" 2>&1; then
    say "Profile of $name $qformat, batch 1 (a $qp-token prompt, 16 new tokens):"
    say ""
    say '```'
    sed -n '/profile /,$p' "$log" | tee -a "$report"
    say '```'
    say ""
    qcosts="${qbundle%.kiln}-costs.json"
    if [ -f "$qcosts" ] && python3 bench/profile_table.py "$log" "$qcosts" \
      --decode "1:$((qp + 8))" --prefill "$qp" ${gpu_name:+--gpu "$gpu_name"} \
      >"$work/profile-table-int4.md" 2>&1; then
      tee -a "$report" <"$work/profile-table-int4.md"
      say ""
    fi
  else
    not_run "$log"
    say "Profile of $name $qformat: $result"
    say ""
  fi
fi

# The same GEMVs by their split-K (issue 17; cand-quant: decode.quant-gemv's
# quant-warps 8, 16 (the default), 32 (the default before 2026-12-06) and
# 64, int4-g128 at 128 keys; the emu kit's: one, int4-g32): whether fewer
# warps, each streaming longer, beat more waves of shorter ones, which
# the profile alone cannot say (docs/tuning-db.md).
[ -d "$work/cand-quant" ] &&
  time_candidates cand-quant "$(box 45 120)" "$out/measurements-quant.json"

# Where the time goes: every launch of llama2-7b's prefill and decode
# steps timed alone (kiln-run --profile; the second of two runs): a
# 2048-token prompt at batch 1 (cuBLAS and the tiled attention in prefill,
# the GEMVs and a long context's attention in decode), and 32 128-token
# prompts (the batched decode plan): each kernel's share and the bandwidth
# of its weight reads, for the next round of kernel work.
# Then, per kernel, the bandwidth and FLOP rate its bytes and FLOPs (the
# cost model's, from the kit's costs file: kiln compile --stats-json) make
# at the measured time, beside the model's predicted time
# (bench/profile_table.py).
costs="${model%.kiln}-costs.json"
while read -r shape b p n; do
  if run_7b "$(box 60 190)" "$shape" "$b" "$n" --profile \
    >"$work/profile-$shape.txt" 2>&1; then
    say "Profile of $name, batch $b ($p-token prompts, $n new tokens):"
    say ""
    say '```'
    sed -n '/profile /,$p' "$work/profile-$shape.txt" | tee -a "$report"
    say '```'
    say ""
    if [ ! -f "$costs" ]; then
      say "No $costs in the kit: the per-kernel GB/s and TFLOP/s need it (scripts/build-gpu-kit.sh writes it)."
    elif python3 bench/profile_table.py "$work/profile-$shape.txt" "$costs" \
      --decode "$b:$((p + n / 2))" --prefill "$p" ${gpu_name:+--gpu "$gpu_name"} \
      >"$work/profile-table-$shape.md" 2>&1; then
      tee -a "$report" <"$work/profile-table-$shape.md"
    else
      status=1
      say "FAIL: bench/profile_table.py on the profile of $shape: $(tail -1 "$work/profile-table-$shape.md")"
    fi
  elif skipped "$work/profile-$shape.txt"; then
    say "Profile of $name, batch $b: $skip."
  else
    status=1
    say "FAIL: profile of $name $shape: $(tail -1 "$work/profile-$shape.txt")"
  fi
  say ""
done <<<"$profiles"

# The server under load (docs/serve.md): kiln-run --serve on the same
# bundle with random weights, streaming clients for a fixed time
# (bench/serve_load.py): requests/s, tokens/s, time to first token and
# between tokens. The server loads its model first (its /health says 503
# until then); SIGTERM drains it.
read -r serve_clients serve_seconds serve_prompt serve_new <<<"$serve_load"
serve_box=$(box 120 150)
if ((serve_box == 0)); then
  say "kiln serve under load: $skip."
else
  "$run" --serve "$model" --random-weights --device "$device" --port 0 \
    >"$work/serve-out.txt" 2>"$work/serve-err.txt" &
  serve_pid=$!
  url=""
  for _ in $(seq 1 100); do # its address line, within 10 s
    url=$(grep -o 'http://[0-9.:]*' "$work/serve-out.txt" 2>/dev/null | head -1)
    [ -n "$url" ] && break
    sleep 0.1
  done
  if [ -n "$url" ] && bounded "$serve_box" python3 bench/serve_load.py \
    --url "$url" --wait-ready $((serve_box / 2)) --clients "$serve_clients" \
    --seconds "$serve_seconds" --prompt-tokens "$serve_prompt" \
    --max-tokens "$serve_new" --vocab "$vocab" \
    --label "$name, random weights, kiln-run --serve --device $device" \
    >"$work/serve-load.md" 2>&1; then
    tee -a "$report" <"$work/serve-load.md"
  elif [ -z "$url" ]; then
    status=1
    say "FAIL: kiln-run --serve printed no address: $(tail -1 "$work/serve-err.txt")"
  else
    status=1
    say "FAIL: kiln serve under load: $(tail -1 "$work/serve-load.md")"
  fi
  kill -TERM "$serve_pid" 2>/dev/null
  for _ in $(seq 1 100); do # the drain, within 10 s
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$serve_pid" 2>/dev/null
  wait "$serve_pid" 2>/dev/null
  say ""
fi

# Tuning: llama2-7b's candidates (the kit's cand.tar.xz, from kiln tune
# --emit-candidates), each folder time-boxed (cand: 512 and 2048 tokens;
# cand-short: the GEMMs of 16- and 64-token prompts and of decode steps of
# 8 and 32 sequences, cuBLAS against kiln's own).
if [ -d "$work/cand" ]; then
  time_candidates cand "$(box 120 70)" "$out/measurements.json"
  [ -d "$work/cand-short" ] &&
    time_candidates cand-short "$(box 45 60)" "$out/measurements-short.json"
else
  say "Timing the tuning candidates: not run (no $kit/cand.tar.xz)."
  say ""
fi

# The PyTorch peers on the same GPU, when PyTorch and transformers are here
# (time-boxed: torch.compile of llama2-7b takes minutes; each result is
# kept as it comes).
peers="$work/peers.jsonl"
: >"$peers"
if [ "$device" = emu ]; then
  echo "PyTorch peers: not run (emu dry run: there is no GPU)." >"$work/torch_peer.md"
elif ! PYTHONUNBUFFERED=1 bounded "$(box 240 15)" python3 bench/torch_peer.py \
  --model llama2-7b --cases 128:128:1,2048:128:1,128:128:8,128:128:32,512:2:1 \
  --json "$peers" >"$work/torch_peer.md" 2>"$work/torch_peer.log"; then
  if skipped "$work/torch_peer.log"; then
    echo "PyTorch peers: not measured ($skip)." >>"$work/torch_peer.md"
  else
    echo "(PyTorch peers stopped: $(tail -1 "$work/torch_peer.log"))" >>"$work/torch_peer.md"
  fi
fi

# One table: kiln, its model-bandwidth utilization (the weight and KV bytes
# a decode step reads, over the step time, as a share of the GPU's spec
# bandwidth and of the copy bandwidth), each peer and kiln's ratio to it
# (above 1: kiln is faster), and the targets. An MBU above the spec is a
# timing or byte-count error: gpu_table.py prints it as a FAIL and exits 1.
if [ "$device" = emu ]; then
  title="$name, random weights (kiln-run --device emu: a dry run, the times mean nothing):"
else
  title="llama2-7b, random fp16 weights (kiln-run --device cuda; PyTorch peers: transformers on the same GPU in the same run):"
fi
python3 bench/gpu_table.py "$kiln_rows" "$peers" "$work/bandwidth.txt" "$title" \
  ${gpu_name:+--gpu "$gpu_name"} | tee -a "$report" || status=1
say ""
say "PyTorch peers as measured:"
say ""
tee -a "$report" <"$work/torch_peer.md"
say ""
say "The check took $SECONDS s of its $budget."
exit $status
