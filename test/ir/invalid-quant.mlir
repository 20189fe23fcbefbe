// #kiln.quant's verifier and the weights it may stand on.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @group_does_not_divide() {
  // expected-error @+1 {{#kiln.quant: group 128 does not divide the 64 columns}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<int4, group = 128>>
  return
}

// -----

func.func @fp8_with_a_group() {
  // expected-error @+1 {{#kiln.quant: fp8 has one scale per row and no zero points}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<fp8, group = 32>>
  return
}

// -----

func.func @fp8_with_zero_points() {
  // expected-error @+1 {{#kiln.quant: fp8 has one scale per row and no zero points}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<fp8, zero_points>>
  return
}

// -----

func.func @mins_with_zero_points() {
  // expected-error @+1 {{#kiln.quant: mins go with int8 or int4 codes in groups, in column order, without zero points}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<int4, group = 32, zero_points, mins>>
  return
}

// -----

func.func @fp8_with_mins() {
  // expected-error @+1 {{#kiln.quant: mins go with int8 or int4 codes in groups, in column order, without zero points}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<fp8, mins>>
  return
}

// -----

func.func @mins_without_a_group() {
  // expected-error @+1 {{#kiln.quant: mins go with int8 or int4 codes in groups, in column order, without zero points}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<int4, mins>>
  return
}

// -----

func.func @unknown_kind() {
  // expected-error @+1 {{expected int8, int4 or fp8, not int3}}
  %w = kiln.weight "w" : tensor<32x64xf16, #kiln.quant<int3>>
  return
}

// -----

func.func @not_a_matrix() {
  // expected-error @+1 {{#kiln.quant: a quantized weight is a matrix of static columns}}
  %w = kiln.weight "w" : tensor<64xf16, #kiln.quant<int8>>
  return
}

// -----

func.func @foreign_encoding() {
  // expected-error @+1 {{'kiln.weight' op a weight's encoding must be #kiln.quant, not "sparse"}}
  %w = kiln.weight "w" : tensor<32x64xf16, "sparse">
  return
}

// -----

func.func @quantized_embedding(%t: tensor<?xi32>) {
  %w = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16, #kiln.quant<int8>>
  // expected-error @+1 {{'kiln.embedding' op cannot look rows up in a quantized table}}
  %h = kiln.embedding %w[%t] : tensor<320x64xf16, #kiln.quant<int8>>, tensor<?xi32> -> tensor<?x64xf16>
  return
}
