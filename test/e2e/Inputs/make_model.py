#!/usr/bin/env python3
"""make_model.py DST HIDDEN HEADS KV_HEADS LAYERS FFN VOCAB CONTEXT SEED:
writes a Llama 2 folder (config.json, model.safetensors in f16) with
seeded random weights, for shapes the fixtures do not have (such as the
real head dim of 128). Pure Python: struct and random, no numpy."""
import json, os, random, struct, sys

dst = sys.argv[1]
hidden, heads, kv_heads, layers, ffn, vocab, context, seed = map(int, sys.argv[2:10])
rng = random.Random(seed)
head_dim = hidden // heads
os.makedirs(dst, exist_ok=True)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": hidden, "intermediate_size": ffn,
           "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "vocab_size": vocab,
           "max_position_embeddings": context, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "hidden_act": "silu",
           "tie_word_embeddings": False, "torch_dtype": "float16"},
          open(os.path.join(dst, "config.json"), "w"), indent=1)

tensors = [("model.embed_tokens.weight", [vocab, hidden], 1.0)]
for l in range(layers):
    p = f"model.layers.{l}."
    tensors += [(p + "input_layernorm.weight", [hidden], None),
                (p + "self_attn.q_proj.weight", [hidden, hidden], 0.08),
                (p + "self_attn.k_proj.weight", [kv_heads * head_dim, hidden], 0.08),
                (p + "self_attn.v_proj.weight", [kv_heads * head_dim, hidden], 0.08),
                (p + "self_attn.o_proj.weight", [hidden, hidden], 0.08),
                (p + "post_attention_layernorm.weight", [hidden], None),
                (p + "mlp.gate_proj.weight", [ffn, hidden], 0.08),
                (p + "mlp.up_proj.weight", [ffn, hidden], 0.08),
                (p + "mlp.down_proj.weight", [hidden, ffn], 0.06)]
tensors += [("model.norm.weight", [hidden], None),
            ("lm_head.weight", [vocab, hidden], 0.1)]

header, data = {}, bytearray()
for name, shape, scale in tensors:
    n = 1
    for d in shape:
        n *= d
    # Norm weights near 1, others uniform in [-scale, scale].
    values = [1.0 + rng.uniform(-0.2, 0.2) if scale is None
              else rng.uniform(-scale, scale) for _ in range(n)]
    raw = struct.pack("<%de" % n, *values)
    header[name] = {"dtype": "F16", "shape": shape,
                    "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(os.path.join(dst, "model.safetensors"), "wb").write(
    struct.pack("<Q", len(h)) + h + bytes(data))
