#!/usr/bin/env python3
"""make_bad_quantized.py SRC DST CASE: copies the pre-quantized (GPTQ or AWQ)
model folder SRC to DST and breaks it in one way, named by CASE, for the
bad-input tests of ref-gptq-awq.test and emu-gptq-awq.test. Pure Python
(json, struct): the tensors are rewritten in place, header and bytes."""
import json, os, shutil, struct, sys

src, dst, case = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
config_path = os.path.join(dst, "config.json")
weights_path = os.path.join(dst, "model.safetensors")


def edit_quantization(**fields):
    config = json.load(open(config_path))
    config["quantization_config"].update(fields)
    json.dump(config, open(config_path, "w"), indent=1)


def read_weights():
    raw = open(weights_path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def write_weights(header, data):
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(weights_path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))


def reshape(name, shape):
    """The tensor's header says `shape` (of as many elements): the bytes stay."""
    header, data = read_weights()
    header[name]["shape"] = shape
    write_weights(header, data)


def edit_ints(name, fn):
    """fn edits the tensor's I32 values (a list) in place."""
    header, data = read_weights()
    begin, end = header[name]["data_offsets"]
    values = list(struct.unpack("<%di" % ((end - begin) // 4), data[begin:end]))
    fn(values)
    data[begin:end] = struct.pack("<%di" % len(values), *values)
    write_weights(header, data)


def swap_groups(values):
    """Swaps two columns of different groups: still a valid group map."""
    j = next(i for i in range(1, len(values)) if values[i] != values[0])
    values[0], values[j] = values[j], values[0]


Q = "model.layers.0.self_attn.q_proj"
K = "model.layers.0.self_attn.k_proj"
cases = {
    # [16, 128] -> [8, 256]: the bytes of a 4-bit [128, 128] module, another
    # shape.
    "qweight-shape": lambda: reshape(Q + ".qweight", [8, 256]),
    # 48 does not divide the 128 input features.
    "group-not-dividing": lambda: edit_quantization(group_size=48),
    "bits-3": lambda: edit_quantization(bits=3),
    "unknown-method": lambda: edit_quantization(quant_method="bitsandbytes"),
    # An act-order checkpoint that says it is not: its g_idx reorders.
    "desc-act-false": lambda: edit_quantization(desc_act=False),
    # Entry 5 names group 7 of 4.
    "g-idx-outside": lambda: edit_ints(Q + ".g_idx",
                                       lambda v: v.__setitem__(5, 7)),
    # Group 0 gets a column of group 1: 33 columns and 31.
    "g-idx-uneven": lambda: edit_ints(
        Q + ".g_idx", lambda v: v.__setitem__(v.index(1), 0)),
    # k_proj's column order differs from q_proj's (both valid): one packed
    # QKV buffer cannot hold both.
    "g-idx-differ": lambda: edit_ints(K + ".g_idx", swap_groups),
}
cases[case]()
