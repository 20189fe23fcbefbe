//===- KilnAttrs.td - kiln attributes ----------------------*- tablegen -*-===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "ir/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

// Which dimensions of a head RoPE rotates together. Hugging Face checkpoints
// pair (i, i + head_dim/2); Meta's original checkpoints pair (2i, 2i + 1).
def Kiln_RopeLayout : I32EnumAttr<"RopeLayout", "pairing of the rotated dimensions", [
    I32EnumAttrCase<"rotate_half", 0>,
    I32EnumAttrCase<"interleaved", 1>
  ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_RopeLayoutAttr : EnumAttr<Kiln_Dialect, Kiln_RopeLayout, "rope_layout"> {
  let assemblyFormat = "$value";
}

// Hugging Face's dynamic NTK RoPE scaling (`rope_scaling` of type
// `dynamic`): once a sequence is longer than `original`
// (max_position_embeddings), its base is recomputed from its length.
def Kiln_RopeDynamicAttr : AttrDef<Kiln_Dialect, "RopeDynamic"> {
  let mnemonic = "rope_dynamic";
  let summary = "dynamic NTK RoPE scaling: the base grows with the sequence";
  let description = [{
    A row of a sequence of length `L` (its position + 1 in decode, the
    whole prompt's length in a prefill, as transformers' forward sees it)
    rotates with `theta` while `L <= original`, past it with
    `theta * ((factor * L / original) - (factor - 1))^(Dh / (Dh - 2))`.
    Keys keep the rotation they were written with (docs/rope-scaling.md).
    `factor` is at least 1, `original` positive.

    ```mlir
    %qr = kiln.rope %q at %pos heads = 32, theta = 1.000000e+04, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.000000e+00, original = 4096>} : tensor<?x4096xf16>, tensor<?xi32>
    ```
  }];
  let parameters = (ins APFloatParameter<"the scaling factor">:$factor,
                        "int64_t":$original);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The base of a sequence of `length` tokens, in double.
    double base(double theta, int64_t headDim, int64_t length) const;
  }];
}

// What a function of the module computes; `kiln.phase` on each func.func,
// set by the frontend: @prefill a prompt's tokens of one sequence, @decode
// one token of one sequence. Codegen picks each op's template by it. A
// batched decode step (one token each of several sequences) runs
// @prefill's ops with the batch_decode templates: a row per sequence.
def Kiln_Phase : I32EnumAttr<"Phase", "what a function computes", [
    I32EnumAttrCase<"prefill", 0>,
    I32EnumAttrCase<"decode", 1>,
    I32EnumAttrCase<"batch_decode", 2>
  ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_PhaseAttr : EnumAttr<Kiln_Dialect, Kiln_Phase, "phase"> {
  let assemblyFormat = "`<` $value `>`";
}

// The CUDA templates of codegen/, one per kernel file: which one runs an op
// in each phase is the op's to say (KernelOpInterface::getKernelTemplate).
def Kiln_KernelTemplate : I32EnumAttr<"KernelTemplate", "a CUDA kernel template", [
    I32EnumAttrCase<"none", 0>,              // only the ref device runs it
    I32EnumAttrCase<"embedding", 1>,         // EmbeddingKernel.cpp
    I32EnumAttrCase<"gemv", 2>,              // GemvKernel.cpp
    I32EnumAttrCase<"qkv_gemv", 3>,          // QkvKernel.cpp
    I32EnumAttrCase<"linear_epilogue", 4>,   // LinearEpilogueKernel.cpp (after a GEMM)
    I32EnumAttrCase<"qkv_epilogue", 5>,      // QkvEpilogueKernel.cpp (after a GEMM)
    I32EnumAttrCase<"prefill_attention", 6>, // PrefillAttentionKernel.cpp
    I32EnumAttrCase<"decode_attention", 7>   // DecodeAttentionKernel.cpp
  ]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_KVPoolAttr : AttrDef<Kiln_Dialect, "KVPool"> {
  let mnemonic = "kv_pool";
  let summary = "the paged KV pool: one allocation of fixed-size blocks";
  let description = [{
    What `kiln-plan-kv-pool` decided. The pool is one device allocation laid
    out `[layer][keys | values][block][token][kv_head][head_dim]`: a block
    holds `block_size` tokens of one layer's keys (or values), `block_bytes`
    bytes. Layer `l` keeps its keys at `l * layer_bytes` and its values
    `blocks * block_bytes` after them. A sequence owns whole blocks through
    its block table, and block `b` of the table is block `b` in every
    layer, so one table serves all layers. The tables of all sequences are
    one `[sequences][table_blocks]` i32 array: up to `sequences` sequences
    run at once (the batch), each of up to `table_blocks * block_size`
    tokens.

    A quantized cache (an 8-bit `element_type`) keeps each layer's scales
    after its values: the keys' `[block][token][kv_head]` f16, then the
    values', `scale_bytes` bytes a block each (absent: 0, no scales), so
    `layer_bytes` is `2 * blocks * (block_bytes + scale_bytes)`.

    ```mlir
    module attributes {kiln.kv_pool = #kiln.kv_pool<block_size = 16, blocks = 256, block_bytes = 4096, layer_bytes = 2097152, bytes = 67108864, sequences = 1, table_blocks = 256>}
    ```
  }];
  let parameters = (ins "int64_t":$block_size, "int64_t":$blocks,
                        "int64_t":$block_bytes, "int64_t":$layer_bytes,
                        "int64_t":$bytes, "int64_t":$sequences,
                        "int64_t":$table_blocks,
                        DefaultValuedParameter<"int64_t", "0">:$scale_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Where layer `layer`'s keys (or values; or their scales) start.
    int64_t getOffset(int64_t layer, bool values, bool scales = false) const {
      int64_t at = layer * getLayerBytes();
      if (scales)
        return at + 2 * getBlocks() * getBlockBytes() +
               (values ? getBlocks() * getScaleBytes() : 0);
      return at + (values ? getBlocks() * getBlockBytes() : 0);
    }
  }];
}

def Kiln_ShardAttr : AttrDef<Kiln_Dialect, "Shard"> {
  let mnemonic = "shard";
  let summary = "the slice of a checkpoint tensor one rank holds";
  let description = [{
    Tensor parallelism (`kiln-shard-tensor-parallel`): the checkpoint
    tensor is cut into `parts` equal slices along `axis` (0: rows, the
    column-parallel QKV, gate/up and LM head; 1: columns, the row-parallel
    O and down projections), and rank `r` of the module's
    `kiln.tensor_parallel` ranks holds slice `r * parts / ranks`: its own
    when `parts` equals the ranks, one it shares with `ranks / parts`
    others when there are fewer (key and value heads replicated, as when a
    model has fewer KV heads than ranks). The op's type is the slice's.

    ```mlir
    %wq = kiln.weight "model.layers.0.self_attn.q_proj.weight" shard <axis = 0, parts = 4> : tensor<2048x8192xf16>
    ```
  }];
  let parameters = (ins "int64_t":$axis, "int64_t":$parts);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The slice rank `rank` of `ranks` holds.
    int64_t partOf(int64_t rank, int64_t ranks) const {
      return rank * getParts() / ranks;
    }
  }];
}

def Kiln_QuantAttr : AttrDef<Kiln_Dialect, "Quant",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "quant";
  let summary = "a quantized weight: the encoding of its tensor type";
  let description = [{
    On a weight's tensor type (`kiln.weight`, `kiln.packed_weight`), says
    that the runtime stores it quantized: int8 or int4 codes with an f16
    scale per `group` columns of a row (no group: one per row) and, with
    `zero_points`, a zero code per group; with `mins` (llama.cpp's Q4_1,
    Q5_1 and K-quants) f32 scales and an f32 min per group,
    `W[r, c] = code * scale - min`; or fp8 e4m3 with a scale per row.
    With `act_order` (GPTQ's desc_act) a group is the set of columns the
    checkpoint's g_idx names; the kernels read the columns permuted.
    The tensor keeps its dequantized shape and element type, so every op
    reads it as it reads any weight: `W[r, c] = (code - zero) * scale`
    (docs/quantization.md). The group divides the columns; int8 and fp8
    may go without one, int4 per row too; fp8 has no zero points; mins
    exclude zero points and act_order.

    ```mlir
    %w = kiln.weight "model.layers.0.mlp.down_proj.weight" : tensor<4096x11008xf16, #kiln.quant<int4, group = 128>>
    %u = kiln.weight "model.layers.0.mlp.up_proj.weight" : tensor<11008x4096xf16, #kiln.quant<int4, group = 64, zero_points>>
    %q = kiln.weight "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xf16, #kiln.quant<fp8>>
    %k = kiln.weight "model.layers.0.self_attn.k_proj.weight" : tensor<4096x4096xf16, #kiln.quant<int8, group = 16, mins>>
    ```
  }];
  let parameters = (ins "::kiln::QuantFormat":$format);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // KILN_ATTRS_TD
