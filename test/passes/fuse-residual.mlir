// RUN: kiln-opt %s -split-input-file --kiln-fuse-residual | FileCheck %s

// o_proj: h + a·Woᵀ, with the matmul on either side of the add.
// CHECK-LABEL: func.func @o_proj
// CHECK-SAME: (%[[H:[a-z0-9]+]]: tensor<?x64xf16>, %[[A:[a-z0-9]+]]: tensor<?x64xf16>)
// CHECK: %[[W:.*]] = kiln.weight "o_proj.weight"
// CHECK: %[[R1:.*]] = kiln.fused_linear %[[A]], %[[W]] residual(%[[H]]) : tensor<?x64xf16>, tensor<64x64xf16>, tensor<?x64xf16> -> tensor<?x64xf16>
// CHECK: %[[R2:.*]] = kiln.fused_linear %[[A]], %[[W]] residual(%[[R1]])
// CHECK-NOT: kiln.add
// CHECK: return %[[R2]]
func.func @o_proj(%h: tensor<?x64xf16>, %a: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %w = kiln.weight "o_proj.weight" : tensor<64x64xf16>
  %o = kiln.linear %a, %w : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %r = kiln.add %h, %o : tensor<?x64xf16>
  %o2 = kiln.linear %a, %w : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %r2 = kiln.add %o2, %r : tensor<?x64xf16>
  return %r2 : tensor<?x64xf16>
}

// -----

// A fused matmul with a norm prologue keeps it and gains the epilogue.
// CHECK-LABEL: func.func @keeps_prologue
// CHECK: kiln.fused_linear %{{.*}}, %{{.*}} norm(eps = 1.000000e-05) residual(%{{.*}})
func.func @keeps_prologue(%h: tensor<?x64xf16>, %w: tensor<64x64xf16>) -> tensor<?x64xf16> {
  %o = kiln.fused_linear %h, %w norm(eps = 1.0e-05) : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %r = kiln.add %h, %o : tensor<?x64xf16>
  return %r : tensor<?x64xf16>
}

// -----

// Not fused: the matmul's own output is needed too.
// CHECK-LABEL: func.func @used_twice
// CHECK: kiln.linear
// CHECK: kiln.add
func.func @used_twice(%h: tensor<?x64xf16>, %w: tensor<64x64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %o = kiln.linear %h, %w : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %r = kiln.add %h, %o : tensor<?x64xf16>
  return %r, %o : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Not fused: a SwiGLU epilogue takes no residual on top.
// CHECK-LABEL: func.func @after_swiglu
// CHECK: kiln.fused_linear {{.*}} swiglu
// CHECK: kiln.add
func.func @after_swiglu(%h: tensor<?x64xf16>, %w: tensor<128x64xf16>) -> tensor<?x64xf16> {
  %m = kiln.fused_linear %h, %w swiglu : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>
  %r = kiln.add %h, %m : tensor<?x64xf16>
  return %r : tensor<?x64xf16>
}

// -----

// Not fused: an add of two non-matmul values.
// CHECK-LABEL: func.func @plain_add
// CHECK: kiln.add
func.func @plain_add(%a: tensor<?x64xf16>, %b: tensor<?x64xf16>) -> tensor<?x64xf16> {
  %r = kiln.add %a, %b : tensor<?x64xf16>
  return %r : tensor<?x64xf16>
}
