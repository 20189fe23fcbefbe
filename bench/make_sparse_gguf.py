#!/usr/bin/env python3
"""Write a *sparse* Llama-2-7B GGUF file for compile-only benchmarks.

What it is for
--------------
`kiln compile FILE.gguf --stats` only reads a GGUF's metadata, tensor types
and shapes; it never looks at the weights. To benchmark compilation of a
real-sized model without downloading ~4-7 GB of weights, this script writes a
GGUF file laid out exactly as llama.cpp's `convert_hf_to_gguf.py` followed by
`llama-quantize` would lay out Meta's Llama-2-7B, with llama.cpp's per-tensor
quantization types, but with all tensor data zero and *not written*: the
header, metadata and tensor infos are written with gguf-py's GGUFWriter, then
the file is extended to its full size with truncate(2), which leaves a hole
for the data section. The result has the right apparent size (3.8+ GB) but
occupies well under 1 MB on disk. Any program that tries to run it gets zeros.

How to run
----------
    /tmp/qvenv/bin/python bench/make_sparse_gguf.py --type Q4_K_M
    /tmp/qvenv/bin/python bench/make_sparse_gguf.py --type all        # Q4_K_M Q4_K_S Q4_0 Q8_0
    /tmp/qvenv/bin/python bench/make_sparse_gguf.py --type Q8_0 --out-dir /tmp/sparse7b

Needs the `gguf` Python package (tested with gguf 0.19.0) and numpy.
Output: <out-dir>/llama2-7b-<TYPE>.gguf (default out-dir /tmp/sparse7b).
After writing, the file is re-opened with gguf.GGUFReader and every tensor's
name, type, shape and offset is checked against the plan (disable: --no-verify).

Model
-----
Llama-2-7B: vocab 32000, hidden 4096, 32 blocks, 32 heads, 32 kv heads,
ffn 11008, context 4096, rms eps 1e-5, rope freq base 10000, head dim 128.
Metadata is what convert_hf_to_gguf.py writes for a LlamaForCausalLM with a
SentencePiece tokenizer (general.*, llama.*, tokenizer.ggml.*), plus
general.file_type and general.quantization_version (= 2) as llama-quantize
sets them. Token strings are synthetic ("<unk>", "<s>", "</s>", "<0x00>".."<0xFF>",
then "▁t0".."▁t31740"); scores are synthetic.

Tensors use GGUF names and GGUF dims order (ne[0] = input dimension):
token_embd.weight [4096, 32000], output_norm.weight [4096] F32,
output.weight [4096, 32000], and per block blk.N.attn_norm/ffn_norm [4096] F32,
attn_q/attn_k/attn_v/attn_output [4096, 4096], ffn_gate/ffn_up [4096, 11008],
ffn_down [11008, 4096].

llama.cpp rules restated here (src/llama-quant.cpp, llama_model_quantize_impl
and llama_tensor_get_type, as in llama.cpp master of 2025)
-----------------------------------------------------------------------
* Tensor order in the quantized file: llama-quantize walks the loader's
  weights_map, which is sorted by weight_name_comparer: non-block tensors first
  (layer -1) in name order (output.weight, output_norm.weight,
  token_embd.weight), then blk.0 .. blk.31 each in name order (attn_k,
  attn_norm, attn_output, attn_q, attn_v, ffn_down, ffn_gate, ffn_norm,
  ffn_up). The counters i_attention_wv / i_ffn_down therefore equal the block
  index. Data section alignment is GGUF_DEFAULT_ALIGNMENT = 32; every tensor's
  data is padded to 32 bytes.
* Only 2-D+ tensors whose names end in "weight" and are not "*_norm.weight"
  are quantized: the norms stay F32.
* Default type per file type: Q4_0 -> Q4_0, Q8_0 -> Q8_0, Q4_K_S/Q4_K_M -> Q4_K.
* output.weight (Llama-2 has a separate output, so has_output is true): Q8_0
  if ne[0] % block size != 0 (not the case: 4096), otherwise Q6_K unless the
  type is already Q8_0. So Q4_0/Q4_K_S/Q4_K_M -> Q6_K, Q8_0 -> Q8_0.
* token_embd.weight: changed only for IQ1/IQ2/IQ3_XXS/TQ file types, so it
  keeps the default type: Q4_K for Q4_K_M and Q4_K_S, Q4_0, Q8_0.
* attn_v.weight: Q4_K_M (and Q5_K_M) -> Q6_K where
  use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
  with n = n_attention_wv = 32 (i.e. blocks 0-3, 6, 9, 12, 15, 18, 21, 24, 27,
  28-31: 16 of 32); Q4_K_S -> Q5_K for i_attention_wv < 4. (The 70B rule that
  bumps Q4_K attn_v to Q5_K and the 8-expert rule do not apply to 7B.)
* ffn_down: Q4_K_M (non-Falcon) -> Q6_K where use_more_bits(i_layer, n_layer);
  Q4_K_S (non-Falcon) -> Q5_K for i_layer < n_layer/8 (blocks 0-3);
  Q4_0 -> Q4_1 for i_layer < n_layer/8 only when an imatrix is given (not
  modelled: we assume no imatrix, so Q4_0 stays Q4_0).
* attn_q, attn_k, attn_output, ffn_gate, ffn_up: no change for these file
  types (the attn_output/ffn_gate/ffn_up rules concern Q2_K/Q3_K/IQ3 types
  or 8-expert models).
* Fallback when ne[0] is not a multiple of the block size: never triggered
  (4096 = 16*256, 11008 = 43*256).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, LlamaFileType

# ---- model hyper-parameters (Llama-2-7B) -----------------------------------
N_VOCAB = 32000
N_EMBD = 4096
N_LAYER = 32
N_HEAD = 32
N_HEAD_KV = 32
N_FF = 11008
N_CTX = 4096
RMS_EPS = 1e-5
ROPE_BASE = 10000.0
HEAD_DIM = N_EMBD // N_HEAD  # 128

FILE_TYPES = {
    "Q4_K_M": (LlamaFileType.MOSTLY_Q4_K_M, T.Q4_K),
    "Q4_K_S": (LlamaFileType.MOSTLY_Q4_K_S, T.Q4_K),
    "Q4_0": (LlamaFileType.MOSTLY_Q4_0, T.Q4_0),
    "Q8_0": (LlamaFileType.MOSTLY_Q8_0, T.Q8_0),
}
GGML_QNT_VERSION = 2


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    # Same as llama.cpp's lambda; the third clause is only reached with
    # i_layer >= n_layers/8, so C and Python '%' agree.
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def tensor_plan() -> list[tuple[str, tuple[int, ...]]]:
    """(name, GGUF dims ne[0], ne[1], ...) in llama-quantize's output order."""
    top = {
        "token_embd.weight": (N_EMBD, N_VOCAB),
        "output_norm.weight": (N_EMBD,),
        "output.weight": (N_EMBD, N_VOCAB),
    }
    blk = {
        "attn_norm.weight": (N_EMBD,),
        "ffn_norm.weight": (N_EMBD,),
        "attn_q.weight": (N_EMBD, N_EMBD),
        "attn_k.weight": (N_EMBD, HEAD_DIM * N_HEAD_KV),
        "attn_v.weight": (N_EMBD, HEAD_DIM * N_HEAD_KV),
        "attn_output.weight": (N_EMBD, N_EMBD),
        "ffn_gate.weight": (N_EMBD, N_FF),
        "ffn_up.weight": (N_EMBD, N_FF),
        "ffn_down.weight": (N_FF, N_EMBD),
    }
    plan = [(n, top[n]) for n in sorted(top)]  # layer -1 sorts first
    for i in range(N_LAYER):
        plan += [(f"blk.{i}.{n}", blk[n]) for n in sorted(blk)]
    return plan


def tensor_type(name: str, dims: tuple[int, ...], ftype_name: str) -> T:
    """llama-quantize's choice for one tensor (see module docstring)."""
    ftype, default = FILE_TYPES[ftype_name]
    if len(dims) < 2 or name.endswith("_norm.weight"):
        return T.F32  # not quantized; converter writes norms as F32
    new = default
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if name == "output.weight":
        blck = GGML_QUANT_SIZES[new][0]
        if dims[0] % blck != 0:
            new = T.Q8_0
        elif new != T.Q8_0:
            new = T.Q6_K
    elif name == "token_embd.weight":
        pass  # only IQ1/IQ2/IQ3_XXS/TQ file types change it
    elif "attn_v.weight" in name:
        if ftype in (LlamaFileType.MOSTLY_Q4_K_M, LlamaFileType.MOSTLY_Q5_K_M) and use_more_bits(layer, N_LAYER):
            new = T.Q6_K
        elif ftype == LlamaFileType.MOSTLY_Q4_K_S and layer < 4:
            new = T.Q5_K
    elif "ffn_down" in name:
        if ftype == LlamaFileType.MOSTLY_Q4_K_M:
            if use_more_bits(layer, N_LAYER):
                new = T.Q6_K
        elif ftype == LlamaFileType.MOSTLY_Q4_K_S and layer < N_LAYER // 8:
            new = T.Q5_K
    # fallback for rows not divisible by the block size (never hit for 7B)
    if dims[0] % GGML_QUANT_SIZES[new][0] != 0:
        raise ValueError(f"{name}: ne[0]={dims[0]} not divisible by {new.name} block size")
    return new


def nbytes(dims: tuple[int, ...], qtype: T) -> int:
    blck, tsize = GGML_QUANT_SIZES[qtype]
    n = 1
    for d in dims:
        n *= d
    assert n % blck == 0
    return n // blck * tsize


def add_metadata(w: gguf.GGUFWriter, ftype_name: str) -> None:
    ftype = FILE_TYPES[ftype_name][0]
    # general.* as convert_hf_to_gguf.py writes for meta-llama/Llama-2-7b-hf
    w.add_type("model")
    w.add_name("Llama 2 7b Hf")
    w.add_finetune("hf")
    w.add_basename("Llama-2")
    w.add_size_label("7B")
    w.add_license("llama2")
    # llama.* hyper-parameters
    w.add_vocab_size(N_VOCAB)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_file_type(int(ftype))
    # SentencePiece tokenizer
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    n_rest = N_VOCAB - len(tokens)
    tokens += [f"\u2581t{i}" for i in range(n_rest)]
    assert len(tokens) == N_VOCAB and len(set(tokens)) == N_VOCAB
    scores = [0.0] * 259 + [-float(i) for i in range(n_rest)]
    types = [int(gguf.TokenType.UNKNOWN)] + [int(gguf.TokenType.CONTROL)] * 2 \
        + [int(gguf.TokenType.BYTE)] * 256 + [int(gguf.TokenType.NORMAL)] * n_rest
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    # added by llama-quantize
    w.add_quantization_version(GGML_QNT_VERSION)


def write_sparse(ftype_name: str, out_dir: Path) -> tuple[Path, list[tuple[str, tuple[int, ...], T, int]], int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"llama2-7b-{ftype_name}.gguf"
    if path.exists():
        path.unlink()
    w = gguf.GGUFWriter(path, "llama")
    add_metadata(w, ftype_name)
    align = w.data_alignment
    assert align == GGUF_DEFAULT_ALIGNMENT

    planned = []
    data_size = 0
    for name, dims in tensor_plan():
        qt = tensor_type(name, dims, ftype_name)
        nb = nbytes(dims, qt)
        # GGUFWriter takes the numpy shape (reversed GGUF dims); with a
        # non-uint8 dtype and raw_dtype set, the shape is taken as elements.
        w.add_tensor_info(name, tuple(reversed(dims)), np.dtype(np.float32), nb, raw_dtype=qt)
        planned.append((name, dims, qt, data_size))
        data_size += gguf.GGUFWriter.ggml_pad(nb, align)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    assert w.fout is not None and len(w.fout) == 1
    meta_end = w.fout[0].tell()
    w.close()
    data_offset = gguf.GGUFWriter.ggml_pad(meta_end, align)
    total = data_offset + data_size
    # Padding after the tensor infos and all tensor data: a hole of zeros.
    os.truncate(path, total)
    return path, planned, data_offset


def verify(path: Path, planned, data_offset: int) -> None:
    r = gguf.GGUFReader(path)
    assert r.data_offset == data_offset, (r.data_offset, data_offset)
    assert len(r.tensors) == len(planned), (len(r.tensors), len(planned))
    for t, (name, dims, qt, off) in zip(r.tensors, planned):
        assert t.name == name, (t.name, name)
        assert t.tensor_type == qt, (name, t.tensor_type, qt)
        assert tuple(int(x) for x in t.shape) == dims, (name, t.shape, dims)
        assert t.data_offset == data_offset + off, (name, t.data_offset, data_offset + off)
        assert t.n_bytes == nbytes(dims, qt), (name, t.n_bytes)
    f = r.fields
    assert str(bytes(f["general.architecture"].parts[-1]), "utf-8") == "llama"
    assert len(f["tokenizer.ggml.tokens"].data) == N_VOCAB
    assert int(f["general.file_type"].parts[-1][0]) == int(FILE_TYPES[path.stem.split("-", 2)[2]][0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--type", action="append", required=True,
                    help=f"file type: {', '.join(FILE_TYPES)} or 'all' (repeatable)")
    ap.add_argument("--out-dir", type=Path, default=Path("/tmp/sparse7b"))
    ap.add_argument("--no-verify", action="store_true")
    args = ap.parse_args()
    types: list[str] = []
    for t in args.type:
        for x in (FILE_TYPES if t.lower() == "all" else [t.upper()]):
            if x not in FILE_TYPES:
                ap.error(f"unknown type {t!r}; choose from {', '.join(FILE_TYPES)} or all")
            if x not in types:
                types.append(x)
    for ftype_name in types:
        path, planned, data_offset = write_sparse(ftype_name, args.out_dir)
        if not args.no_verify:
            verify(path, planned, data_offset)
        counts = Counter(qt.name for _, _, qt, _ in planned)
        st = os.stat(path)
        byname = {n: qt.name for n, _, qt, _ in planned}
        print(f"{path}: {st.st_size} bytes apparent, {st.st_blocks * 512} allocated, "
              f"{len(planned)} tensors, data offset {data_offset}; "
              f"types {dict(sorted(counts.items()))}; token_embd {byname['token_embd.weight']}, "
              f"output {byname['output.weight']}" + ("" if args.no_verify else "; verified"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
