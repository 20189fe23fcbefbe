#!/usr/bin/env python3
"""shard_model.py SRC DST N: splits SRC/model.safetensors into N shards with a
model.safetensors.index.json, as Hugging Face writes large checkpoints."""
import json, os, shutil, struct, sys

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), dst)
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + hlen])
data = raw[8 + hlen:]
names = sorted(k for k in header if k != "__metadata__")
weight_map = {}
for i in range(n):
    part = names[i::n]
    fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
    out_header, blobs, offset = {}, [], 0
    for name in part:
        e = header[name]
        b, end = e["data_offsets"]
        blob = data[b:end]
        out_header[name] = {"dtype": e["dtype"], "shape": e["shape"],
                            "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
        weight_map[name] = fname
    h = json.dumps(out_header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(dst, fname), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": weight_map}, f)
