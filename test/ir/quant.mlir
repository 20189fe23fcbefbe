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
  return
}

// A packed weight carries the format of its parts.
// CHECK-LABEL: func.func @packed
func.func @packed() {
  // CHECK: kiln.packed_weight "q+k" = ["q", "k"] rows [64, 32] : tensor<96x64xf16, #kiln.quant<int8, group = 32>>
  %w = kiln.packed_weight "q+k" = ["q", "k"] rows [64, 32] : tensor<96x64xf16, #kiln.quant<int8, group = 32>>
  return
}
