#!/usr/bin/env python3
"""fault_kernel.py IN OUT KERNEL: rewrites a bundle so that kernel KERNEL
(its kiln.kernel name) stores through a null pointer as it starts, with the
checksum made to match again: a kernel that faults, as an illegal address
does on a GPU (on the emu device, a SIGSEGV), for tests of what contains
a fault. The CUBIN and PTX are left as they are: only emu compiles the
source."""
import json, re, struct, sys

src, dst, kernel = sys.argv[1:4]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
base = 8 + n
blobs = {k: raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
         for k, v in header.items() if k != "__metadata__"}
name = "source/" + kernel
if name not in blobs:
    sys.exit("fault_kernel.py: %s has no %s" % (src, name))
text = blobs[name].decode()
entry = re.search(r'extern "C" __global__[^{]*\{', text)
blobs[name] = (text[:entry.end()] + "\n  *(volatile int *)nullptr = 1;\n" +
               text[entry.end():]).encode()

# runtime/Bundle.cpp's checksum: FNV-1a of the program, then of each blob's
# name, a NUL and its bytes, by name.
def fnv(h, data):
    for c in data:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
meta = header["__metadata__"]
h = fnv(1469598103934665603, meta["program"].encode())
data, out = bytearray(), {"__metadata__": meta}
for k in sorted(blobs):
    h = fnv(fnv(h, k.encode() + b"\0"), blobs[k])
    out[k] = dict(header[k], shape=[len(blobs[k])],
                  data_offsets=[len(data), len(data) + len(blobs[k])])
    data += blobs[k]
meta["checksum"] = "%016x" % h
hb = json.dumps(out).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(data))
