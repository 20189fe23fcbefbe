// RUN: kiln-opt %s -split-input-file --kiln-fuse-kv-write | FileCheck %s

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// K and V go from the QKV matmul's epilogue straight into the cache, rope
// and norm carried over; Q is the only activation left.
// CHECK-LABEL: func.func @qkv_into_cache
// CHECK-SAME: (%[[H:[a-z0-9]+]]: tensor<?x64xf16>, %[[W:[a-z0-9]+]]: tensor<128x64xf16>, %[[P:[a-z0-9]+]]: tensor<?xi32>, %[[C0:[a-z0-9]+]]: !kiln.kv_cache
// CHECK: %[[Q:.*]], %[[C1:.*]] = kiln.fused_qkv %[[H]], %[[W]] norm(eps = 1.000000e-05) into %[[C0]][1] at %[[P]] rope(theta = 1.000000e+04, layout = rotate_half) : tensor<?x64xf16>, tensor<128x64xf16>, tensor<?xi32>, !kiln.kv_cache<{{.*}}> -> tensor<?x64xf16>
// CHECK-NOT: kiln.kv_write
// CHECK: return %[[Q]], %[[C1]]
func.func @qkv_into_cache(%h: tensor<?x64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %q, %k, %v = kiln.fused_linear %h, %w norm(eps = 1.0e-05) : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  %c1 = kiln.kv_write %k, %v into %c0[1] at %pos rope(theta = 10000.0, layout = rotate_half) : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return %q, %c1 : tensor<?x64xf16>, !cache
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// A linear RoPE scaling's factor goes with the rotation into the epilogue.
// CHECK-LABEL: func.func @linear_rope
// CHECK: kiln.fused_qkv {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_linear = 2.000000e+00 : f64}
func.func @linear_rope(%h: tensor<?x64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %q, %k, %v = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  %c1 = kiln.kv_write %k, %v into %c0[1] at %pos rope(theta = 10000.0, layout = rotate_half) {rope_linear = 2.0} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return %q, %c1 : tensor<?x64xf16>, !cache
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// So does a dynamic scaling.
// CHECK-LABEL: func.func @dynamic_rope
// CHECK: kiln.fused_qkv {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_dynamic = #kiln.rope_dynamic<factor = 2.000000e+00, original = 128>}
func.func @dynamic_rope(%h: tensor<?x64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %q, %k, %v = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  %c1 = kiln.kv_write %k, %v into %c0[1] at %pos rope(theta = 10000.0, layout = rotate_half) {rope_dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return %q, %c1 : tensor<?x64xf16>, !cache
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// Not fused: the keys are needed in memory too.
// CHECK-LABEL: func.func @keys_used_twice
// CHECK: kiln.fused_linear
// CHECK: kiln.kv_write
func.func @keys_used_twice(%h: tensor<?x64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x32xf16>, !cache) {
  %q, %k, %v = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  %c1 = kiln.kv_write %k, %v into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return %k, %c1 : tensor<?x32xf16>, !cache
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// Not fused: keys and values from separate matmuls.
// CHECK-LABEL: func.func @separate_matmuls
// CHECK: kiln.kv_write
func.func @separate_matmuls(%h: tensor<?x64xf16>, %w: tensor<32x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> !cache {
  %k = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  %v = kiln.fused_linear %h, %w : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  %c1 = kiln.kv_write %k, %v into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return %c1 : !cache
}
