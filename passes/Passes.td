//===- Passes.td - kiln's passes ---------------------------*- tablegen -*-===//
//
// Each pass lives in its own file (named after the pass) with its own lit
// tests in test/passes/. `kiln-opt --kiln-pipeline` runs them in order.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnShardTensorParallel : Pass<"kiln-shard-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Split the model over `ranks` GPUs: Megatron's tensor parallelism";
  let description = [{
    Rewrites the tensor-level module into what each of `ranks` ranks runs
    (docs/tensor-parallel.md), before the fusions:

    - Q, K, V, gate and up are column-parallel: each rank holds a slice of
      their rows (#kiln.shard axis 0) and computes its heads and its part
      of the FFN; RoPE, the KV cache and attention see `H / ranks` heads.
    - O and down are row-parallel: a slice of their columns (axis 1)
      gives each rank a partial product, and `kiln.add(h, o)` becomes
      `kiln.all_reduce %o residual(%h)`: the sum over the ranks, with the
      residual added once.
    - Key and value heads split too (`Hkv / ranks` a rank), or, when
      there are fewer of them than ranks (MQA, 70B's 8 at 16 ranks), each
      rank keeps the one its query heads read, shared by `ranks / Hkv`.
    - The LM head splits over the vocabulary; `kiln.all_gather` puts the
      logits side by side for sampling.
    - Embeddings and norms are replicated.

    The module gets `kiln.tensor_parallel = ranks`. Fails, naming the
    dimension, when the ranks do not divide the heads, the FFN width or the
    vocabulary, or when Hkv and the ranks do not divide one another; also
    on a fused module and on quantized weights (not done yet).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "2", "GPUs the model is split over">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseRMSNormMatmul : Pass<"kiln-fuse-rmsnorm-matmul", "::mlir::func::FuncOp"> {
  let summary = "Fuse an RMSNorm into the matmuls that read it";
  let description = [{
    An RMSNorm whose every user is a linear (Q/K/V after input_layernorm,
    gate/up after post_attention_layernorm) or the LM head (after the final
    norm) becomes one kiln.fused_linear with an RMSNorm prologue: the kernel
    computes each row's 1/rms itself, and the norm weight is folded into a
    kiln.packed_weight that also stacks the linears' weights, one result per
    former linear. The normalized activations never go to memory.

    Does not fire when the normalized value has any other user (it must then
    be materialized), when a weight is not a named kiln.weight, or when
    linears and the LM head share one norm.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseSwiGLU : Pass<"kiln-fuse-swiglu", "::mlir::func::FuncOp"> {
  let summary = "Fuse silu(gate) * up into the gate/up matmul's epilogue";
  let description = [{
    `kiln.mul(kiln.silu(gate), up)` where gate and up are the two results of
    one kiln.fused_linear (in that order), or two kiln.linear ops on the same
    input with named weights, becomes one kiln.fused_linear with the
    `swiglu` epilogue: only the `[S, F]` result is an activation in the
    arena. (Decode's GEMV keeps the `[S, 2F]` product on chip; prefill's
    cuBLAS GEMM writes it, in f32, to a workspace that the epilogue kernel
    reads.) Does not fire when gate, up or the silu has another user, or
    when the operands come in the other order.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseResidual : Pass<"kiln-fuse-residual", "::mlir::func::FuncOp"> {
  let summary = "Fuse residual adds into the matmul that produces the addend";
  let description = [{
    `kiln.add(h, linear(x))` (o_proj and down_proj in Llama) becomes a
    kiln.fused_linear with a `residual(h)` epilogue. Does not fire when the
    matmul's result has another user, or the matmul already has a swiglu or
    residual epilogue or several results.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseSoftmax : Pass<"kiln-fuse-softmax", "::mlir::func::FuncOp"> {
  let summary = "Fuse Q·Kᵀ, the causal mask, softmax and ·V into attention";
  let description = [{
    First, a softmax that a frontend wrote in pieces becomes one kiln.softmax,
    which always subtracts the row maximum: `div(exp(x - reduce_max(x)),
    reduce_sum(...))`, and also the unsafe `div(exp(x), reduce_sum(exp(x)))`
    (same value, no overflow). Then
    kiln.qk → kiln.causal_mask → kiln.softmax → kiln.pv, each value used
    only by the next, becomes one kiln.attention: an online (flash-style)
    softmax that keeps the row maximum subtracted and accumulates in f32.
    Query head h reads kv head h / (heads / kv_heads) in place, with no
    copy per query head, but each query head's blocks load it for
    themselves: a kv head is read once per query head, not once per group.
    The softmax's verifier has refused an unsafe one (subtract_max =
    false, a non-f32 accumulator) before: kiln.attention's numerics are
    fixed and it takes no such attributes. The first does not fire
    when the exponentials or their sum have another user (when the
    subtraction or the maximum has one, the softmax is of the difference,
    which stays); the second does not fire when the scores, masked scores
    or probabilities have another user.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseRopeQK : Pass<"kiln-fuse-rope-qk", "::mlir::func::FuncOp"> {
  let summary = "Rotate Q as attention loads it and K as the cache stores it";
  let description = [{
    A kiln.rope whose only user is a kiln.attention's query becomes that
    attention's `rope(...)`: Q is rotated as it is loaded. A kiln.rope whose
    only user is a kiln.kv_write's keys becomes the write's `rope(...)`: each
    key is rotated once, on its way into the cache. Both pair layouts; theta
    and positions come from the rope. Does not fire when the rotated value
    has another user, when the rope's positions are not the consumer's, or
    when its head count does not match (query heads, or the cache's kv
    heads). Run after kiln-fuse-softmax: a bare kiln.qk keeps its rope.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnFuseKVWrite : Pass<"kiln-fuse-kv-write", "::mlir::func::FuncOp"> {
  let summary = "Write K and V into the cache from the QKV matmul's epilogue";
  let description = [{
    A kiln.kv_write whose keys and values are results 1 and 2 of a
    three-result kiln.fused_linear (Q, K, V), and used nowhere else, becomes
    one kiln.fused_qkv: the matmul rotates K (the write's rope) and stores
    K and V in the cache itself, and only Q is an activation in the arena.
    (Prefill's cuBLAS GEMM still writes the whole `[S, Q|K|V]` product, in
    f32, to a workspace that the epilogue kernel reads.) Run after
    kiln-fuse-rope-qk. Does not fire when K or V has another user, or the
    matmul has an epilogue already.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnNameKernels : Pass<"kiln-name-kernels", "::mlir::func::FuncOp"> {
  let summary = "Name each kernel after its origin; identical layers share one";
  let description = [{
    Every kernel-level op gets `kiln.name`, its provenance in Hugging Face
    terms with what was fused into it (`layers.3.attn.norm_qkv_rope`,
    `layers.3.mlp.norm_gate_up_swiglu`, `norm_lm_head`), and `kiln.kernel`,
    the kernel it runs: the name without the layer, prefixed by the
    function (`decode.attn.norm_qkv_rope`). Ops of different layers that
    would compile to the same code (same op, types and attributes, the layer
    index and weight names aside) share one kernel; when two such ops differ
    after all, the second kind gets its own kernel with a `#2` suffix.
  }];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnPlanKVPool : Pass<"kiln-plan-kv-pool", "::mlir::ModuleOp"> {
  let summary = "Plan the paged KV pool: block size, block count, layout";
  let description = [{
    Sizes one device allocation of fixed-size blocks for the keys and values
    of every layer (kv heads only: GQA models store fewer), from the maximum
    batch and context, or from a memory budget, and records it as the
    module's `kiln.kv_pool` attribute (#kiln.kv_pool). Sequences take whole
    blocks through a block table, so the waste per sequence is under one
    block; the tables of the `max-batch` sequences that run at once are one
    `[sequences][table_blocks]` array. `kiln-opt -kiln-test-print-kv-plan`
    prints the plan.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "16",
           "Tokens per block">,
    Option<"maxBatch", "max-batch", "int64_t", "1",
           "Sequences that must fit at their full context">,
    Option<"maxContext", "max-context", "int64_t", "0",
           "Tokens per sequence (0: the model's context)">,
    Option<"memoryBudget", "memory-budget", "int64_t", "0",
           "Bytes for the pool; when set it decides the block count">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

def KilnPlanBuffers : Pass<"kiln-plan-buffers", "::mlir::ModuleOp"> {
  let summary = "Give every activation an offset in one arena, by liveness";
  let description = [{
    Each function's activations (the results of kiln ops other than weights,
    the cache and the views kv_read makes of it) get a byte offset in one
    arena, such that two values alive at the same time never share bytes:
    first fit, largest first, 256-byte aligned. A value lives from its
    definition to its last use, so memory is reused across layers. Sizes
    take `prefill-tokens` for the dynamic token count and the model's
    context for the dynamic key count. Records `kiln.arena_offsets` on each
    op, `kiln.arena_tokens` (that token count: the most rows one call of
    @prefill may bring) on each function, and `kiln.arena_bytes` and
    `kiln.arena_peak_bytes` (the most bytes alive at once) on each function
    and the largest on the module, since
    @prefill and @decode never run at once. `kiln-opt
    -kiln-test-print-buffer-plan` prints it.
  }];
  let options = [
    Option<"prefillTokens", "prefill-tokens", "int64_t", "2048",
           "Tokens of the largest prefill (capped at the model's context)">
  ];
  let dependentDialects = ["::kiln::KilnDialect"];
}

#endif // KILN_PASSES_TD
