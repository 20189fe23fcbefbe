//===- KilnDialect.td - the kiln dialect -------------------*- tablegen -*-===//
//
// The kiln dialect describes a Llama 2 decoder at tensor level. Weights are
// referenced by name (kiln.weight) and never embedded, so a 70B model's IR is
// as small as a tiny one's.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let summary = "Tensor-level operations of a Llama 2 decoder";
  let description = [{
    Operations on ranked tensors that spell out one Llama 2 forward pass:
    embedding lookup, RMSNorm, linear layers against named weights, RoPE,
    attention in its parts (Q·Kᵀ, causal mask, softmax, ·V), SwiGLU pieces,
    residual adds, a KV cache carried through the function as a value, and
    the final logits. Activations are two-dimensional `[tokens, features]`;
    attention scores are `[heads, queries, keys]` in float32.
  }];
  let cppNamespace = "::kiln";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // The discardable kiln.* attributes the frontend and the passes put on
  // modules, functions and ops: each checked for its kind and place
  // (KilnDialect::verifyOperationAttribute).
  let hasOperationAttrVerify = 1;
}

#endif // KILN_DIALECT_TD
