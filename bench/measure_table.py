#!/usr/bin/env python3
"""measure_table.py MEASUREMENTS.json: the GPU check's tuning table, from
kiln-run --time-candidates: per family, batch and length, the default
knobs' time, the fastest candidate's (rejected ones left out), its knobs,
the speedup, and how many candidates were rejected there (and of those,
how many did not run at all). Below it, each candidate that did not run
(its bundle refused, a launch failed, a fault: the measurements' "error")
with its first error line, once per family and knobs. The database itself
is made on the kiln machine: kiln tune --measurements FILE."""
import json
import sys

m = json.load(open(sys.argv[1]))
print(f"Tuning measurements: {m['model']} on {m['device']} (driver "
      f"{m['driver']}, {m['source']}, median of {m['repeats']}), family "
      "kernels only (microseconds per step).")
print()
print("| family | batch | length | default | best | best knobs | speedup | rejected |")
print("|---|---|---|---|---|---|---|---|")
defaults = {(d["family"], d["batch"], d["length"]): d["micros"]
            for d in m["defaults"]}
for key in sorted(defaults):
    family, batch, length = key
    runs = [c for c in m["candidates"] if (c["family"], c["batch"],
                                           c["length"]) == key]
    kept = [c for c in runs if not c["rejected"]]
    failed = sum(1 for c in runs if c.get("error"))
    rejected = f"{len(runs) - len(kept)}" + (
        f" ({failed} did not run)" if failed else "")
    if not kept:
        print(f"| {family} | {batch} | {length} | {defaults[key]:.1f} | - | - "
              f"| - | {rejected} |")
        continue
    # Ties: the knobs that sort first, as kiln's bucket rule breaks them.
    best = min(kept, key=lambda c: (c["micros"], c["knobs"]))
    speedup = defaults[key] / best["micros"] if best["micros"] > 0 else 0
    print(f"| {family} | {batch} | {length} | {defaults[key]:.1f} | "
          f"{best['micros']:.1f} | {best['knobs']} | {speedup:.2f}x | "
          f"{rejected} |")

# The candidates that did not run, each once with the cases it missed.
errors = {}
for c in m["candidates"]:
    if c.get("error"):
        e = errors.setdefault((c["family"], c["knobs"]), [c["error"], []])
        e[1].append(f"{c['batch']}x{c['length']}")
if errors:
    print()
    print(f"{len(errors)} candidates did not run (rejected at every case; "
          "the cases are batch x length):")
    print()
    for (family, knobs), (error, cases) in sorted(errors.items()):
        line = error.strip().splitlines()[0] if error.strip() else "?"
        if len(line) > 300:
            line = line[:300] + "..."
        print(f"- {family} {knobs} ({', '.join(cases)}): {line}")
