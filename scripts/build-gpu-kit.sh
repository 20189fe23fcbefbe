#!/usr/bin/env bash
# Builds what bench/gpu_check.sh needs on a GPU machine that has CUDA, a
# compiler and Python but none of kiln's packages: gpu-kit/ with kiln-run
# (the runtime alone; static Abseil and libstdc++), the bundles of both
# fixtures (for batches of up to 4) and of llama2-7b for sm_80 and sm_90
# (CUBIN, and PTX for newer GPUs) with the cost model's figures of its
# profiled steps (llama2-7b-costs.json), llama2-7b's tuning candidates
# (cand.tar.xz), and Abseil's headers and archives in case kiln-run must be
# rebuilt there.
# Usage: scripts/build-gpu-kit.sh   (then carry gpu-kit.tar.xz, its packed
# copy, to the machine: gpu_check.sh unpacks it)
#
#   scripts/build-gpu-kit.sh --emu [DIR]   (default gpu-kit-emu/)
# builds the kit of the check's dry run on the emu device
# (GPU_CHECK_DEVICE=emu bench/gpu_check.sh; docs/gpu-check.md) in seconds,
# from the tools already built (build/bin, or $KILN and $KILN_RUN): that
# kiln-run, the fixtures' bundles, tiny-gqa standing in for llama2-7b
# (stand-in.kiln, and stand-in-costs.json) and a few of its tuning
# candidates. It builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --emu ]; then
  kit=${2:-gpu-kit-emu}
  kiln=${KILN:-build/bin/kiln}
  rm -rf "$kit" && mkdir -p "$kit"
  cp "${KILN_RUN:-build/bin/kiln-run}" "$kit/kiln-run"
  # The emu device compiles each kernel with the host compiler once (its
  # cache): the stand-in is the tiny-gqa fixture's model at the same batch,
  # so that they share every kernel.
  for m in tiny-gqa tiny-mha; do
    "$kiln" compile "test/fixtures/$m/model-f16" -o "$kit/$m.kiln" \
      --max-batch 4 >/dev/null
  done
  # One of the quantized bundles (quantized.txt's format; the GPU kit's
  # list is below): tiny-gqa with an int8 KV cache.
  "$kiln" compile test/fixtures/tiny-gqa/model-f16 --kv-dtype int8 \
    -o "$kit/q-tiny-gqa-kv-int8.kiln" >/dev/null
  echo "q-tiny-gqa-kv-int8 test/fixtures/tiny-gqa/model-f16 test/fixtures/kv-cache/tiny-gqa-kv-int8 5e-2" \
    >"$kit/quantized.txt"
  # A split model (tp.txt's format, as the GPU kit's below).
  "$kiln" compile test/fixtures/tiny-gqa/model-f16 --tp 2 \
    -o "$kit/tp-tiny-gqa-2.kiln" >/dev/null
  echo "tp-tiny-gqa-2 test/fixtures/tiny-gqa/model-f16 test/fixtures/tiny-gqa 2" \
    >"$kit/tp.txt"
  # With the cost model's bytes and FLOPs of the profiled steps' kernels,
  # for the profile's table (bench/profile_table.py; docs/cost-model.md);
  # no predicted times: those need the kernels compiled and audited
  # (--target sm_90, ~10 s here), and emu's times mean nothing anyway.
  "$kiln" compile tiny-gqa -o "$kit/stand-in.kiln" --max-batch 4 \
    --stats-json "$kit/stand-in-costs.json" \
    --stats-step decode:1:50 --stats-step prefill:48 \
    --stats-step decode:4:18 --stats-step prefill:16 >/dev/null
  # Quantized, for the quantized table, the int4 profile and its table
  # (the real kit's llama2-7b-int4-g128; tiny-gqa's rows hold no group of
  # 128): its 16-token prompt and 16 new tokens.
  "$kiln" compile tiny-gqa --quantize int4-g32 -o "$kit/stand-in-int4-g32.kiln" \
    --stats-json "$kit/stand-in-int4-g32-costs.json" \
    --stats-step decode:1:24 --stats-step prefill:16 >/dev/null
  # One candidate per folder, the families' kinds the real kit times
  # (attention; kiln's own GEMM in decode steps), each a new kernel or two.
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$kiln" tune tiny-gqa --emit-candidates "$scratch/cand" \
    --families decode.attention --knobs "attention-warps=2,kv-splits=2" \
    --seq-lens 16 --batch 1 >/dev/null
  "$kiln" tune tiny-gqa --emit-candidates "$scratch/cand-short" \
    --families decode.gemm --knobs "gemm-algo=-2,gemm-tile=4" \
    --seq-lens 4 --batch 2 >/dev/null
  "$kiln" tune tiny-gqa --quantize int4-g32 --emit-candidates "$scratch/cand-quant" \
    --families decode.quant-gemv --knobs "quant-warps=8" \
    --seq-lens 16 --batch 1 >/dev/null
  tar -C "$scratch" -cJf "$kit/cand.tar.xz" cand cand-short cand-quant
  echo "$kit/: $(ls "$kit" | tr '\n' ' ')($(du -sh "$kit" | cut -f1))"
  exit 0
fi

scripts/build.sh >/dev/null
if [ ! -f build-kit/build.ninja ]; then
  cmake -S . -B build-kit -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DKILN_RUNTIME_ONLY=ON -DKILN_STATIC_RUN=ON -DKILN_BUILD_TESTS=OFF \
    >/dev/null
fi
cmake --build build-kit --target kiln-run >/dev/null
rm -rf gpu-kit && mkdir gpu-kit
cp build-kit/bin/kiln-run gpu-kit/
# The fixtures for batches of up to 4: the check runs their prompts as a
# batch and joining a running one. The head-dim fixtures (96: a decode lane
# holds 3 dims; 128: Llama 2's) have one F16 folder, model/.
for m in tiny-gqa tiny-mha tiny-dh96 tiny-dh128; do
  f16="test/fixtures/$m/model-f16"
  [ -d "$f16" ] || f16="test/fixtures/$m/model"
  build/bin/kiln compile "$f16" -o "gpu-kit/$m.kiln" \
    --target sm_80,sm_90 --max-batch 4 >/dev/null
done
# racecheck's bundles (gpu_check.sh): their GEMMs kiln's own, since the
# sanitizer cannot run cuBLAS's Hopper kernels.
build/bin/kiln compile test/fixtures/tiny-gqa/model-f16 \
  -o gpu-kit/tiny-gqa-own-gemm.kiln --target sm_80,sm_90 \
  --kernel-options gemm-algo=-2 >/dev/null
build/bin/kiln compile test/fixtures/tiny-dh128/model --quantize int4-g128 \
  -o gpu-kit/q-tiny-dh128-int4-own-gemm.kiln --target sm_80,sm_90 \
  --kernel-options gemm-algo=-2 >/dev/null
# Quantized weights (issue 17: the quantized GEMM and GEMVs, GPTQ's
# act-order) and KV caches on the GPU, each against its transformers
# fixture: quantized.txt, a line a bundle (name, weights, fixture folder,
# tolerance: fp8 caches at head dim 32 get 0.2, docs/kv-cache.md).
: >gpu-kit/quantized.txt
quantized() { # NAME WEIGHTS FIXTURE TOL KILN-OPTIONS... (targets: $targets)
  local name=$1 weights=$2 fixture=$3 tol=$4
  shift 4
  build/bin/kiln compile "$weights" -o "gpu-kit/$name.kiln" \
    --target "${targets:-sm_80,sm_90}" "$@" >/dev/null
  echo "$name $weights $fixture $tol" >>gpu-kit/quantized.txt
}
F=test/fixtures
quantized q-tiny-dh128-int4-g128 $F/tiny-dh128/model $F/quant/tiny-dh128-int4-g128 5e-2 --quantize int4-g128
quantized q-tiny-dh128-fp8 $F/tiny-dh128/model $F/quant/tiny-dh128-fp8 5e-2 --quantize fp8
quantized q-tiny-mha-int8 $F/tiny-mha/model $F/quant/tiny-mha-int8 5e-2 --quantize int8
quantized q-tiny-mha-gptq-act $F/quant/tiny-mha-gptq-4b-g32-actorder/model $F/quant/tiny-mha-gptq-4b-g32-actorder 5e-2
quantized q-tiny-dh128-kv-int8 $F/tiny-dh128/model $F/kv-cache/tiny-dh128-kv-int8 5e-2 --kv-dtype int8
quantized q-tiny-dh128-kv-fp8 $F/tiny-dh128/model $F/kv-cache/tiny-dh128-kv-fp8 5e-2 --kv-dtype fp8
quantized q-tiny-mha-kv-fp8 $F/tiny-mha/model $F/kv-cache/tiny-mha-kv-fp8 0.2 --kv-dtype fp8
# W8A8 (cuBLASLt's FP8 GEMM: sm_89 on), against transformers with the same
# activation rounding: 0.2, the f16 activations' e4m3 boundary crossings
# (docs/quantization.md, "W8A8").
targets=sm_90 quantized q-tiny-dh128-fp8-w8a8 $F/tiny-dh128/model \
  $F/quant/tiny-dh128-fp8-w8a8 0.2 --quantize fp8 --kernel-options quant-gemm=2
# Split models (issue 21): tp.txt, a line a bundle (name, weights, fixture,
# ranks). tiny-gqa's two KV heads split; tiny-dh96's one kept by both ranks.
: >gpu-kit/tp.txt
for m in tiny-gqa tiny-dh96; do
  weights=$F/$m/model-f16
  [ -d "$weights" ] || weights=$F/$m/model
  build/bin/kiln compile "$weights" --tp 2 -o "gpu-kit/tp-$m-2.kiln" \
    --target sm_80,sm_90 >/dev/null
  echo "tp-$m-2 $weights $F/$m 2" >>gpu-kit/tp.txt
done
# llama2-7b's shapes, for the benchmark with --random-weights: batches of up
# to 32 sequences of up to 2304 tokens (a 37.7 GB KV pool); and the cost
# model's bytes, FLOPs and predicted times (H200, H100) of the steps
# gpu_check.sh profiles (a 2048-token prompt and 64 new tokens at batch 1,
# 32 prompts of 128 tokens and 16 new), for the profile's per-kernel table
# (bench/profile_table.py; docs/cost-model.md).
build/bin/kiln compile llama2-7b -o gpu-kit/llama2-7b.kiln --max-batch 32 --max-context 2304 \
  --target sm_90,sm_80 --stats-json gpu-kit/llama2-7b-costs.json \
  --stats-step decode:1:2080 --stats-step prefill:2048 \
  --stats-step decode:32:136 --stats-step prefill:128 >/dev/null
# Quantized llama2-7b for issue 17's speed targets (gpu_check.sh's
# quantized table): int4-g128 decode, fp8 decode and W8A8 prefill
# (cuBLASLt's FP8 GEMM: sm_90 only).
# int4-g128's costs too: gpu_check.sh profiles its decode (the quantized
# GEMVs the cost model still predicts memory-bound: docs/cost-model.md).
build/bin/kiln compile llama2-7b --quantize int4-g128 --max-context 2304 \
  --target sm_90,sm_80 -o gpu-kit/llama2-7b-int4-g128.kiln \
  --stats-json gpu-kit/llama2-7b-int4-g128-costs.json \
  --stats-step decode:1:136 --stats-step prefill:128 >/dev/null
build/bin/kiln compile llama2-7b --quantize fp8 --kernel-options quant-gemm=2 \
  --max-context 2304 --target sm_90 -o gpu-kit/llama2-7b-fp8-w8a8.kiln >/dev/null
# Tuning candidates for llama2-7b on the H200 (kiln tune --emit-candidates):
# decode attention at 512 and 2048 keys for 1 and 8 sequences, prefill
# attention and cuBLAS's GEMM algorithms at 512 and 2048 tokens (cand/);
# every GEMM candidate, kiln's own included, for prompts of 16 and 64
# tokens and decode steps of 8 and 32 sequences (cand-short/: kiln's GEMM
# re-reads W per tile, far too slow to time at 2048 rows). The bundles share most of their bytes, so xz packs them to a
# small fraction (gpu_check.sh unpacks with Python).
rm -rf build-kit/cand build-kit/cand-short build-kit/cand-quant
# The families' candidates as tune/Tuner.cpp lists them, less kiln's GEMM
# (a knob that is no longer a candidate stops the build here).
knobs=""
for w in 2 4 8; do
  for s in 0 1 2 4 8 16; do knobs+="attention-warps=$w,kv-splits=$s;"; done
  for r in 16 32; do
    for k in 16 32 64; do
      knobs+="attention-warps=$w,prefill-attention-rows=$r,prefill-attention-keys=$k;"
    done
  done
done
for a in -1 0 1 2 3; do knobs+="gemm-algo=$a;"; done
build/bin/kiln tune llama2-7b --emit-candidates build-kit/cand \
  --families decode.attention,prefill.attention,prefill.gemm \
  --knobs "$knobs" --seq-lens 512,2048 \
  --batch 1,8 --target sm_90 >/dev/null
build/bin/kiln tune llama2-7b --emit-candidates build-kit/cand-short \
  --families prefill.gemm,decode.gemm --seq-lens 16,64 --batch 8,32 \
  --target sm_90 >/dev/null
# int4-g128's decode GEMVs by their split-K (cand-quant/; issue 17: fewer
# warps streaming longer against more waves of shorter ones).
build/bin/kiln tune llama2-7b --quantize int4-g128 \
  --emit-candidates build-kit/cand-quant --families decode.quant-gemv \
  --seq-lens 128 --batch 1 --target sm_90 >/dev/null
tar -C build-kit -cJf gpu-kit/cand.tar.xz cand cand-short cand-quant
# Should the GPU machine's C library be older than this one's, gpu_check.sh
# builds kiln-run there from the repository with these.
mkdir -p gpu-kit/include gpu-kit/lib
cp -r /usr/include/absl /usr/include/nlohmann gpu-kit/include/
# And the Boost headers the server includes (Beast, Asio: ~1000 files,
# 9 MB of Boost's 160), found by the compiler itself.
kit_include="$PWD/gpu-kit/include"
c++ -std=c++20 -I. -isystem /usr/local/cuda/include -M serve/*.cpp |
  tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u |
  sed 's|^/usr/include/||' | (cd /usr/include && xargs cp --parents -t "$kit_include")
cp /usr/lib/x86_64-linux-gnu/libabsl_*.a gpu-kit/lib/
echo "gpu-kit/: $(ls gpu-kit | tr '\n' ' ')($(du -sh gpu-kit | cut -f1))"
# What travels: the device tool carries 64 MiB at most, the repository
# included, and the kit alone outgrew that (64 MB, 2026-12-04); its
# bundles share most of their bytes, so xz packs it to a few MB.
# gpu_check.sh unpacks gpu-kit.tar.xz when there is no gpu-kit/.
tar -cf - gpu-kit | xz -T0 -6 >gpu-kit.tar.xz
echo "gpu-kit.tar.xz: $(du -sh gpu-kit.tar.xz | cut -f1) (carry this)"
echo "kiln-run needs: $(ldd gpu-kit/kiln-run | awk '{print $1}' | tr '\n' ' ')"
