#!/usr/bin/env python3
"""gpu_table.py KILN_TSV PEERS_JSONL BANDWIDTH_TXT [TITLE]: the one table of
bench/gpu_check.sh. KILN_TSV has a row per case (name, prompt tokens, new
tokens, batch, time to first token in ms, decode tokens/s), PEERS_JSONL
what bench/torch_peer.py --json wrote, BANDWIDTH_TXT the "Copy bandwidth:
X TB/s" line. Prints a Markdown table: kiln, its model-bandwidth
utilization (the weight and KV bytes a decode step reads, over the step
time, over the copy bandwidth), each peer and kiln's ratio to it (above 1:
kiln is faster), and issue 5's targets, met or missed, under TITLE (by
default, llama2-7b's on cuda)."""
import json, re, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
peers = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
m = re.search(r"Copy bandwidth: ([0-9.]+) TB/s", open(sys.argv[3]).read())
bw = float(m.group(1)) * 1e12 if m else 0
WEIGHTS, KV_PER_TOKEN = 13.48e9, 524288  # llama2-7b fp16
def peer(name, p, n, b, key):
    for r in peers:
        if r["peer"].startswith(name) and r["prompt"] == p and r["batch"] == b \
                and (key == "ttft_ms" or r["new"] == n):
            return r[key]
def ratio(x):
    return f"{x:.2f}x" if x else "-"
print(sys.argv[4] if len(sys.argv) > 4 else
      "llama2-7b, random fp16 weights (kiln-run --device cuda; PyTorch "
      "peers: transformers on the same GPU in the same run):")
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
    step_bytes = WEIGHTS + b * KV_PER_TOKEN * (p + n / 2)
    mbu = step_bytes * (rate / b) / bw if bw else 0
    e = peer("eager", p, n, b, "tokens_per_s")
    c = peer("torch.compile", p, n, b, "tokens_per_s")
    goal = ""
    if b == 1 and p == 128:
        ok = rate >= 300 and (c is None or rate >= 1.3 * c)
        goal = f">= 300 tokens/s, >= 1.3x compile ({'met' if ok else 'missed'})"
    print(f"| decode tokens/s, batch {b}, context {p} | {rate:.0f} | "
          f"{f'{100 * mbu:.0f}%' if mbu else '-'} | {f'{e:.0f}' if e else '-'} | "
          f"{ratio(rate / e if e else 0)} | {f'{c:.0f}' if c else '-'} | "
          f"{ratio(rate / c if c else 0)} | {goal} |")
