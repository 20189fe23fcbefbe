// RUN: kiln-opt %s -split-input-file --kiln-fuse-swiglu | FileCheck %s

// gate and up from one fused matmul (after the norm fusion): the SwiGLU
// moves into its epilogue, the packed weight stays.
// CHECK-LABEL: func.func @after_norm_fusion
// CHECK: %[[W:.*]] = kiln.packed_weight
// CHECK: %[[M:.*]] = kiln.fused_linear %{{.*}}, %[[W]] norm(eps = 1.000000e-05) swiglu : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>
// CHECK-NOT: kiln.silu
// CHECK-NOT: kiln.mul
// CHECK: return %[[M]]
func.func @after_norm_fusion(%h: tensor<?x64xf16>) -> tensor<?x192xf16> {
  %w = kiln.packed_weight "mlp.gate_proj+up_proj" = ["mlp.gate_proj.weight", "mlp.up_proj.weight"] rows [192, 192] scaled_by "n.weight" : tensor<384x64xf16>
  %gu:2 = kiln.fused_linear %h, %w norm(eps = 1.0e-05) : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>, tensor<?x192xf16>
  %a = kiln.silu %gu#0 : tensor<?x192xf16>
  %m = kiln.mul %a, %gu#1 : tensor<?x192xf16>
  return %m : tensor<?x192xf16>
}

// -----

// Two plain linears on one input: their weights are packed [gate | up].
// CHECK-LABEL: func.func @two_linears
// CHECK: %[[W:.*]] = kiln.packed_weight "mlp.gate_proj+up_proj" = ["mlp.gate_proj.weight", "mlp.up_proj.weight"] rows [192, 192] : tensor<384x64xf16>
// CHECK: kiln.fused_linear %{{.*}}, %[[W]] swiglu : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>
func.func @two_linears(%x: tensor<?x64xf16>) -> tensor<?x192xf16> {
  %wg = kiln.weight "mlp.gate_proj.weight" : tensor<192x64xf16>
  %g = kiln.linear %x, %wg : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
  %wu = kiln.weight "mlp.up_proj.weight" : tensor<192x64xf16>
  %u = kiln.linear %x, %wu : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
  %a = kiln.silu %g : tensor<?x192xf16>
  %m = kiln.mul %a, %u : tensor<?x192xf16>
  return %m : tensor<?x192xf16>
}

// -----

// Not fused: silu of the second result would need [up | gate] reordered.
// CHECK-LABEL: func.func @swapped
// CHECK: kiln.silu
// CHECK: kiln.mul
func.func @swapped(%h: tensor<?x64xf16>, %w: tensor<384x64xf16>) -> tensor<?x192xf16> {
  %gu:2 = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>, tensor<?x192xf16>
  %a = kiln.silu %gu#1 : tensor<?x192xf16>
  %m = kiln.mul %a, %gu#0 : tensor<?x192xf16>
  return %m : tensor<?x192xf16>
}

// -----

// Not fused: the gate is needed in memory too.
// CHECK-LABEL: func.func @gate_used_twice
// CHECK: kiln.silu
// CHECK: kiln.mul
func.func @gate_used_twice(%h: tensor<?x64xf16>, %w: tensor<384x64xf16>) -> (tensor<?x192xf16>, tensor<?x192xf16>) {
  %gu:2 = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>, tensor<?x192xf16>
  %a = kiln.silu %gu#0 : tensor<?x192xf16>
  %m = kiln.mul %a, %gu#1 : tensor<?x192xf16>
  return %m, %gu#0 : tensor<?x192xf16>, tensor<?x192xf16>
}

// -----

// Not fused: gate and up read different inputs.
// CHECK-LABEL: func.func @different_inputs
// CHECK: kiln.mul
func.func @different_inputs(%x: tensor<?x64xf16>, %y: tensor<?x64xf16>) -> tensor<?x192xf16> {
  %wg = kiln.weight "g.weight" : tensor<192x64xf16>
  %g = kiln.linear %x, %wg : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
  %wu = kiln.weight "u.weight" : tensor<192x64xf16>
  %u = kiln.linear %y, %wu : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
  %a = kiln.silu %g : tensor<?x192xf16>
  %m = kiln.mul %a, %u : tensor<?x192xf16>
  return %m : tensor<?x192xf16>
}
