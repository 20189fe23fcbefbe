//===- KilnFusedOps.td - ops that the fusion passes create -*- tablegen -*-===//
//
// What kiln's passes turn the tensor-level ops into: each op here is one
// kernel's worth of work, with the numerics it promises as attributes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUSED_OPS_TD
#define KILN_FUSED_OPS_TD

def Kiln_PackedWeightOp : Kiln_Op<"packed_weight", [Pure]> {
  let summary = "a weight packed from checkpoint tensors at load time";
  let description = [{
    The rows of the `sources` (each `[rows[i], K]`) stacked into one
    `[sum(rows), K]` matrix; with `scaled_by`, every column `k` is multiplied
    by that `[K]` norm weight, which folds an RMSNorm's weight into the
    matmul that follows it: `(x / rms(x) * g)·Wᵀ = (x / rms(x))·(W·diag(g))ᵀ`.
    The packed weights of a module are its weight manifest: the runtime
    builds each one once, as its attributes say. With `shard_parts`
    (tensor parallelism), source `i` is the rank's slice of rows of the
    checkpoint tensor cut into `shard_parts[i]` parts (#kiln.shard with
    axis 0), and `rows[i]` the slice's rows.

    ```mlir
    %w = kiln.packed_weight "model.layers.0.self_attn.q_proj+k_proj+v_proj" = [
        "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
        "model.layers.0.self_attn.v_proj.weight"] rows [4096, 4096, 4096]
        scaled_by "model.layers.0.input_layernorm.weight" : tensor<12288x4096xf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, StrArrayAttr:$sources,
                       DenseI64ArrayAttr:$rows, OptionalAttr<StrAttr>:$scaled_by,
                       OptionalAttr<DenseI64ArrayAttr>:$shard_parts);
  let results = (outs Kiln_Matrix:$result);
  let assemblyFormat = [{
    $name `=` $sources `rows` $rows (`scaled_by` $scaled_by^)?
    (`shard_parts` $shard_parts^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_FusedLinearOp : Kiln_KernelOp<"fused_linear", [Pure],
    "linear_epilogue", "gemv", "linear_epilogue", 0, ["getKernelCost", "getKernelName"]> {
  let summary = "x·Wᵀ with an RMSNorm prologue and a SwiGLU or residual epilogue";
  let description = [{
    One matmul kernel: `y = prologue(input) · weightᵀ`, accumulated in
    float32, then the epilogue, then the columns of `y` split among the
    results in order.

    - `norm(eps = e)`: the prologue computes each row's `1 / rms` inside the
      kernel and scales the row by it; the norm weight is already folded
      into `weight` (see kiln.packed_weight). The normalized row never goes
      to memory.
    - `swiglu`: `y` is `[gate | up]`; the one result is `silu(gate) * up`.
    - `residual(%h)`: the one result is `h + y`.

    Shapes: input `[S, K]`, weight `[N, K]`; without swiglu the result widths
    add up to N, with swiglu the one result is `[S, N/2]`. A result may be
    f32 where the caller needs float32 (the logits).

    ```mlir
    %q, %k, %v = kiln.fused_linear %h, %wqkv norm(eps = 1.000000e-05) : tensor<?x4096xf16>, tensor<12288x4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xf16>, tensor<?x4096xf16>
    %m = kiln.fused_linear %h, %wgu norm(eps = 1.000000e-05) swiglu : tensor<?x4096xf16>, tensor<22016x4096xf16> -> tensor<?x11008xf16>
    %h2 = kiln.fused_linear %m, %wd residual(%h1) : tensor<?x11008xf16>, tensor<4096x11008xf16>, tensor<?x4096xf16> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Matrix:$weight,
                       Optional<Kiln_Activation>:$residual,
                       OptionalAttr<F64Attr>:$norm_epsilon, UnitAttr:$swiglu);
  let results = (outs Variadic<Kiln_Activation>:$results);
  let assemblyFormat = [{
    $input `,` $weight (`norm` `(` `eps` `=` $norm_epsilon^ `)`)? (`swiglu` $swiglu^)?
    (`residual` `(` $residual^ `)`)? attr-dict
    `:` type($input) `,` type($weight) (`,` type($residual)^)? `->` type($results)
  }];
  let hasVerifier = 1;
}

def Kiln_AttentionOp : Kiln_KernelOp<"attention", [Pure],
    "prefill_attention", "decode_attention", "decode_attention", 1,
    ["getKernelCost", "getCacheLayer"]> {
  let summary = "causal attention with a safe online softmax, RoPE on Q at load";
  let description = [{
    `softmax(causal_mask(scale · rope(query) · keysᵀ)) · values` per head,
    the heads side by side in the result, as kiln.qk, kiln.causal_mask,
    kiln.softmax and kiln.pv compute it in four steps. query `[S, H*Dh]`,
    keys and values `[T, kv_heads*Dh]` (key t at position t), result
    `[S, H*Dh]`. With `rope(...)` the query is rotated as it is loaded
    (`rope_linear` and `rope_dynamic` as kiln.rope's `linear` and
    `dynamic`).
    The numerics are the op's meaning, not a choice: each row's maximum is
    subtracted before the exponentials (an online softmax) and sums are
    kept in f32, as both templates do; IR that asks otherwise (the
    `subtract_max` or `accumulator` of kiln.softmax) is refused. Each kv
    head serves `H / kv_heads` query heads without being copied.

    ```mlir
    %a = kiln.attention %q, %k, %v at %pos heads = 32, kv_heads = 8, scale = 0.088388 rope(theta = 1.000000e+04, layout = rotate_half) : tensor<?x4096xf16>, tensor<?x1024xf16>, tensor<?x1024xf16>, tensor<?xi32> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$query, Kiln_Activation:$keys,
                       Kiln_Activation:$values, Kiln_Positions:$positions,
                       I64Attr:$heads, I64Attr:$kv_heads, F64Attr:$scale,
                       OptionalAttr<F64Attr>:$rope_theta,
                       OptionalAttr<Kiln_RopeLayoutAttr>:$rope_layout,
                       OptionalAttr<F64Attr>:$rope_linear,
                       OptionalAttr<Kiln_RopeDynamicAttr>:$rope_dynamic);
  let results = (outs Kiln_Activation:$result);
  let assemblyFormat = [{
    $query `,` $keys `,` $values `at` $positions `heads` `=` $heads `,` `kv_heads` `=` $kv_heads
    `,` `scale` `=` $scale
    (`rope` `(` `theta` `=` $rope_theta^ `,` `layout` `=` `` $rope_layout `)`)?
    attr-dict `:` type($query) `,` type($keys) `,` type($values) `,` type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_FusedQKVOp : Kiln_KernelOp<"fused_qkv", [Pure, AllTypesMatch<["cache", "cache_out"]>],
    "qkv_epilogue", "qkv_gemv", "qkv_epilogue", 0,
    ["getKernelCost", "getKernelName", "getCacheLayer"]> {
  let summary = "the QKV matmul that writes K and V into the cache itself";
  let description = [{
    One kernel for the first half of attention's inputs: `y = prologue(input)
    · weightᵀ` as kiln.fused_linear computes it, with `y = [q | k | v]`
    (k and v each `kv_heads * head_dim` of the cache wide). The epilogue
    rotates k when `rope(...)` is given (`rope_linear` and `rope_dynamic` as kiln.kv_write's),
    writes k and v into slot
    `positions[s]` of layer `layer`, and returns q and the updated cache:
    keys and values never take a round trip through memory before the cache.

    ```mlir
    %q, %c1 = kiln.fused_qkv %h, %wqkv norm(eps = 1.000000e-05) into %c0[0] at %pos rope(theta = 1.000000e+04, layout = rotate_half) : tensor<?x4096xf16>, tensor<12288x4096xf16>, tensor<?xi32>, !kiln.kv_cache<layers = 32, capacity = 4096, kv_heads = 32, head_dim = 128, element_type = f16> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Kiln_Activation:$input, Kiln_Matrix:$weight,
                       Kiln_KVCacheType:$cache, I64Attr:$layer, Kiln_Positions:$positions,
                       OptionalAttr<F64Attr>:$norm_epsilon,
                       OptionalAttr<F64Attr>:$rope_theta,
                       OptionalAttr<Kiln_RopeLayoutAttr>:$rope_layout,
                       OptionalAttr<F64Attr>:$rope_linear,
                       OptionalAttr<Kiln_RopeDynamicAttr>:$rope_dynamic);
  let results = (outs Kiln_Activation:$query, Kiln_KVCacheType:$cache_out);
  let assemblyFormat = [{
    $input `,` $weight (`norm` `(` `eps` `=` $norm_epsilon^ `)`)? `into` $cache `[` $layer `]`
    `at` $positions (`rope` `(` `theta` `=` $rope_theta^ `,` `layout` `=` `` $rope_layout `)`)?
    attr-dict `:` type($input) `,` type($weight) `,` type($positions) `,` qualified(type($cache))
    `->` type($query)
  }];
  let hasVerifier = 1;
}

#endif // KILN_FUSED_OPS_TD
