#!/usr/bin/env python3
"""make_llama2c_seed.py: the llama2.c fuzzer's seeds (fuzz/corpus/llama2c/),
written by the llama2.c writers of test/fixtures/make_llama2c_fixture.py (which
follow llama2.c's export.py) from a seeded random one-layer model (dim 16,
hidden_dim 32, 2 heads, 1 kv head, vocab 16, seq_len 8): version 0 with a
separate and with a shared classifier, version 1, version 2 (Q8_0, group size
16 after export.py's backoff from 64), and tiny-gqa's tokenizer.bin (the
fuzzer reads every input both ways). All far below -max_len=65536. In the
venv of make_gguf_fixture.py:

  /tmp/qvenv/bin/python fuzz/make_llama2c_seed.py
"""
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "fixtures"))
import make_llama2c_fixture as l2c  # noqa: E402

OUT = os.path.join(HERE, "corpus", "llama2c")


def tiny_model(shared):
    g = torch.Generator().manual_seed(11)
    cfg = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
           "num_key_value_heads": 1, "vocab_size": 16, "intermediate_size": 32,
           "rms_norm_eps": 1e-5, "max_position_embeddings": 8}
    p = l2c.Params(cfg)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    m = l2c.Layer()
    m.params = p
    m.tok_embeddings = r(16, 16)
    m.norm = r(16)
    m.output = m.tok_embeddings if shared else r(16, 16)
    L = l2c.Layer()
    L.attention_norm, L.ffn_norm = r(16), r(16)
    L.wq, L.wk, L.wv, L.wo = r(16, 16), r(8, 16), r(8, 16), r(16, 16)
    L.w1, L.w2, L.w3 = r(32, 16), r(16, 32), r(32, 16)
    m.layers = [L]
    m.freqs_cos, m.freqs_sin = l2c.precompute_freqs_cis(8, 8)
    return m


os.makedirs(OUT, exist_ok=True)
l2c.legacy_export(tiny_model(False), os.path.join(OUT, "tiny-v0.bin"))
l2c.legacy_export(tiny_model(True), os.path.join(OUT, "tiny-v0-shared.bin"))
l2c.version1_export(tiny_model(False), os.path.join(OUT, "tiny-v1.bin"))
assert l2c.version2_export(tiny_model(False), os.path.join(OUT, "tiny-v2.bin")) == 16
shutil.copy(os.path.join(l2c.OUT, "tiny-gqa-tokenizer.bin"), os.path.join(OUT, "tokenizer.bin"))
for name in sorted(os.listdir(OUT)):
    print(os.path.join(OUT, name), os.path.getsize(os.path.join(OUT, name)), "bytes")
