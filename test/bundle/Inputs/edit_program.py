#!/usr/bin/env python3
"""edit_program.py IN OUT CODE [--resum]: rewrites a bundle with its program
JSON changed by the Python statement CODE (the JSON is `p`), for tests of
what the reader refuses. With --resum the bundle's checksum is made to
match again (as a deliberate forger would), so that the damage reaches the
device: the AddressSanitizer test's out-of-bounds launch."""
import json, struct, sys

raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
p = json.loads(header["__metadata__"]["program"])
exec(sys.argv[3])
header["__metadata__"]["program"] = json.dumps(p)
if "--resum" in sys.argv[4:]:
    # runtime/Bundle.cpp's checksum: FNV-1a of the program, then of each
    # blob's name, a NUL and its bytes, by name.
    def fnv(h, data):
        for c in data:
            h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        return h
    h = fnv(1469598103934665603, header["__metadata__"]["program"].encode())
    base = 8 + n
    for name in sorted(k for k in header if k != "__metadata__"):
        begin, end = header[name]["data_offsets"]
        h = fnv(fnv(h, name.encode() + b"\0"), raw[base + begin:base + end])
    header["__metadata__"]["checksum"] = "%016x" % h
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
