#!/usr/bin/env python3
"""profile_table.py PROFILE_TXT COSTS_JSON --decode ROWS:KEYS --prefill TOKENS
[--gpu NAME]: the per-kernel table of bench/gpu_check.sh's profiles.

PROFILE_TXT is what kiln-run --profile printed (each kernel's calls and
measured time, per kind of step); COSTS_JSON what kiln compile --stats-json
wrote for the same bundle (each step's kernels: their calls, bytes and
FLOPs from the cost model's KernelCost, and, when compiled with --target,
the model's predicted time on each modelled GPU; docs/cost-model.md).
--decode and --prefill give the profiled steps' shape: ROWS sequences
attending about KEYS keys each, a prompt of TOKENS tokens. NAME is the GPU
as nvidia-smi names it: its predictions are the modelled GPU of that name
(H200, H100, A100), else the file's first.

Prints, per kind of step, a Markdown table: each kernel's measured calls
and time, the bandwidth and FLOP rate its bytes and FLOPs make at that
time (achieved GB/s and TFLOP/s), and beside them the predicted time and
the ratio of measured to predicted; where the costs file has them, the
same under the serial-ends reading (docs/cost-model.md, "Two readings"),
so that each kernel says which reading its time follows. The bytes are the model's (each
operand read once, each result written once), not a counter's: an
achieved GB/s above the GPU's bandwidth means the model counts bytes the
kernel does not move (or the timing is wrong). A kernel the costs file
does not have, or whose calls differ from it, says so.
"""
import json
import math
import re
import sys

USAGE = ("usage: profile_table.py PROFILE_TXT COSTS_JSON --decode ROWS:KEYS "
         "--prefill TOKENS [--gpu NAME]")


def parse_args(argv):
    files, opts = [], {}
    while argv:
        a = argv.pop(0)
        if a in ("--decode", "--prefill", "--gpu") and argv:
            opts[a[2:]] = argv.pop(0).strip()
        elif a.startswith(("--decode=", "--prefill=", "--gpu=")):
            k, v = a[2:].split("=", 1)
            opts[k] = v.strip()
        else:
            files.append(a)
    if len(files) != 2 or "decode" not in opts or "prefill" not in opts:
        sys.exit(USAGE)
    try:
        rows, keys = (int(x) for x in opts["decode"].split(":"))
        tokens = int(opts["prefill"])
    except ValueError:
        sys.exit(USAGE)
    return files, {"decode": (rows, keys), "prefill": (tokens, tokens)}, \
        opts.get("gpu", "")


def parse_profile(text):
    """{kind: (steps, ms each, [(kernel, calls, ms)])} from kiln-run's
    profile lines."""
    kinds, current = {}, None
    head = re.compile(r"^\s*profile\s+(prefill|decode): (\d+) \w+?s?, "
                      r"([0-9.]+) ms each")
    row = re.compile(r"^\s{4}(\S+)\s+(\d+)\s+([0-9.]+)\s+[0-9.]+%")
    for line in text.splitlines():
        m = head.match(line)
        if m:
            current = m.group(1)
            kinds[current] = (int(m.group(2)), float(m.group(3)), [])
            continue
        m = row.match(line)
        if m and current and m.group(1) != "kernel":
            kinds[current][2].append(
                (m.group(1), int(m.group(2)), float(m.group(3))))
    return kinds


def pick_step(costs, kind, rows, keys):
    """The costs file's step of that kind and rows, the nearest in keys."""
    steps = [s for s in costs["steps"] if s["kind"] == kind and s["rows"] == rows]
    if not steps:
        return None
    return min(steps, key=lambda s: abs(s["context"] - keys))


def pick_gpu(costs, name):
    gpus = [g["name"] for g in costs.get("gpus", [])]
    for g in gpus:
        if name and re.search(rf"\b{re.escape(g)}\b", name, re.IGNORECASE):
            return g, True
    return (gpus[0] if gpus else None), False


def number(x):
    """Three significant figures, in plain notation."""
    if x is None:
        return "-"
    if x == 0 or abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{max(0, 2 - int(math.floor(math.log10(abs(x)))))}f}"


def main():
    (profile_path, costs_path), shapes, gpu_name = parse_args(sys.argv[1:])
    profile = parse_profile(open(profile_path).read())
    costs = json.load(open(costs_path))
    gpu, named = pick_gpu(costs, gpu_name)
    audited = costs.get("audited", False)
    if not profile:
        print("No profile lines in the run's output: nothing to compare.")
        return
    for kind in ("prefill", "decode"):
        if kind not in profile:
            continue
        steps, each_ms, kernels = profile[kind]
        rows, keys = shapes[kind]
        step = pick_step(costs, kind, rows, keys)
        shape = (f"a {rows}-token prompt" if kind == "prefill" else
                 f"batch {rows}, about {keys} keys")
        if step is None:
            print(f"{kind.capitalize()} ({shape}): the costs file "
                  f"({costs_path}) has no {kind} step of {rows} rows: "
                  "per-kernel GB/s and TFLOP/s not computed.")
            print()
            continue
        at = (f" (its bytes at {step['context']} keys)"
              if kind == "decode" and step["context"] != keys else "")
        by_name = {k["kernel"]: k for k in step["kernels"]}
        # The serial-ends reading's columns, where the file has it.
        ends = audited and any(gpu in k.get("serial_ends_us", {})
                               for k in step["kernels"])
        if audited and gpu:
            said = f"the cost model's prediction for the {gpu}"
            if gpu_name and not named:
                said += f" (no model of '{gpu_name}': the file's first GPU)"
            if ends:
                said += (", under both readings of its decode GEMVs "
                         "(serial ends: a warp's first loads and last pass "
                         "not overlapped)")
        else:
            said = ("no prediction: " + costs.get(
                "not_predicted", "the costs file has none"))
        print(f"Per kernel, {kind} ({shape}), {steps} "
              f"{'chunk' if kind == 'prefill' else 'step'}"
              f"{'' if steps == 1 else 's'}: measured (kiln-run --profile) "
              f"beside the bytes and FLOPs the cost model counts{at} and "
              f"{said} (docs/cost-model.md):")
        print()
        print("| kernel | calls | ms | us/call | GB/s | TFLOP/s | "
              "predicted us/call | measured / predicted |" +
              (" serial ends us/call | measured / it |" if ends else ""))
        print("|---|---|---|---|---|---|---|---|" + ("---|---|" if ends else ""))

        def ends_cells(c, per_call):
            """The serial-ends columns of a kernel (none without them)."""
            if not ends:
                return ""
            us = c.get("serial_ends_us", {}).get(gpu) if c else None
            call = us / c["calls"] if us is not None else None
            return (f" {number(call)} | "
                    f"{f'{per_call / call:.2f}x' if call and per_call else '-'} |")
        for name, calls, ms in kernels:
            c = by_name.get(name)
            if c is None:
                print(f"| {name} | {calls} | {ms:.3f} | "
                      f"{1e3 * ms / calls:.2f} | - | - | - | not in the "
                      "costs file |" + ends_cells(None, None))
                continue
            per_call = 1e3 * ms / calls
            seconds = ms / 1e3
            gbs = c["bytes"] / c["calls"] * calls / seconds / 1e9 \
                if seconds > 0 else None
            tflops = c["flops"] / c["calls"] * calls / seconds / 1e12 \
                if seconds > 0 and c["flops"] > 0 else None
            predicted = c.get("predicted_us", {}).get(gpu)
            pred_call = predicted / c["calls"] if predicted is not None else None
            ratio = (f"{per_call / pred_call:.2f}x" if pred_call else "-")
            expected = c["calls"] * steps
            if expected != calls:
                ratio += (f" ({calls} calls measured, {expected} expected: "
                          "the shapes differ)")
            print(f"| {name} | {calls} | {ms:.3f} | {per_call:.2f} | "
                  f"{number(gbs)} | {number(tflops)} | "
                  f"{number(pred_call)} | {ratio} |" +
                  ends_cells(c, per_call))
        measured = [name for name, _, _ in kernels]
        for name, c in by_name.items():
            if name not in measured:
                print(f"| {name} | 0 | - | - | - | - | "
                      f"{number(c.get('predicted_us', {}).get(gpu))} | "
                      "in the costs file, not measured |" +
                      ends_cells(c, None))
        step_pred = step.get("predicted", {}).get(gpu, {}).get("us")
        step_ends = step.get("predicted", {}).get(gpu, {}).get("serial_ends_us")
        print(f"| the {kind} {'chunk' if kind == 'prefill' else 'step'} | - | "
              f"{each_ms:.3f} | {1e3 * each_ms:.2f} | "
              f"{number(step['bytes'] / (each_ms / 1e3) / 1e9)} | "
              f"{number(step['flops'] / (each_ms / 1e3) / 1e12)} | "
              f"{number(step_pred)} | "
              f"{f'{1e3 * each_ms / step_pred:.2f}x' if step_pred else '-'} |" +
              (f" {number(step_ends)} | "
               f"{f'{1e3 * each_ms / step_ends:.2f}x' if step_ends else '-'} |"
               if ends else ""))
        print()


main()
