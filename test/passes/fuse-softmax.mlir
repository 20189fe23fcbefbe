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
