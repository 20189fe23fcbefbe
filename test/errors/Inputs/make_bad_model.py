#!/usr/bin/env python3
"""make_bad_model.py SRC DST CASE: copies the model folder SRC to DST and
breaks it in one way, named by CASE. Each bad-input test builds its case."""
import json, os, shutil, struct, sys

src, dst, case = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
config_path = os.path.join(dst, "config.json")
weights_path = os.path.join(dst, "model.safetensors")


def edit_config(fn):
    config = json.load(open(config_path))
    fn(config)
    json.dump(config, open(config_path, "w"), indent=1)


def read_weights():
    raw = open(weights_path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_weights(header, data, header_bytes=None):
    h = header_bytes if header_bytes is not None else json.dumps(header).encode()
    open(weights_path, "wb").write(struct.pack("<Q", len(h)) + h + data)


def edit_weights(fn):
    header, data = read_weights()
    fn(header)
    write_weights(header, data)


def last_tensor(header):
    return max((k for k in header if k != "__metadata__"),
               key=lambda k: header[k]["data_offsets"][0])


LAYER0_NORM = "model.layers.0.input_layernorm.weight"  # not the last tensor
cases = {
    # config.json
    "no-config": lambda: os.remove(config_path),
    "garbled-config": lambda: open(config_path, "w").write('{"hidden_size": 64,'),
    "config-not-object": lambda: open(config_path, "w").write("[64]"),
    "missing-field": lambda: edit_config(lambda c: c.pop("vocab_size")),
    "wrong-type": lambda: edit_config(lambda c: c.update(hidden_size="64")),
    "heads-not-dividing": lambda: edit_config(lambda c: c.update(num_attention_heads=5)),
    "kv-heads-not-dividing": lambda: edit_config(lambda c: c.update(num_key_value_heads=3)),
    "head-dim-mismatch": lambda: edit_config(lambda c: c.update(head_dim=32)),
    "not-llama": lambda: edit_config(lambda c: c.update(model_type="mistral")),
    # model.safetensors
    "no-weights": lambda: os.remove(weights_path),
    "short-file": lambda: open(weights_path, "wb").write(b"\x10\x00\x00"),
    "header-past-eof": lambda: write_weights(None, b"", b"{}" + b" " * 6)
        or open(weights_path, "r+b").write(struct.pack("<Q", 1 << 20)),
    "header-not-json": lambda: write_weights(None, b"", b'{"lm_head.weight": [}'),
    "bad-dtype": lambda: edit_weights(
        lambda h: h["model.norm.weight"].update(dtype="F8_E4M3")),
    "size-mismatch": lambda: edit_weights(
        lambda h: h["model.norm.weight"].update(shape=[65])),
    "range-outside": lambda: edit_weights(
        lambda h: h[last_tensor(h)].update(
            data_offsets=[o + 64 for o in h[last_tensor(h)]["data_offsets"]])),
    "truncated": lambda: open(weights_path, "r+b").truncate(
        os.path.getsize(weights_path) - 100),
    "overlap": lambda: edit_weights(lambda h: h[LAYER0_NORM].update(
        data_offsets=[o + 2 for o in h[LAYER0_NORM]["data_offsets"]])),
    "missing-tensor": lambda: edit_weights(
        lambda h: h.pop("model.layers.1.mlp.up_proj.weight")),
    "misshapen-tensor": lambda: edit_weights(
        lambda h: h["model.layers.0.mlp.gate_proj.weight"].update(shape=[64, 192])),
    "int-weight": lambda: edit_weights(
        lambda h: h["model.norm.weight"].update(dtype="I32", shape=[32])),
}
cases[case]()
