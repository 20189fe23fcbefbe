#!/usr/bin/env python3
"""to_meta_layout.py SRC DST: copies a Hugging Face Llama folder and puts
the q_proj and k_proj rows back in Meta's interleaved RoPE layout, undoing
the permutation of Hugging Face's conversion script: Meta row
h*Dh + 2i + j is Hugging Face row h*Dh + j*Dh/2 + i."""
import json, os, shutil, struct, sys

src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
config = json.load(open(os.path.join(src, "config.json")))
heads = config["num_attention_heads"]
kv_heads = config.get("num_key_value_heads", heads)
head_dim = config["hidden_size"] // heads

path = os.path.join(dst, "model.safetensors")
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
base = 8 + n
for name, e in header.items():
    if name == "__metadata__":
        continue
    if name.endswith("q_proj.weight"):
        count = heads
    elif name.endswith("k_proj.weight"):
        count = kv_heads
    else:
        continue
    begin, end = e["data_offsets"]
    rows, cols = e["shape"]
    row_bytes = (end - begin) // rows
    old = bytes(raw[base + begin:base + end])
    new = bytearray(len(old))
    for h in range(count):
        for i in range(head_dim // 2):
            for j in range(2):
                meta = h * head_dim + 2 * i + j
                hf = h * head_dim + j * (head_dim // 2) + i
                new[meta * row_bytes:(meta + 1) * row_bytes] = \
                    old[hf * row_bytes:(hf + 1) * row_bytes]
    raw[base + begin:base + end] = new
open(path, "wb").write(raw)
