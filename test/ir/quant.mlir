// #kiln.quant, the encoding of a quantized weight's tensor type: it prints
// as it parses, and its verifier holds the group to the columns.
// RUN: kiln-opt %s | FileCheck %s
// RUN: kiln-opt %s | kiln-opt | FileCheck %s

// CHECK-LABEL: func.func @formats
func.func @formats() {
  // CHECK: tensor<64x128xf16, #kiln.quant<int4, group = 32>>
  %a = kiln.weight "a" : tensor<64x128xf16, #kiln.quant<int4, group = 32>>
  // CHECK: tensor<64x128xf16, #kiln.quant<int4, group = 128, zero_points>>
  %b = kiln.weight "b" : tensor<64x128xf16, #kiln.quant<int4, group = 128, zero_points>>
  // CHECK: tensor<64x128xf16, #kiln.quant<int8>>
  %c = kiln.weight "c" : tensor<64x128xf16, #kiln.quant<int8>>
  // CHECK: tensor<64x128xf16, #kiln.quant<fp8>>
  %d = kiln.weight "d" : tensor<64x128xf16, #kiln.quant<fp8>>
  // CHECK: tensor<64x128xf16, #kiln.quant<int4>>
  %e = kiln.weight "e" : tensor<64x128xf16, #kiln.quant<int4>>
  // CHECK: tensor<64x128xf16, #kiln.quant<int8, group = 16, mins>>
  %f = kiln.weight "f" : tensor<64x128xf16, #kiln.quant<int8, group = 16, mins>>
  return
}

// A packed weight carries the format of its parts.
// CHECK-LABEL: func.func @packed
func.func @packed() {
  // CHECK: kiln.packed_weight "q+k" = ["q", "k"] rows [64, 32] : tensor<96x64xf16, #kiln.quant<int8, group = 32>>
  %w = kiln.packed_weight "q+k" = ["q", "k"] rows [64, 32] : tensor<96x64xf16, #kiln.quant<int8, group = 32>>
  return
}

// A quantized KV cache (--kv-dtype): 8-bit codes stored, the model's
// floats written and read.
!c8 = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = i8>
!cf8 = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f8E4M3FN>
// CHECK-LABEL: func.func @quantized_caches
// CHECK-SAME: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = i8>
// CHECK-SAME: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f8E4M3FN>
func.func @quantized_caches(%k: tensor<?x32xf16>, %pos: tensor<?xi32>, %a: !c8, %b: !cf8) {
  // CHECK: kiln.kv_write %{{.*}}, %{{.*}} into %{{.*}}[0] at %{{.*}} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !kiln.kv_cache<{{.*}}element_type = i8>
  %a1 = kiln.kv_write %k, %k into %a[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !c8
  // CHECK: kiln.kv_read %{{.*}}[1] upto %{{.*}} : !kiln.kv_cache<{{.*}}element_type = f8E4M3FN>, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  %kr, %vr = kiln.kv_read %b[1] upto %pos : !cf8, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  return
}
