#!/usr/bin/env python3
"""edit_program.py IN OUT CODE: rewrites a bundle with its program JSON
changed by the Python statement CODE (the JSON is `p`), for tests of what
the reader refuses."""
import json, struct, sys

raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
p = json.loads(header["__metadata__"]["program"])
exec(sys.argv[3])
header["__metadata__"]["program"] = json.dumps(p)
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
