#!/usr/bin/env python3
"""gpu_table.py KILN_TSV PEERS_JSONL BANDWIDTH_TXT [TITLE] [--gpu NAME]: the
one table of bench/gpu_check.sh. KILN_TSV has a row per case (name, prompt
tokens, new tokens, batch, time to first token in ms, decode tokens/s),
PEERS_JSONL what bench/torch_peer.py --json wrote, BANDWIDTH_TXT the "Copy
bandwidth: X TB/s" line, NAME the GPU as nvidia-smi names it (for its spec
bandwidth). Prints a Markdown table: kiln, its model-bandwidth utilization
(MBU: the weight and KV bytes a decode step reads, over the step time, over
the GPU's spec bandwidth and over the measured copy bandwidth), each peer
and kiln's ratio to it (above 1: kiln is faster), and issue 5's targets,
met or missed, under TITLE (by default, llama2-7b's on cuda).

An MBU above 100% of the spec bandwidth cannot be: it is printed as a FAIL
(a timing or byte-count error), not as a result, its target is not judged,
and the script exits 1. Above 100% of the copy bandwidth but within the
spec it is flagged as suspect (a decode step reading faster than a copy
moves bytes)."""
import json, re, sys

# Peak DRAM bandwidth from NVIDIA's data sheets, in TB/s, by the name
# nvidia-smi --query-gpu=name prints ("NVIDIA H200", "NVIDIA H100 80GB
# HBM3", "NVIDIA A100-SXM4-80GB", ...). First match wins: the specific
# forms come before the general ones; "GH200" is not an "H200".
SPEC_TBS = [
    (r"\bH200\b", "H200", 4.8),  # SXM and NVL
    (r"\bH100\b.*\bPCIe\b", "H100 PCIe", 2.0),
    (r"\bH100\b.*\bNVL\b", "H100 NVL", 3.9),
    (r"\bH100\b", "H100 SXM", 3.35),  # "NVIDIA H100 80GB HBM3"
    (r"\bA100\b.*\b80GB\b.*\bPCIe\b", "A100 80GB PCIe", 1.935),
    (r"\bA100\b.*\b80GB\b", "A100 80GB SXM", 2.039),  # "NVIDIA A100-SXM4-80GB"
    (r"\bA100\b", "A100 40GB", 1.555),  # "NVIDIA A100-SXM4-40GB", "-PCIE-40GB"
    (r"\bL40S\b", "L40S", 0.864),
    (r"\bRTX 4090\b", "RTX 4090", 1.008),  # "NVIDIA GeForce RTX 4090"
]
# What a llama2-7b fp16 decode step reads: every weight but the embedding
# table, of which it reads one row (12.31 GiB: kiln compile llama2-7b
# --stats), and per sequence the keys and values of its context (2 x 32
# layers x 4096 x 2 bytes per token).
WEIGHTS, KV_PER_TOKEN = 13_214_695_424, 524_288


def spec_of(gpu):
    for pattern, label, tbs in SPEC_TBS:
        if re.search(pattern, gpu, re.IGNORECASE):
            return label, tbs
    return None


args, gpu = [], ""
argv = sys.argv[1:]
while argv:
    a = argv.pop(0)
    if a == "--gpu" and argv:
        gpu = argv.pop(0).strip()
    elif a.startswith("--gpu="):
        gpu = a[len("--gpu="):].strip()
    else:
        args.append(a)
if len(args) not in (3, 4):
    sys.exit("usage: gpu_table.py KILN_TSV PEERS_JSONL BANDWIDTH_TXT [TITLE] "
             "[--gpu NAME]")
rows = [l.split("\t") for l in open(args[0]).read().splitlines() if l.strip()]
peers = [json.loads(l) for l in open(args[1]) if l.strip()]
m = re.search(r"Copy bandwidth: ([0-9.]+) TB/s", open(args[2]).read())
copy = float(m.group(1)) * 1e12 if m else 0
spec = spec_of(gpu) if gpu else None
spec_bw = spec[1] * 1e12 if spec else 0
spec_name = f"the {spec[0]}'s {spec[1]:g} TB/s" if spec else ""
failures = suspects = 0


def peer(name, p, n, b, key):
    for r in peers:
        if r["peer"].startswith(name) and r["prompt"] == p and r["batch"] == b \
                and (key == "ttft_ms" or r["new"] == n):
            return r[key]


def ratio(x):
    return f"{x:.2f}x" if x else "-"


def mbu_cell(bytes_per_s):
    """The MBU column: against the spec (and the copy bandwidth in
    parentheses), a FAIL above the spec, suspect above the copy."""
    global failures, suspects
    of_spec = bytes_per_s / spec_bw if spec_bw else 0
    of_copy = bytes_per_s / copy if copy else 0
    if of_spec > 1:
        failures += 1
        return f"FAIL: {100 * of_spec:.0f}% of {spec_name}: a timing or byte-count error"
    if of_copy > 1:
        suspects += 1
        return (f"suspect: {100 * of_copy:.0f}% of the copy bandwidth"
                + (f" ({100 * of_spec:.0f}% of {spec_name})" if of_spec else ""))
    if of_spec and of_copy:
        return f"{100 * of_spec:.0f}% (copy: {100 * of_copy:.0f}%)"
    if of_spec:
        return f"{100 * of_spec:.0f}%"
    if of_copy:
        return f"{100 * of_copy:.0f}% of copy"
    return "-"


print(args[3] if len(args) > 3 else
      "llama2-7b, random fp16 weights (kiln-run --device cuda; PyTorch "
      "peers: transformers on the same GPU in the same run):")
print()
what = "MBU: the bytes a decode step reads (weights, and the KV of the context) per second"
copied = f"the measured copy bandwidth ({copy / 1e12:.2f} TB/s)"
unknown = (f"no spec bandwidth known for '{gpu}'" if gpu
           else "no GPU named (--gpu), so no spec bandwidth")
if spec and copy:
    print(f"{what}, as a share of {spec_name} (its spec; {gpu}), and in "
          f"parentheses of {copied}.")
elif spec:
    print(f"{what}, as a share of {spec_name} (its spec; {gpu}); the copy "
          "bandwidth was not measured.")
elif copy:
    print(f"{what}, as a share of {copied}; {unknown}.")
else:
    print(f"{what}: not computed ({unknown}, and the copy bandwidth was not "
          "measured).")
print()
if spec and copy > spec_bw:
    failures += 1
    print(f"FAIL: the measured copy bandwidth ({copy / 1e12:.2f} TB/s) is above "
          f"{spec_name}: the copy's timing is wrong.")
    print()
print("| case | kiln | MBU | eager | kiln / eager | torch.compile | "
      "kiln / compile | target |")
print("|---|---|---|---|---|---|---|---|")
for name, p, n, b, ttft, rate in rows:
    p, n, b, ttft, rate = int(p), int(n), int(b), float(ttft), float(rate)
    if name.startswith("ttft"):
        e = peer("eager", p, n, b, "ttft_ms")
        c = peer("torch.compile", p, n, b, "ttft_ms")
        goal = "<= 40 ms" if p == 2048 else ""
        met = " (met)" if goal and ttft <= 40 else " (missed)" if goal else ""
        print(f"| time to first token, {p}-token prompt | {ttft:.1f} ms | - | "
              f"{f'{e:.1f} ms' if e else '-'} | {ratio(e / ttft if e else 0)} | "
              f"{f'{c:.1f} ms' if c else '-'} | {ratio(c / ttft if c else 0)} | "
              f"{goal}{met} |")
        continue
    # The step's bytes at the average context of the decode (p + n / 2).
    step_bytes = WEIGHTS + b * KV_PER_TOKEN * (p + n / 2)
    before = failures
    mbu = mbu_cell(step_bytes * rate / b)
    e = peer("eager", p, n, b, "tokens_per_s")
    c = peer("torch.compile", p, n, b, "tokens_per_s")
    goal = ""
    if b == 1 and p == 128:
        ok = rate >= 300 and (c is None or rate >= 1.3 * c)
        verdict = ("not judged: the rate is impossible" if failures > before
                   else "met" if ok else "missed")
        goal = f">= 300 tokens/s, >= 1.3x compile ({verdict})"
    print(f"| decode tokens/s, batch {b}, context {p} | {rate:.0f} | "
          f"{mbu} | {f'{e:.0f}' if e else '-'} | "
          f"{ratio(rate / e if e else 0)} | {f'{c:.0f}' if c else '-'} | "
          f"{ratio(rate / c if c else 0)} | {goal} |")
if failures:
    print()
    print(f"FAIL: {failures} bandwidth figure{'s' if failures > 1 else ''} above "
          f"{spec_name}: no GPU reads that fast, so a time or a byte count is "
          "wrong; those rows are not results.")
elif suspects:
    print()
    print(f"Suspect: {suspects} MBU figure{'s' if suspects > 1 else ''} above the "
          "measured copy bandwidth: a decode step does not usually read faster "
          "than a copy moves bytes; check the timing before quoting "
          f"{'them' if suspects > 1 else 'it'}.")
sys.exit(1 if failures else 0)
