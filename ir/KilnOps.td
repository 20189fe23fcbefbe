//===- KilnOps.td - kiln operations ------------------------*- tablegen -*-===//
//
// One Llama 2 decoder at tensor level. Shapes in the descriptions use
//   S = new tokens, T = visible keys, D = hidden size, H = heads,
//   Hkv = kv heads, Dh = head dim, F = ffn size, V = vocab size.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "ir/KilnDialect.td"
include "ir/KilnAttrs.td"
include "ir/KilnTypes.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "ir/KernelOpInterface.td"

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

// An op that becomes one kernel launch (KernelOpInterface): the CUDA
// template that runs it in prefill, in decode and in a batched decode step
// ("none": only the ref device runs it), whether its name takes its
// mnemonic (its module does not say what it does), and the interface
// methods it implements itself (the rest have defaults).
class Kiln_KernelOp<string mnemonic, list<Trait> traits = [],
                    string prefill = "none", string decode = "none",
                    string batchDecode = "none", bit byMnemonic = 0,
                    list<string> overrides = []>
    : Kiln_Op<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<Kiln_KernelOpInterface, overrides>])> {
  let extraClassDeclaration = [{
    /// The CUDA template of each phase (prefill, decode, batch_decode).
    static constexpr ::kiln::KernelTemplate kTemplates[3] = {
        ::kiln::KernelTemplate::}] # prefill # [{,
        ::kiln::KernelTemplate::}] # decode # [{,
        ::kiln::KernelTemplate::}] # batchDecode # [{};
    /// Its kernel's name ends with the mnemonic.
    static constexpr bool kNamedByMnemonic = }] # !if(byMnemonic, "true", "false") # [{;
  }];
}

def Kiln_Float : AnyTypeOf<[F16, BF16, F32]>;
def Kiln_Activation : 2DTensorOf<[F16, BF16, F32]>;   // [S, features]
def Kiln_Vector : 1DTensorOf<[F16, BF16, F32]>;       // [D]
def Kiln_Matrix : 2DTensorOf<[F16, BF16, F32]>;       // [N, K]
def Kiln_Scores : 3DTensorOf<[F32]>;                  // [H, S, T]
def Kiln_Positions : 1DTensorOf<[I32]>;               // [S]

//===----------------------------------------------------------------------===//
// Weights and embedding
//===----------------------------------------------------------------------===//

def Kiln_WeightOp : Kiln_Op<"weight", [Pure]> {
  let summary = "a model weight, referenced by its checkpoint name";
  let description = [{
    Stands for the checkpoint tensor `name` with the static shape and the
    storage element type of the result. The values are never part of the IR:
    the runtime reads them from the model's safetensors files.

    ```mlir
    %w = kiln.weight "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xf16>
    ```

    With `shard` (tensor parallelism), it is the rank's slice of the
    tensor (#kiln.shard).
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<Kiln_ShardAttr>:$shard);
  let results = (outs RankedTensorOf<[F16, BF16, F32]>:$result);
  let assemblyFormat = "$name (`shard` $shard^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_EmbeddingOp : Kiln_KernelOp<"embedding", [Pure],
    "embedding", "embedding", "embedding", 0, ["getKernelCost"]> {
  let summary = "looks up the embedding row of each token";
  let description = [{
    `result[s, :] = table[tokens[s], :]`; table `[V, D]`, tokens `[S]`,
    result `[S, D]`. Token ids outside `[0, V)` are undefined behaviour at
    this level; the runtime checks prompts before they get here.

    ```mlir
    %h = kiln.embedding %table[%tokens] : tensor<32000x4096xf16>, tensor<?xi32> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Matrix:$table, Kiln_Positions:$tokens);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $table `[` $tokens `]` attr-dict `:` type($table) `,` type($tokens) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Norm and matmuls
//===----------------------------------------------------------------------===//

def Kiln_RMSNormOp : Kiln_KernelOp<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMSNorm over the feature dimension";
  let description = [{
    `result[s, :] = input[s, :] / sqrt(mean(input[s, :]^2) + epsilon) * weight`,
    accumulated in float32. input `[S, D]`, weight `[D]`.

    ```mlir
    %x = kiln.rms_norm %h, %w eps = 1.000000e-05 : tensor<?x4096xf16>, tensor<4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Vector:$weight, F64Attr:$epsilon);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` `=` $epsilon attr-dict `:` type($input) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Kiln_LinearOp : Kiln_KernelOp<"linear", [Pure],
    "linear_epilogue", "gemv", "linear_epilogue", 0,
    ["getKernelCost", "getKernelName"]> {
  let summary = "x·Wᵀ against a named weight";
  let description = [{
    `result = input · weightᵀ` with float32 accumulation; input `[S, K]`,
    weight `[N, K]` (the Hugging Face `nn.Linear` layout), result `[S, N]`.

    ```mlir
    %q = kiln.linear %x, %wq : tensor<?x4096xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Matrix:$weight);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_LogitsOp : Kiln_KernelOp<"logits", [Pure],
    "linear_epilogue", "gemv", "linear_epilogue", 0, ["getKernelCost"]> {
  let summary = "the LM head: float32 logits over the vocabulary";
  let description = [{
    `result = input · weightᵀ` in float32; input `[S, D]`, weight `[V, D]`,
    result `[S, V]` f32.

    ```mlir
    %l = kiln.logits %x, %w : tensor<?x4096xf16>, tensor<32000x4096xf16> -> tensor<?x32000xf32>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Matrix:$weight);
  let results = (outs 2DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Kiln_RopeOp : Kiln_KernelOp<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding, per head";
  let description = [{
    Rotates each pair of dimensions of each of the `heads` heads of
    `input [S, heads*Dh]` by `positions[s] * theta^(-2i/Dh)`. `layout` says
    which dimensions pair: `rotate_half` pairs `(i, i + Dh/2)` as in Hugging
    Face checkpoints, `interleaved` pairs `(2i, 2i + 1)` as in Meta's. With
    `linear` (Hugging Face's linear RoPE scaling, at least 1) the positions
    are divided by it: `positions[s] / linear * theta^(-2i/Dh)`. With
    `dynamic` (Hugging Face's dynamic NTK scaling) theta grows with the
    sequence's length past its original context (#kiln.rope_dynamic).

    ```mlir
    %qr = kiln.rope %q at %pos heads = 32, theta = 1.000000e+04, layout = rotate_half : tensor<?x4096xf16>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Positions:$positions,
                       I64Attr:$heads, F64Attr:$theta, Kiln_RopeLayoutAttr:$layout,
                       OptionalAttr<F64Attr>:$linear,
                       OptionalAttr<Kiln_RopeDynamicAttr>:$dynamic);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $input `at` $positions `heads` `=` $heads `,` `theta` `=` $theta `,` `layout` `=` `` $layout
    attr-dict `:` type($input) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def Kiln_QKOp : Kiln_KernelOp<"qk", [Pure], "none", "none", "none", 1,
    ["getKernelCost"]> {
  let summary = "attention scores Q·Kᵀ times a scale, per head";
  let description = [{
    `result[h, s, t] = scale * dot(query[s, head h], keys[t, kv head h / (heads / kv_heads)])`
    in float32. query `[S, heads*Dh]`, keys `[T, kv_heads*Dh]`, result
    `[heads, S, T]` f32. Grouped-query attention reads each kv head for
    `heads / kv_heads` query heads without copying it.

    ```mlir
    %s = kiln.qk %q, %k heads = 32, kv_heads = 8, scale = 0.088388 : tensor<?x4096xf16>, tensor<?x1024xf16> -> tensor<32x?x?xf32>
    ```
  }];
  let arguments = (ins Kiln_Activation:$query, Kiln_Activation:$keys,
                       I64Attr:$heads, I64Attr:$kv_heads, F64Attr:$scale);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = [{
    $query `,` $keys `heads` `=` $heads `,` `kv_heads` `=` $kv_heads `,` `scale` `=` $scale
    attr-dict `:` type($query) `,` type($keys) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_CausalMaskOp : Kiln_KernelOp<"causal_mask", [Pure, AllTypesMatch<["scores", "result"]>],
    "none", "none", "none", 1> {
  let summary = "hides the keys after each query's position";
  let description = [{
    `result[h, s, t] = t <= positions[s] ? scores[h, s, t] : -inf`: key `t`
    sits at position `t` of the sequence, query `s` at `positions[s]`.

    ```mlir
    %m = kiln.causal_mask %s at %pos : tensor<32x?x?xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Kiln_Scores:$scores, Kiln_Positions:$positions);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = [{
    $scores `at` $positions attr-dict `:` type($scores) `,` type($positions)
  }];
  let hasVerifier = 1;
}

def Kiln_SoftmaxOp : Kiln_KernelOp<"softmax", [Pure, SameOperandsAndResultType],
    "none", "none", "none", 1> {
  let summary = "softmax over the last dimension, in float32";
  let description = [{
    `result[h, s, :] = exp(x - max(x)) / sum(exp(x - max(x)))` with
    `x = scores[h, s, :]`. The numerics are part of the op: `subtract_max`
    (the row maximum is subtracted, so the exponentials never overflow) and
    `accumulator` (the type sums are kept in) are stated only when they
    are not the defaults (true, and f32 when absent), and the verifier
    refuses any other value. Rows that are entirely -inf are undefined.

    ```mlir
    %p = kiln.softmax %m : tensor<32x?x?xf32>
    ```
  }];
  let arguments = (ins Kiln_Scores:$scores,
                       DefaultValuedAttr<BoolAttr, "true">:$subtract_max,
                       OptionalAttr<TypeAttr>:$accumulator);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = "$scores attr-dict `:` type($scores)";
  let hasVerifier = 1;
}

def Kiln_PVOp : Kiln_KernelOp<"pv", [Pure], "none", "none", "none", 1,
    ["getKernelCost"]> {
  let summary = "attention output: probabilities times values, heads merged";
  let description = [{
    `result[s, head h] = sum_t probs[h, s, t] * values[t, kv head h / (H / kv_heads)]`
    in float32. probs `[H, S, T]`, values `[T, kv_heads*Dh]`, result
    `[S, H*Dh]` with the heads side by side (ready for o_proj).

    ```mlir
    %a = kiln.pv %p, %v kv_heads = 8 : tensor<32x?x?xf32>, tensor<?x1024xf16> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Scores:$probs, Kiln_Activation:$values, I64Attr:$kv_heads);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $probs `,` $values `kv_heads` `=` $kv_heads attr-dict `:` type($probs) `,` type($values) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// KV cache
//===----------------------------------------------------------------------===//

def Kiln_KVWriteOp : Kiln_KernelOp<"kv_write", [Pure, AllTypesMatch<["cache", "result"]>],
    "none", "none", "none", 1, ["getKernelCost"]> {
  let summary = "writes the new tokens' keys and values into one layer's cache";
  let description = [{
    Returns `cache` with `keys[s]` and `values[s]` (each `[S, kv_heads*Dh]`)
    stored in slot `positions[s]` of layer `layer`. With `rope(...)` the keys
    are rotated (kv_heads heads, the cache's head_dim) as they are written,
    so each key is rotated once, when it enters the cache
    (`kiln-fuse-rope-qk` moves a kiln.rope here); `rope_linear` and
    `rope_dynamic` are the rope's `linear` and `dynamic`.

    ```mlir
    %c1 = kiln.kv_write %k, %v into %c0[0] at %pos rope(theta = 1.000000e+04, layout = rotate_half) : tensor<?x1024xf16>, tensor<?x1024xf16>, tensor<?xi32>, !kiln.kv_cache<layers = 32, capacity = 4096, kv_heads = 8, head_dim = 128, element_type = f16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$keys, Kiln_Activation:$values,
                       Kiln_KVCacheType:$cache, I64Attr:$layer, Kiln_Positions:$positions,
                       OptionalAttr<F64Attr>:$rope_theta,
                       OptionalAttr<Kiln_RopeLayoutAttr>:$rope_layout,
                       OptionalAttr<F64Attr>:$rope_linear,
                       OptionalAttr<Kiln_RopeDynamicAttr>:$rope_dynamic);
  let results = (outs Kiln_KVCacheType:$result);
  let assemblyFormat = [{
    $keys `,` $values `into` $cache `[` $layer `]` `at` $positions
    (`rope` `(` `theta` `=` $rope_theta^ `,` `layout` `=` `` $rope_layout `)`)?
    attr-dict `:` type($keys) `,` type($values) `,` type($positions) `,` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def Kiln_KVReadOp : Kiln_Op<"kv_read", [Pure]> {
  let summary = "reads one layer's keys and values up to the newest position";
  let description = [{
    Returns slots `0 .. max(positions)` of layer `layer`: keys and values
    `[T, kv_heads*Dh]` with `T = max(positions) + 1`.

    ```mlir
    %k, %v = kiln.kv_read %c1[0] upto %pos : !kiln.kv_cache<layers = 32, capacity = 4096, kv_heads = 8, head_dim = 128, element_type = f16>, tensor<?xi32> -> tensor<?x1024xf16>, tensor<?x1024xf16>
    ```
  }];
  let arguments = (ins Kiln_KVCacheType:$cache, I64Attr:$layer, Kiln_Positions:$positions);
  let results = (outs Kiln_Activation:$keys, Kiln_Activation:$values);
  let assemblyFormat = [{
    $cache `[` $layer `]` `upto` $positions attr-dict `:` qualified(type($cache)) `,` type($positions)
    `->` type($keys) `,` type($values)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Kiln_SiLUOp : Kiln_KernelOp<"silu", [Pure, SameOperandsAndResultType]> {
  let summary = "x·sigmoid(x), elementwise";
  let description = [{
    ```mlir
    %a = kiln.silu %g : tensor<?x11008xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Kiln_BinaryOp<string mnemonic, string what>
    : Kiln_KernelOp<mnemonic, [Pure, SameOperandsAndResultType], "none", "none", "none", 1> {
  let summary = what # ", elementwise";
  let arguments = (ins Kiln_Activation:$lhs, Kiln_Activation:$rhs);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Softmax in pieces (what a frontend may write instead of kiln.softmax)
//===----------------------------------------------------------------------===//

def Kiln_ExpOp : Kiln_KernelOp<"exp", [Pure, SameOperandsAndResultType]> {
  let summary = "e^x, elementwise";
  let description = [{
    ```mlir
    %e = kiln.exp %s : tensor<32x?x?xf32>
    ```
  }];
  let arguments = (ins Kiln_Scores:$input);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Kiln_RowReduceOp<string mnemonic, string what> : Kiln_KernelOp<mnemonic, [Pure]> {
  let summary = what # " of each row (the last dimension), kept as size 1";
  let arguments = (ins Kiln_Scores:$input);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_ReduceMaxOp : Kiln_RowReduceOp<"reduce_max", "the maximum"> {
  let description = [{
    ```mlir
    %m = kiln.reduce_max %s : tensor<32x?x?xf32> -> tensor<32x?x1xf32>
    ```
  }];
}

def Kiln_ReduceSumOp : Kiln_RowReduceOp<"reduce_sum", "the sum, in f32,"> {
  let description = [{
    ```mlir
    %z = kiln.reduce_sum %e : tensor<32x?x?xf32> -> tensor<32x?x1xf32>
    ```
  }];
}

class Kiln_RowBinaryOp<string mnemonic, string what>
    : Kiln_KernelOp<mnemonic, [Pure, AllTypesMatch<["lhs", "result"]>]> {
  let summary = what # ", the right operand broadcast along the last dimension";
  let arguments = (ins Kiln_Scores:$lhs, Kiln_Scores:$rhs);
  let results = (outs Kiln_Scores:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)";
  let hasVerifier = 1;
}

def Kiln_SubOp : Kiln_RowBinaryOp<"sub", "lhs - rhs"> {
  let description = [{
    `rhs` has the shape of `lhs`, or 1 in the last dimension (a row value).

    ```mlir
    %y = kiln.sub %s, %m : tensor<32x?x?xf32>, tensor<32x?x1xf32>
    ```
  }];
}

def Kiln_DivOp : Kiln_RowBinaryOp<"div", "lhs / rhs"> {
  let description = [{
    `rhs` has the shape of `lhs`, or 1 in the last dimension (a row value).

    ```mlir
    %p = kiln.div %e, %z : tensor<32x?x?xf32>, tensor<32x?x1xf32>
    ```
  }];
}

def Kiln_MulOp : Kiln_BinaryOp<"mul", "product"> {
  let description = [{
    The SwiGLU product `silu(gate) * up`.

    ```mlir
    %m = kiln.mul %a, %u : tensor<?x11008xf16>
    ```
  }];
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "sum"> {
  let description = [{
    The residual connections.

    ```mlir
    %h1 = kiln.add %h, %o : tensor<?x4096xf16>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Collectives (tensor parallelism: docs/tensor-parallel.md)
//===----------------------------------------------------------------------===//

def Kiln_AllReduceOp : Kiln_Op<"all_reduce", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "the sum over the ranks, plus the residual";
  let description = [{
    `result = residual + Σ_ranks input`: the row-parallel O and down
    projections leave each rank a partial `[S, D]` product; their sum, in
    f32 and rounded once to the element type, is the layer's output, and
    the residual connection is added to it once (not on every rank).
    `ranks` is the module's `kiln.tensor_parallel`, at least 2.

    ```mlir
    %h1 = kiln.all_reduce %o residual(%h) ranks = 4 : tensor<?x8192xf16>, tensor<?x8192xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input,
                       Optional<Kiln_Activation>:$residual,
                       I64Attr:$ranks);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $input (`residual` `(` $residual^ `)`)? `ranks` `=` $ranks attr-dict `:`
    type($result) (`,` type($residual)^)?
  }];
  let hasVerifier = 1;
}

def Kiln_AllGatherOp : Kiln_Op<"all_gather", [Pure]> {
  let summary = "every rank's columns, in rank order";
  let description = [{
    The LM head split over the vocabulary leaves each rank the logits of
    its `V / ranks` tokens; `result[s, r * n + j] = input_r[s, j]` puts them
    side by side, `[S, V]`, for sampling.

    ```mlir
    %logits = kiln.all_gather %part ranks = 4 : tensor<?x8000xf32> -> tensor<?x32000xf32>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, I64Attr:$ranks);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $input `ranks` `=` $ranks attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

include "ir/KilnFusedOps.td"

#endif // KILN_OPS_TD
