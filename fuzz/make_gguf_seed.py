#!/usr/bin/env python3
"""make_gguf_seed.py: the GGUF fuzzer's seed (fuzz/corpus/gguf/), made by the
`gguf` package of llama.cpp (0.19.0, in the venv of
test/fixtures/make_gguf_fixture.py): a one-layer llama file, hidden 32, whose
tensors cover every type kiln reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1 quantized by gguf; Q4_K, Q5_K, Q6_K as raw blocks, which gguf cannot
quantize) and a four-token tokenizer; small enough for -max_len=65536.

  /tmp/qvenv/bin/python fuzz/make_gguf_seed.py
"""
import os

import gguf
import numpy as np

T = gguf.GGMLQuantizationType
out = os.path.join(os.path.dirname(__file__), "corpus", "gguf", "tiny-types.gguf")
rng = np.random.default_rng(7)
w = gguf.GGUFWriter(out, "llama")
w.add_context_length(64)
w.add_embedding_length(32)
w.add_block_count(1)
w.add_feed_forward_length(256)
w.add_head_count(2)
w.add_head_count_kv(1)
w.add_rope_dimension_count(16)
w.add_layer_norm_rms_eps(1e-5)
w.add_tokenizer_model("llama")
w.add_token_list([b"<unk>", b"<s>", b"</s>", b"\xe2\x96\x81a"])
w.add_token_scores([0.0, 0.0, 0.0, -1.0])
w.add_token_types([2, 3, 3, 1])
w.add_bos_token_id(1)
w.add_eos_token_id(2)


def add(name, rows, cols, qtype):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    if qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
        w.add_tensor(name, raw, raw_dtype=qtype)
    elif qtype == T.F32:
        w.add_tensor(name, x)
    else:
        q = gguf.quants.quantize(x, qtype)
        w.add_tensor(name, q, raw_dtype=qtype)


add("token_embd.weight", 4, 32, T.Q8_0)
add("blk.0.attn_norm.weight", 1, 32, T.F32)
add("blk.0.attn_q.weight", 32, 32, T.Q4_0)
add("blk.0.attn_k.weight", 16, 32, T.Q4_1)
add("blk.0.attn_v.weight", 16, 32, T.Q5_0)
add("blk.0.attn_output.weight", 32, 32, T.Q5_1)
add("blk.0.ffn_norm.weight", 1, 32, T.F16)
add("blk.0.ffn_gate.weight", 1, 256, T.Q4_K)
add("blk.0.ffn_up.weight", 1, 256, T.Q5_K)
add("blk.0.ffn_down.weight", 1, 256, T.Q6_K)
add("output_norm.weight", 1, 32, T.BF16)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out, os.path.getsize(out), "bytes")
