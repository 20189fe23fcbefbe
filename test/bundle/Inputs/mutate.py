#!/usr/bin/env python3
"""mutate.py BUNDLE KILN SEED COUNT: damages BUNDLE COUNT times (seeded:
bytes of the header changed, digits changed, the file cut short, launch
grids and argument offsets set to hostile values) and runs `KILN inspect`
on each. Every run must end with exit 0, or exit 1 and exactly one line on
stderr: never a crash, a hang or a second line. Prints one summary line."""
import json, os, random, struct, subprocess, sys, tempfile

path, kiln, seed, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
rng = random.Random(seed)


def damaged():
    b = bytearray(raw)
    kind = rng.randrange(4)
    if kind == 0:  # any bytes of the header
        for _ in range(rng.randrange(1, 4)):
            b[rng.randrange(8, 8 + n)] = rng.randrange(256)
    elif kind == 1:  # numbers in the header
        digits = [j for j in range(8, 8 + n) if chr(b[j]).isdigit()]
        for _ in range(rng.randrange(1, 3)):
            b[rng.choice(digits)] = ord(rng.choice("0123456789"))
    elif kind == 2:  # cut short
        b = b[:rng.randrange(len(b))]
    else:  # hostile launch shapes and offsets, in valid JSON
        h = json.loads(raw[8:8 + n])
        p = json.loads(h["__metadata__"]["program"])
        launches = p["decode"]["launches"] + sum(
            (bk["launches"] for bk in p["prefill"]["buckets"]), [])
        l = rng.choice(launches)
        hostile = [0, -1, 1, 7, 2**31, 10**12, 2**63 - 1]
        if "grid" in l and rng.random() < 0.4:
            l["grid"][rng.randrange(3)] = rng.choice(hostile)
        elif "gemm" in l and rng.random() < 0.5:
            l["gemm"][rng.choice("mnk")] = rng.choice(hostile)
        else:
            rng.choice(l["args"])["offset"] = rng.choice(hostile)
        h["__metadata__"]["program"] = json.dumps(p)
        hb = json.dumps(h).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        b = bytearray(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
    return bytes(b)


failures = 0
with tempfile.TemporaryDirectory() as tmp:
    target = os.path.join(tmp, "damaged.kiln")
    for i in range(count):
        open(target, "wb").write(damaged())
        try:
            r = subprocess.run([kiln, "inspect", target], capture_output=True,
                               timeout=30)
        except subprocess.TimeoutExpired:
            failures += 1
            print(f"mutation {i}: hung")
            continue
        lines = r.stderr.decode("utf-8", "replace").splitlines()
        if r.returncode not in (0, 1) or (r.returncode == 1 and len(lines) != 1):
            failures += 1
            print(f"mutation {i}: exit {r.returncode}: {lines[-3:]}")
print(f"{count} damaged bundles, {failures} bad endings")
sys.exit(1 if failures else 0)
