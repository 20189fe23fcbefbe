// RUN: kiln-opt %s -split-input-file --kiln-fuse-softmax | FileCheck %s

// qk -> causal mask -> softmax -> pv: one attention op (GQA: 4 heads on 2).
// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x64xf16>, %[[K:[a-z0-9]+]]: tensor<?x32xf16>, %[[V:[a-z0-9]+]]: tensor<?x32xf16>, %[[P:[a-z0-9]+]]: tensor<?xi32>)
// CHECK: %[[A:.*]] = kiln.attention %[[Q]], %[[K]], %[[V]] at %[[P]] heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
// CHECK-NOT: kiln.qk
// CHECK-NOT: kiln.softmax
// CHECK: return %[[A]]
func.func @attention(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>) -> tensor<?x64xf16> {
  %s = kiln.qk %q, %k heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf32>
  %m = kiln.causal_mask %s at %pos : tensor<4x?x?xf32>, tensor<?xi32>
  %p = kiln.softmax %m : tensor<4x?x?xf32>
  %a = kiln.pv %p, %v kv_heads = 2 : tensor<4x?x?xf32>, tensor<?x32xf16> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

// Not fused: the probabilities are needed in memory (returned).
// CHECK-LABEL: func.func @probs_used_twice
// CHECK: kiln.softmax
// CHECK: kiln.pv
// CHECK-NOT: kiln.attention
func.func @probs_used_twice(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %v: tensor<?x64xf16>, %pos: tensor<?xi32>) -> (tensor<?x64xf16>, tensor<4x?x?xf32>) {
  %s = kiln.qk %q, %k heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<4x?x?xf32>
  %m = kiln.causal_mask %s at %pos : tensor<4x?x?xf32>, tensor<?xi32>
  %p = kiln.softmax %m : tensor<4x?x?xf32>
  %a = kiln.pv %p, %v kv_heads = 4 : tensor<4x?x?xf32>, tensor<?x64xf16> -> tensor<?x64xf16>
  return %a, %p : tensor<?x64xf16>, tensor<4x?x?xf32>
}

// -----

// Not fused: without the causal mask this is not the attention op's meaning.
// CHECK-LABEL: func.func @no_mask
// CHECK: kiln.softmax
// CHECK-NOT: kiln.attention
func.func @no_mask(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %v: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %s = kiln.qk %q, %k heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<4x?x?xf32>
  %p = kiln.softmax %s : tensor<4x?x?xf32>
  %a = kiln.pv %p, %v kv_heads = 4 : tensor<4x?x?xf32>, tensor<?x64xf16> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

// Softmax in pieces, with the max subtracted: one safe kiln.softmax, and
// then the attention op.
// CHECK-LABEL: func.func @safe_pieces
// CHECK-NOT: kiln.exp
// CHECK-NOT: kiln.reduce_sum
// CHECK: kiln.attention
func.func @safe_pieces(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) -> tensor<?x64xf16> {
  %s = kiln.qk %q, %k heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<4x?x?xf32>
  %x = kiln.causal_mask %s at %pos : tensor<4x?x?xf32>, tensor<?xi32>
  %m = kiln.reduce_max %x : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %y = kiln.sub %x, %m : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  %e = kiln.exp %y : tensor<4x?x?xf32>
  %z = kiln.reduce_sum %e : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %p = kiln.div %e, %z : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  %a = kiln.pv %p, %k kv_heads = 4 : tensor<4x?x?xf32>, tensor<?x64xf16> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

// The unsafe form (no max) becomes the safe op: the same value, no overflow.
// CHECK-LABEL: func.func @unsafe_pieces
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x?x?xf32>)
// CHECK: %[[P:.*]] = kiln.softmax %[[X]] : tensor<4x?x?xf32>
// CHECK-NOT: kiln.exp
// CHECK: return %[[P]]
func.func @unsafe_pieces(%x: tensor<4x?x?xf32>) -> tensor<4x?x?xf32> {
  %e = kiln.exp %x : tensor<4x?x?xf32>
  %z = kiln.reduce_sum %e : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %p = kiln.div %e, %z : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  return %p : tensor<4x?x?xf32>
}

// -----

// Not fused: the exponentials are needed in memory too.
// CHECK-LABEL: func.func @exp_used_elsewhere
// CHECK: kiln.exp
// CHECK: kiln.div
// CHECK-NOT: kiln.softmax
func.func @exp_used_elsewhere(%x: tensor<4x?x?xf32>) -> (tensor<4x?x?xf32>, tensor<4x?x?xf32>) {
  %e = kiln.exp %x : tensor<4x?x?xf32>
  %z = kiln.reduce_sum %e : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %p = kiln.div %e, %z : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  return %p, %e : tensor<4x?x?xf32>, tensor<4x?x?xf32>
}

// -----

// Not fused: divided by the sum of something else.
// CHECK-LABEL: func.func @other_sum
// CHECK: kiln.div
// CHECK-NOT: kiln.softmax
func.func @other_sum(%x: tensor<4x?x?xf32>, %w: tensor<4x?x?xf32>) -> tensor<4x?x?xf32> {
  %e = kiln.exp %x : tensor<4x?x?xf32>
  %z = kiln.reduce_sum %w : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %p = kiln.div %e, %z : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  return %p : tensor<4x?x?xf32>
}
