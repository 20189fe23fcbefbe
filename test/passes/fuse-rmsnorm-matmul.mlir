// RUN: kiln-opt %s -split-input-file --kiln-fuse-rmsnorm-matmul | FileCheck %s

// Q, K and V read one norm: one fused matmul, three results, the weights
// stacked in the order of the linears, the norm weight folded in.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[H:[a-z0-9]+]]: tensor<?x64xf16>
// CHECK-NOT: kiln.rms_norm
// CHECK: %[[W:.*]] = kiln.packed_weight "l.attn.q_proj+k_proj+v_proj" = ["l.attn.q_proj.weight", "l.attn.k_proj.weight", "l.attn.v_proj.weight"] rows [64, 32, 32] scaled_by "l.norm.weight" : tensor<128x64xf16>
// CHECK: %[[F:.*]]:3 = kiln.fused_linear %[[H]], %[[W]] norm(eps = 1.000000e-05) : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
// CHECK-NOT: kiln.linear
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @qkv(%h: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>) {
  %g = kiln.weight "l.norm.weight" : tensor<64xf16>
  %x = kiln.rms_norm %h, %g eps = 1.0e-05 : tensor<?x64xf16>, tensor<64xf16>
  %wq = kiln.weight "l.attn.q_proj.weight" : tensor<64x64xf16>
  %q = kiln.linear %x, %wq : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %wk = kiln.weight "l.attn.k_proj.weight" : tensor<32x64xf16>
  %k = kiln.linear %x, %wk : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  %wv = kiln.weight "l.attn.v_proj.weight" : tensor<32x64xf16>
  %v = kiln.linear %x, %wv : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  return %q, %k, %v : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
}

// -----

// The final norm into the LM head: an f32 result.
// CHECK-LABEL: func.func @lm_head
// CHECK: %[[W:.*]] = kiln.packed_weight "lm_head" = ["lm_head.weight"] rows [320] scaled_by "model.norm.weight"
// CHECK: kiln.fused_linear %{{.*}}, %[[W]] norm(eps = 1.000000e-05) : tensor<1x64xf16>, tensor<320x64xf16> -> tensor<1x320xf32>
func.func @lm_head(%h: tensor<1x64xf16>) -> tensor<1x320xf32> {
  %g = kiln.weight "model.norm.weight" : tensor<64xf16>
  %x = kiln.rms_norm %h, %g eps = 1.0e-05 : tensor<1x64xf16>, tensor<64xf16>
  %w = kiln.weight "lm_head.weight" : tensor<320x64xf16>
  %l = kiln.logits %x, %w : tensor<1x64xf16>, tensor<320x64xf16> -> tensor<1x320xf32>
  return %l : tensor<1x320xf32>
}

// -----

// Not fused: the normalized value is also needed in memory (by the add).
// CHECK-LABEL: func.func @other_user
// CHECK: kiln.rms_norm
// CHECK: kiln.linear
// CHECK-NOT: kiln.fused_linear
func.func @other_user(%h: tensor<?x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %g = kiln.weight "n.weight" : tensor<64xf16>
  %x = kiln.rms_norm %h, %g eps = 1.0e-05 : tensor<?x64xf16>, tensor<64xf16>
  %w = kiln.weight "q.weight" : tensor<64x64xf16>
  %q = kiln.linear %x, %w : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %s = kiln.add %x, %h : tensor<?x64xf16>
  return %q, %s : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Not fused: a weight that is not a named checkpoint tensor cannot be packed.
// CHECK-LABEL: func.func @unnamed_weight
// CHECK: kiln.rms_norm
// CHECK-NOT: kiln.fused_linear
func.func @unnamed_weight(%h: tensor<?x64xf16>, %w: tensor<64x64xf16>) -> tensor<?x64xf16> {
  %g = kiln.weight "n.weight" : tensor<64xf16>
  %x = kiln.rms_norm %h, %g eps = 1.0e-05 : tensor<?x64xf16>, tensor<64xf16>
  %q = kiln.linear %x, %w : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  return %q : tensor<?x64xf16>
}

// -----

// Not fused: a linear and the LM head on one norm would need two kernels.
// CHECK-LABEL: func.func @mixed_users
// CHECK: kiln.rms_norm
// CHECK-NOT: kiln.fused_linear
func.func @mixed_users(%h: tensor<1x64xf16>) -> (tensor<1x64xf16>, tensor<1x320xf32>) {
  %g = kiln.weight "n.weight" : tensor<64xf16>
  %x = kiln.rms_norm %h, %g eps = 1.0e-05 : tensor<1x64xf16>, tensor<64xf16>
  %w = kiln.weight "q.weight" : tensor<64x64xf16>
  %q = kiln.linear %x, %w : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
  %wl = kiln.weight "lm_head.weight" : tensor<320x64xf16>
  %l = kiln.logits %x, %wl : tensor<1x64xf16>, tensor<320x64xf16> -> tensor<1x320xf32>
  return %q, %l : tensor<1x64xf16>, tensor<1x320xf32>
}
