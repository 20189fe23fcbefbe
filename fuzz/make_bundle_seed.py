#!/usr/bin/env python3
"""make_bundle_seed.py IN OUT: the bundle fuzzer's seed from a real bundle:
IN is tiny-gqa's config with one layer and an FFN of 24576, compiled with
--quantize int4-g32 (a quantized program, with a kernel of dynamic shared
memory: every field a reader checks): its program as compiled, each
kernel's source replaced by a one-line stub and its CUBIN and PTX dropped
(the reader checks their names and bytes, not what they hold), the
checksum made to match. Small enough to mutate; rerun it when the bundle
format's version changes."""
import json, struct, sys

raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["__metadata__"]
program = json.loads(meta["program"])
blobs = {"source/" + k["name"]: ("// " + k["entry"] + "\n").encode()
         for k in program["kernels"]}


def fnv(h, data):  # runtime/Bundle.cpp's checksum: FNV-1a, 64 bits
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


h = fnv(1469598103934665603, meta["program"].encode())
out = {"__metadata__": meta}
data = b""
for name in sorted(blobs):
    h = fnv(fnv(h, name.encode() + b"\0"), blobs[name])
    out[name] = {"dtype": "U8", "shape": [len(blobs[name])],
                 "data_offsets": [len(data), len(data) + len(blobs[name])]}
    data += blobs[name]
meta["checksum"] = "%016x" % h
text = json.dumps(out, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data)
