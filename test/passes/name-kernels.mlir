// RUN: kiln-opt %s -split-input-file --kiln-name-kernels | FileCheck %s

// Names come from the Hugging Face module names in the locations and from
// what was fused; the same code in two layers is one kernel.
// CHECK-LABEL: func.func @decode
// CHECK: kiln.fused_linear {{.*}} {kiln.kernel = "decode.mlp.norm_gate_up_swiglu", kiln.name = "layers.0.mlp.norm_gate_up_swiglu"}
// CHECK: kiln.fused_linear {{.*}} {kiln.kernel = "decode.mlp.norm_gate_up_swiglu", kiln.name = "layers.1.mlp.norm_gate_up_swiglu"}
// CHECK: kiln.silu {{.*}} {kiln.kernel = "decode.mlp.act_fn", kiln.name = "layers.1.mlp.act_fn"}
// CHECK: kiln.add {{.*}} {kiln.kernel = "decode.residual.add", kiln.name = "layers.1.residual.add"}
// Weights are not kernels.
// CHECK-NOT: kiln.weight {{.*}}kiln.kernel
func.func @decode(%h: tensor<1x64xf16>) -> tensor<1x64xf16> {
  %w0 = kiln.packed_weight "model.layers.0.mlp.gate_proj+up_proj" = ["model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"] rows [32, 32] : tensor<64x64xf16>
  %m0 = kiln.fused_linear %h, %w0 norm(eps = 1.0e-05) swiglu : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x32xf16>
  %w1 = kiln.packed_weight "model.layers.1.mlp.gate_proj+up_proj" = ["model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight"] rows [32, 32] : tensor<64x64xf16>
  %m1 = kiln.fused_linear %h, %w1 norm(eps = 1.0e-05) swiglu : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x32xf16>
  %s = kiln.silu %h : tensor<1x64xf16> loc("model.layers.1.mlp.act_fn")
  %r = kiln.add %h, %s : tensor<1x64xf16> loc("model.layers.1.residual")
  return %r : tensor<1x64xf16>
}

// -----

// Same name, other code (another epsilon): a second kernel, marked #2.
// CHECK-LABEL: func.func @prefill
// CHECK: kiln.kernel = "prefill.mlp.norm_gate_up_swiglu", kiln.name = "layers.0.mlp.norm_gate_up_swiglu"
// CHECK: kiln.kernel = "prefill.mlp.norm_gate_up_swiglu#2", kiln.name = "layers.1.mlp.norm_gate_up_swiglu"
func.func @prefill(%h: tensor<?x64xf16>) -> (tensor<?x32xf16>, tensor<?x32xf16>) {
  %w0 = kiln.packed_weight "model.layers.0.mlp.gate_proj+up_proj" = ["model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"] rows [32, 32] : tensor<64x64xf16>
  %m0 = kiln.fused_linear %h, %w0 norm(eps = 1.0e-05) swiglu : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x32xf16>
  %w1 = kiln.packed_weight "model.layers.1.mlp.gate_proj+up_proj" = ["model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight"] rows [32, 32] : tensor<64x64xf16>
  %m1 = kiln.fused_linear %h, %w1 norm(eps = 1.0e-06) swiglu : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x32xf16>
  return %m0, %m1 : tensor<?x32xf16>, tensor<?x32xf16>
}
