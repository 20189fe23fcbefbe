#!/usr/bin/env python3
"""check_prediction.py PREDICTION_JSON [--f16 F16_JSON] CHECK...: holds
kiln compile --stats-json's predictions of llama2-7b (sm_90, fp16) to issue
16's targets and to what today's kernels are; with --f16 (the f16 model's
file), a quantized model's to issue 17's. Each CHECK is one of CHECKS
below; the script prints each one's figures, and exits 1 when any fails,
naming it. The predictions are the cost model's (docs/cost-model.md), not
measurements."""
import json
import sys


def step(p, kind, rows, context=None):
    for s in p["steps"]:
        if s["kind"] == kind and s["rows"] == rows and \
                (context is None or s["context"] == context):
            return s
    sys.exit(f"no {kind} step of {rows} rows ({context} keys) in the file")


def kernel(s, prefix):
    for k in s["kernels"]:
        if k["kernel"].startswith(prefix):
            return k
    sys.exit(f"no kernel {prefix}* in the {s['kind']} step")


def decode_step(p):
    """Batch-1 decode at 128 keys on the H200: at most 3.3 ms (at least 300
    tokens/s, 85% of HBM)."""
    d = step(p, "decode", 1, 128)["predicted"]["H200"]
    return d["us"] <= 3300, (f"{d['us'] / 1e3:.3f} ms, "
                             f"{d['tokens_per_s']:.0f} tokens/s, "
                             f"MBU {100 * d['mbu']:.1f}%")


def decode_mbu(p):
    """A floor under the same step: MBU at least 80% on the H200 and the
    H100 (a kernel that stops keeping HBM busy breaks it)."""
    d = step(p, "decode", 1, 128)["predicted"]
    ok = all(d[g]["mbu"] >= 0.80 for g in ("H200", "H100"))
    return ok, ", ".join(f"{g} {100 * d[g]['mbu']:.1f}%" for g in ("H200", "H100"))


def decode_gemvs_memory_bound(p):
    """Every decode GEMV (QKV, o_proj, gate/up, down, LM head) reaches the
    reachable HBM bandwidth (bound 'memory') on both GPUs, at 128 and at
    the longest context."""
    bad = []
    for s in (x for x in p["steps"] if x["kind"] == "decode" and x["rows"] == 1):
        for prefix in ("decode.attn.norm_qkv_rope", "decode.attn.o_proj",
                       "decode.mlp.", "decode.norm_lm_head"):
            for k in s["kernels"]:
                if k["kernel"].startswith(prefix):
                    for g, b in k["bound"].items():
                        if b != "memory":
                            bad.append(f"{k['kernel']} at {s['context']} keys "
                                       f"on the {g}: {b}")
    return not bad, "; ".join(bad) or "all memory bound"


def ttft(p):
    """A 2048-token prefill (the time to first token) on the H200: at most
    40 ms."""
    d = step(p, "prefill", 2048)["predicted"]["H200"]
    return d["us"] <= 40000, f"{d['us'] / 1e3:.1f} ms"


def prefill_attention_share(p):
    """Prefill attention at least 50% of the dense fp16 tensor-core peak on
    the H200."""
    d = step(p, "prefill", 2048)["predicted"]["H200"]
    share = d["attention_tensor_share"]
    return share >= 0.5, f"{100 * share:.1f}% of the peak"


def prefill_attention_cores(p):
    """Prefill attention's kernel and its bound on the H200: whether its
    SASS has HMMA (the model then runs it on tensor cores)."""
    k = kernel(step(p, "prefill", 2048), "prefill.attn.attention")
    share = step(p, "prefill", 2048)["predicted"]["H200"]["attention_tensor_share"]
    return k["tensor_cores"], (f"{k['kernel']}: tensor cores "
                               f"{k['tensor_cores']}, bound "
                               f"{k['bound']['H200']}, {100 * share:.1f}% of "
                               "the peak")


def prefill_attention_on_tensor_cores(p):
    """Prefill attention runs on tensor cores (HMMA in its SASS)."""
    return prefill_attention_cores(p)


def prefill_attention_on_cuda_cores(p):
    """The opposite: no HMMA (a kernel that lost its tensor cores)."""
    ok, figures = prefill_attention_cores(p)
    return not ok, figures


def quantized_3x(p):
    """Issue 17: batch-1 decode at 128 keys on the H200 at least 3x the f16
    model's (--f16), under both readings of the decode GEMVs (the
    calibrated one and serial ends: docs/cost-model.md, "Two readings")."""
    if f16 is None:
        sys.exit("quantized-3x needs --f16 F16_JSON")
    q = step(p, "decode", 1, 128)["predicted"]["H200"]
    b = step(f16, "decode", 1, 128)["predicted"]["H200"]
    ratios = [b[key] / q[key] for key in ("us", "serial_ends_us")]
    return min(ratios) >= 3, (f"{ratios[0]:.2f}x ({q['us'] / 1e3:.3f} ms), "
                              f"{ratios[1]:.2f}x with serial ends "
                              f"({q['serial_ends_us'] / 1e3:.3f} ms)")


CHECKS = {
    "decode-step": decode_step,
    "decode-mbu": decode_mbu,
    "decode-gemvs-memory-bound": decode_gemvs_memory_bound,
    "ttft": ttft,
    "prefill-attention-share": prefill_attention_share,
    "prefill-attention-on-tensor-cores": prefill_attention_on_tensor_cores,
    "prefill-attention-on-cuda-cores": prefill_attention_on_cuda_cores,
    "quantized-3x": quantized_3x,
}

args = sys.argv[1:]
f16 = None
if "--f16" in args:
    at = args.index("--f16")
    f16 = json.load(open(args[at + 1]))
    del args[at:at + 2]
if len(args) < 2 or any(c not in CHECKS for c in args[1:]):
    sys.exit("usage: check_prediction.py PREDICTION_JSON [--f16 F16_JSON] "
             "CHECK... (" + ", ".join(CHECKS) + ")")
prediction = json.load(open(args[0]))
if not prediction.get("audited"):
    sys.exit("not predicted: " + prediction.get("not_predicted", "?"))
failed = []
for name in args[1:]:
    ok, figures = CHECKS[name](prediction)
    print(f"{name}: {'holds' if ok else 'FAILS'} ({figures})")
    if not ok:
        failed.append(name)
if failed:
    sys.exit("predicted targets that fail: " + ", ".join(failed))
