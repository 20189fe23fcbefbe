#!/usr/bin/env python3
"""damage.py DIR flip|truncate: damages the first kernel cache entry in DIR
(sorted by name), by flipping its last byte or cutting it in half."""
import os, sys

entries = sorted(f for f in os.listdir(sys.argv[1]) if f.endswith(".kernel"))
path = os.path.join(sys.argv[1], entries[0])
data = bytearray(open(path, "rb").read())
if sys.argv[2] == "flip":
    data[-1] ^= 0xFF
else:
    data = data[:len(data) // 2]
open(path, "wb").write(data)
