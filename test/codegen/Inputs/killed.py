#!/usr/bin/env python3
"""killed.py CACHE CMD...: the kernel cache after writers die. Runs CMD
(a compile into CACHE) and kills it with SIGKILL after 0.3, 0.8 and 1.5
seconds, then leaves what a writer killed mid-write leaves: a half-written
temporary entry named for a process that no longer exists. Prints the
temporaries left (names only), for the test to see them go."""
import glob, os, signal, subprocess, sys, time

cache, cmd = sys.argv[1], sys.argv[2:]
for delay in (0.3, 0.8, 1.5):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()
os.makedirs(cache, exist_ok=True)
dead = subprocess.Popen(["true"])
dead.wait()  # its pid names no process now
with open(os.path.join(cache, "0" * 64 + ".kernel.tmp." + str(dead.pid)),
          "wb") as f:
    f.write(b"kiln-kernel-cache 1\n{\"kernel\": \"half")
for t in sorted(glob.glob(os.path.join(cache, "*.tmp.*"))):
    print("temporary", os.path.basename(t).split(".")[1])
