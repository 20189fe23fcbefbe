// The verifiers refuse inconsistent IR and name the op and the fault.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @heads_do_not_divide_hidden(%x: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.rope' op heads (5) do not divide the hidden size (64)}}
  %r = kiln.rope %x at %pos heads = 5, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @odd_head_dim(%x: tensor<?x60xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.rope' op head_dim 15 is odd: RoPE rotates pairs of dimensions}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x60xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_linear_below_one(%x: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.rope' op RoPE's linear scaling factor must be at least 1, not 5.000000e-01}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half {linear = 0.5} : tensor<?x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_dynamic_below_one(%x: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{#kiln.rope_dynamic: the factor must be at least 1, not 5.000000e-01}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 0.5, original = 128>} : tensor<?x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_dynamic_no_context(%x: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{#kiln.rope_dynamic: the original context must be positive}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.0, original = 0>} : tensor<?x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_linear_and_dynamic(%x: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.rope' op scales RoPE both linearly and dynamically}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half {linear = 2.0, dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_dynamic_narrow_head(%x: tensor<?x8xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.rope' op head_dim 2 is too narrow for dynamic RoPE scaling (Dh / (Dh - 2))}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x8xf16>, tensor<?xi32>
  return
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

func.func @kv_write_dynamic_without_rope(%k: tensor<?x32xf16>, %pos: tensor<?xi32>, %c0: !cache) {
  // expected-error @+1 {{'kiln.kv_write' op has a rope scaling without rope theta and layout}}
  %c1 = kiln.kv_write %k, %k into %c0[0] at %pos {rope_dynamic = #kiln.rope_dynamic<factor = 2.0, original = 128>} : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return
}

// -----

func.func @rope_positions_count(%x: tensor<3x64xf16>, %pos: tensor<2xi32>) {
  // expected-error @+1 {{'kiln.rope' op positions differ in count from the input rows}}
  %r = kiln.rope %x at %pos heads = 4, theta = 10000.0, layout = interleaved : tensor<3x64xf16>, tensor<2xi32>
  return
}

// -----

func.func @qk_heads_do_not_divide_hidden(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>) {
  // expected-error @+1 {{'kiln.qk' op heads (6) do not divide the hidden size (64)}}
  %s = kiln.qk %q, %k heads = 6, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<6x?x?xf32>
  return
}

// -----

func.func @kv_heads_do_not_divide_heads(%q: tensor<?x64xf16>, %k: tensor<?x48xf16>) {
  // expected-error @+1 {{'kiln.qk' op kv_heads (3) do not divide heads (4)}}
  %s = kiln.qk %q, %k heads = 4, kv_heads = 3, scale = 0.25 : tensor<?x64xf16>, tensor<?x48xf16> -> tensor<4x?x?xf32>
  return
}

// -----

func.func @qk_keys_width(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>) {
  // expected-error @+1 {{'kiln.qk' op keys width 64 differs from kv_heads * head_dim = 32}}
  %s = kiln.qk %q, %k heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x64xf16> -> tensor<4x?x?xf32>
  return
}

// -----

func.func @scores_in_f16(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>) {
  // expected-error @+1 {{'kiln.qk' op result #0 must be 3D tensor of 32-bit float values}}
  %s = kiln.qk %q, %k heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf16>
  return
}

// -----

func.func @pv_kv_heads(%p: tensor<4x?x?xf32>, %v: tensor<?x48xf16>) {
  // expected-error @+1 {{'kiln.pv' op kv_heads (3) do not divide heads (4)}}
  %a = kiln.pv %p, %v kv_heads = 3 : tensor<4x?x?xf32>, tensor<?x48xf16> -> tensor<?x64xf16>
  return
}

// -----

func.func @linear_weight_shape(%x: tensor<?x64xf16>) {
  %w = kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<192x32xf16>
  // expected-error @+1 {{'kiln.linear' op weight shape [192, 32] does not match the input: expected [N, 64]}}
  %y = kiln.linear %x, %w : tensor<?x64xf16>, tensor<192x32xf16> -> tensor<?x192xf16>
  return
}

// -----

func.func @linear_result_columns(%x: tensor<?x64xf16>) {
  %w = kiln.weight "w" : tensor<192x64xf16>
  // expected-error @+1 {{'kiln.linear' op result has 64 columns, the weight gives 192}}
  %y = kiln.linear %x, %w : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x64xf16>
  return
}

// -----

func.func @logits_weight_shape(%x: tensor<?x64xf16>) {
  %w = kiln.weight "lm_head.weight" : tensor<320x128xf16>
  // expected-error @+1 {{'kiln.logits' op weight shape [320, 128] does not match the input: expected [N, 64]}}
  %l = kiln.logits %x, %w : tensor<?x64xf16>, tensor<320x128xf16> -> tensor<?x320xf32>
  return
}

// -----

func.func @norm_weight_shape(%x: tensor<?x64xf16>) {
  %w = kiln.weight "model.norm.weight" : tensor<32xf16>
  // expected-error @+1 {{'kiln.rms_norm' op weight has 32 elements, the input has 64 features}}
  %y = kiln.rms_norm %x, %w eps = 1.0e-05 : tensor<?x64xf16>, tensor<32xf16>
  return
}

// -----

func.func @norm_epsilon(%x: tensor<?x64xf16>, %w: tensor<64xf16>) {
  // expected-error @+1 {{'kiln.rms_norm' op epsilon must be positive}}
  %y = kiln.rms_norm %x, %w eps = 0.0 : tensor<?x64xf16>, tensor<64xf16>
  return
}

// -----

func.func @mixed_storage(%x: tensor<?x64xf16>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'kiln.rms_norm' op input element type 'f16' differs from weight element type 'f32'}}
  %y = kiln.rms_norm %x, %w eps = 1.0e-05 : tensor<?x64xf16>, tensor<64xf32>
  return
}

// -----

func.func @weight_dynamic_shape() {
  // expected-error @+1 {{'kiln.weight' op weight 'w' must have a static shape}}
  %w = kiln.weight "w" : tensor<?x64xf16>
  return
}

// -----

func.func @weight_without_name() {
  // expected-error @+1 {{'kiln.weight' op needs a non-empty weight name}}
  %w = kiln.weight "" : tensor<64xf16>
  return
}

// -----

func.func @embedding_width(%tok: tensor<?xi32>) {
  %t = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  // expected-error @+1 {{'kiln.embedding' op result width 32 differs from the table width 64}}
  %h = kiln.embedding %t[%tok] : tensor<320x64xf16>, tensor<?xi32> -> tensor<?x32xf16>
  return
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
func.func @kv_layer_out_of_range(%k: tensor<?x32xf16>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.kv_write' op layer 2 is outside the cache's 2 layers}}
  %c1 = kiln.kv_write %k, %k into %c[2] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
func.func @kv_slot_width(%k: tensor<?x64xf16>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.kv_write' op keys width 64 differs from the cache's kv_heads * head_dim = 32}}
  %c1 = kiln.kv_write %k, %k into %c[0] at %pos : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
func.func @kv_read_element(%pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.kv_read' op keys element type 'f32' differs from the cache's 'f16'}}
  %k, %v = kiln.kv_read %c[0] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

// expected-error @+1 {{kv_cache: layers, capacity, kv_heads and head_dim must be positive}}
func.func @cache_type(%c: !kiln.kv_cache<layers = 0, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>) {
  return
}

// -----

func.func @reduce_keeps_last_dim(%x: tensor<4x?x?xf32>) {
  // expected-error @+1 {{'kiln.reduce_max' op result must be the input's shape with a last dimension of 1}}
  %m = kiln.reduce_max %x : tensor<4x?x?xf32> -> tensor<4x?x?xf32>
  return
}

// -----

func.func @row_broadcast(%x: tensor<4x8x8xf32>, %r: tensor<4x8x2xf32>) {
  // expected-error @+1 {{'kiln.div' op rhs must have the lhs shape, or 1 in the last dimension}}
  %p = kiln.div %x, %r : tensor<4x8x8xf32>, tensor<4x8x2xf32>
  return
}

// -----

// expected-error @+1 {{kv_cache: element type must be f16, bf16 or f32, or f8E4M3FN or i8 (quantized), not 'f8E5M2'}}
func.func @cache_quant_type(%c: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f8E5M2>) {
  return
}

// -----

// A quantized cache takes the model's floats, not codes.
!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = i8>
func.func @kv_write_codes(%k: tensor<?x32xi8>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.kv_write' op operand #0 must be 2D tensor of 16-bit float or bfloat16 type or 32-bit float values, but got 'tensor<?x32xi8>'}}
  %c1 = kiln.kv_write %k, %k into %c[0] at %pos : tensor<?x32xi8>, tensor<?x32xi8>, tensor<?xi32>, !cache
  return
}
