#!/usr/bin/env python3
"""concurrent.py N CMD...: runs N copies of CMD at once; fails unless all
exit 0. The kernel cache test uses it to compile into one cache from
several processes."""
import subprocess, sys

n = int(sys.argv[1])
procs = [subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE) for _ in range(n)]
codes = [(p.wait(), p.stderr.read().decode()) for p in procs]
bad = [c for c in codes if c[0] != 0]
for code, err in bad:
    print(f"exit {code}: {err}", file=sys.stderr)
print(f"{n - len(bad)} of {n} succeeded")
sys.exit(1 if bad else 0)
