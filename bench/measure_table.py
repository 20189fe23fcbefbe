#!/usr/bin/env python3
"""measure_table.py MEASUREMENTS.json: the GPU check's tuning table, from
kiln-run --time-candidates: per family, batch and length, the default
knobs' time, the fastest candidate's (rejected ones left out), its knobs,
the speedup, and how many candidates were rejected there. The database
itself is made on the kiln machine: kiln tune --measurements FILE."""
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
    rejected = len(runs) - len(kept)
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
