// RUN: kiln-opt %s -split-input-file --kiln-fuse-rope-qk | FileCheck %s

!cache = !kiln.kv_cache<layers = 1, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// Q is rotated as attention loads it; K as kv_write stores it.
// CHECK-LABEL: func.func @rope_into_both
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x64xf16>, %[[K:[a-z0-9]+]]: tensor<?x32xf16>, %[[V:[a-z0-9]+]]: tensor<?x32xf16>, %[[P:[a-z0-9]+]]: tensor<?xi32>
// CHECK-NOT: kiln.rope
// CHECK: %[[C:.*]] = kiln.kv_write %[[K]], %[[V]] into %{{.*}}[0] at %[[P]] rope(theta = 1.000000e+04, layout = rotate_half)
// CHECK: %[[KEYS:.*]], %[[VALUES:.*]] = kiln.kv_read %[[C]]
// CHECK: kiln.attention %[[Q]], %[[KEYS]], %[[VALUES]] at %[[P]] heads = 4, kv_heads = 2, scale = 2.500000e-01 rope(theta = 1.000000e+04, layout = rotate_half)
func.func @rope_into_both(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %kr = kiln.rope %k at %pos heads = 2, theta = 10000.0, layout = rotate_half : tensor<?x32xf16>, tensor<?xi32>
  %c1 = kiln.kv_write %kr, %v into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  %keys, %values = kiln.kv_read %c1[0] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  %a = kiln.attention %qr, %keys, %values at %pos heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a, %c1 : tensor<?x64xf16>, !cache
}

// -----

// The interleaved layout and theta travel with the rotation.
// CHECK-LABEL: func.func @interleaved
// CHECK: kiln.attention {{.*}} rope(theta = 5.000000e+05, layout = interleaved)
func.func @interleaved(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) -> tensor<?x64xf16> {
  %qr = kiln.rope %q at %pos heads = 4, theta = 500000.0, layout = interleaved : tensor<?x64xf16>, tensor<?xi32>
  %a = kiln.attention %qr, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// A linear scaling's factor travels with the rotation, to both.
// CHECK-LABEL: func.func @linear_scaling
// CHECK: kiln.kv_write {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_linear = 4.000000e+00 : f64}
// CHECK: kiln.attention {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_linear = 4.000000e+00 : f64}
func.func @linear_scaling(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half {linear = 4.0} : tensor<?x64xf16>, tensor<?xi32>
  %kr = kiln.rope %k at %pos heads = 2, theta = 10000.0, layout = rotate_half {linear = 4.0} : tensor<?x32xf16>, tensor<?xi32>
  %c1 = kiln.kv_write %kr, %v into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  %keys, %values = kiln.kv_read %c1[0] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  %a = kiln.attention %qr, %keys, %values at %pos heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a, %c1 : tensor<?x64xf16>, !cache
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// So does a dynamic scaling's.
// CHECK-LABEL: func.func @dynamic_scaling
// CHECK: kiln.kv_write {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_dynamic = #kiln.rope_dynamic<factor = 2.000000e+00, original = 128>}
// CHECK: kiln.attention {{.*}} rope(theta = 1.000000e+04, layout = rotate_half) {rope_dynamic = #kiln.rope_dynamic<factor = 2.000000e+00, original = 128>}
func.func @dynamic_scaling(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %v: tensor<?x32xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x64xf16>, tensor<?xi32>
  %kr = kiln.rope %k at %pos heads = 2, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x32xf16>, tensor<?xi32>
  %c1 = kiln.kv_write %kr, %v into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  %keys, %values = kiln.kv_read %c1[0] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  %a = kiln.attention %qr, %keys, %values at %pos heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a, %c1 : tensor<?x64xf16>, !cache
}

// -----

// Not fused: the rotated query is also returned, so it must exist.
// CHECK-LABEL: func.func @rotated_used_twice
// CHECK: kiln.rope
// CHECK: kiln.attention
// CHECK-NOT: rope(
func.func @rotated_used_twice(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %a = kiln.attention %qr, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a, %qr : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// Not fused: rotated at other positions than attention masks with.
// CHECK-LABEL: func.func @other_positions
// CHECK: kiln.rope
func.func @other_positions(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>, %pos2: tensor<?xi32>) -> tensor<?x64xf16> {
  %qr = kiln.rope %q at %pos2 heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %a = kiln.attention %qr, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

// Not fused: a rope over 2 heads cannot be the rotation of 4 query heads.
// CHECK-LABEL: func.func @other_heads
// CHECK: kiln.rope
func.func @other_heads(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) -> tensor<?x64xf16> {
  %qr = kiln.rope %q at %pos heads = 2, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %a = kiln.attention %qr, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// -----

// Not fused: a bare kiln.qk (no attention op yet) keeps its rope; run
// kiln-fuse-softmax first.
// CHECK-LABEL: func.func @bare_qk
// CHECK: kiln.rope
// CHECK: kiln.qk
func.func @bare_qk(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) -> tensor<4x?x?xf32> {
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %s = kiln.qk %qr, %k heads = 4, kv_heads = 4, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<4x?x?xf32>
  return %s : tensor<4x?x?xf32>
}
