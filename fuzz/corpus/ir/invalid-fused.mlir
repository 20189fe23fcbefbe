// The fused ops' verifiers: the numerics contract and the shapes.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @softmax_without_max_subtraction(%s: tensor<4x?x?xf32>) {
  // expected-error @+1 {{'kiln.softmax' op must subtract the row maximum (subtract_max = false lets exp overflow)}}
  %p = kiln.softmax %s {subtract_max = false} : tensor<4x?x?xf32>
  return
}

// -----

func.func @softmax_f16_accumulator(%s: tensor<4x?x?xf32>) {
  // expected-error @+1 {{'kiln.softmax' op accumulates in 'f16'; softmax must accumulate in f32}}
  %p = kiln.softmax %s {accumulator = f16} : tensor<4x?x?xf32>
  return
}

// -----

func.func @attention_f16_accumulator(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.attention' op always subtracts the row maximum and sums in f32: it takes no accumulator}}
  %a = kiln.attention %q, %k, %k at %pos heads = 4, kv_heads = 2, scale = 0.25 {accumulator = f16} : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return
}

// -----

func.func @attention_without_max_subtraction(%q: tensor<?x64xf16>, %k: tensor<?x32xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.attention' op always subtracts the row maximum and sums in f32: it takes no subtract_max}}
  %a = kiln.attention %q, %k, %k at %pos heads = 4, kv_heads = 2, scale = 0.25 {subtract_max = false} : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<?x64xf16>, %k: tensor<?x48xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.attention' op kv_heads (3) do not divide heads (4)}}
  %a = kiln.attention %q, %k, %k at %pos heads = 4, kv_heads = 3, scale = 0.25 : tensor<?x64xf16>, tensor<?x48xf16>, tensor<?x48xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return
}

// -----

func.func @attention_rope_odd_head_dim(%q: tensor<?x60xf16>, %k: tensor<?x60xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.attention' op head_dim 15 is odd: RoPE rotates pairs of dimensions}}
  %a = kiln.attention %q, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 rope(theta = 10000.0, layout = rotate_half) : tensor<?x60xf16>, tensor<?x60xf16>, tensor<?x60xf16>, tensor<?xi32> -> tensor<?x60xf16>
  return
}

// -----

func.func @rope_half_given(%q: tensor<?x64xf16>, %k: tensor<?x64xf16>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'kiln.attention' op needs both rope theta and rope layout, or neither}}
  %a = kiln.attention %q, %k, %k at %pos heads = 4, kv_heads = 4, scale = 0.25 {rope_theta = 10000.0 : f64} : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  return
}

// -----

func.func @fused_linear_rows(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @+1 {{'kiln.fused_linear' op the weight has 128 rows, the results need 96}}
  %a:2 = kiln.fused_linear %x, %w : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>
  return
}

// -----

func.func @fused_linear_swiglu_width(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @+1 {{'kiln.fused_linear' op the weight has 128 rows, the results need 256}}
  %a = kiln.fused_linear %x, %w swiglu : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
  return
}

// -----

func.func @fused_linear_swiglu_two_results(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @+1 {{'kiln.fused_linear' op a swiglu or residual epilogue has one result}}
  %a:2 = kiln.fused_linear %x, %w swiglu : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x32xf16>, tensor<?x32xf16>
  return
}

// -----

func.func @fused_linear_residual_type(%x: tensor<?x64xf16>, %w: tensor<64x64xf16>, %h: tensor<?x64xf32>) {
  // expected-error @+1 {{'kiln.fused_linear' op residual type differs from the result type}}
  %a = kiln.fused_linear %x, %w residual(%h) : tensor<?x64xf16>, tensor<64x64xf16>, tensor<?x64xf32> -> tensor<?x64xf16>
  return
}

// -----

func.func @fused_linear_weight_width(%x: tensor<?x64xf16>, %w: tensor<64x32xf16>) {
  // expected-error @+1 {{'kiln.fused_linear' op weight shape [64, 32] does not match the input: expected [N, 64]}}
  %a = kiln.fused_linear %x, %w norm(eps = 1.0e-05) : tensor<?x64xf16>, tensor<64x32xf16> -> tensor<?x64xf16>
  return
}

// -----

func.func @packed_rows() {
  // expected-error @+1 {{'kiln.packed_weight' op result has 100 rows, the sources give 96}}
  %w = kiln.packed_weight "qk" = ["q.weight", "k.weight"] rows [64, 32] : tensor<100x64xf16>
  return
}

// -----

func.func @packed_counts() {
  // expected-error @+1 {{'kiln.packed_weight' op needs one row count per source, and at least one source}}
  %w = kiln.packed_weight "qk" = ["q.weight", "k.weight"] rows [96] : tensor<96x64xf16>
  return
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 8, kv_heads = 2, head_dim = 16, element_type = f16>
func.func @kv_write_rope_theta(%k: tensor<?x32xf16>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.kv_write' op rope theta must be positive}}
  %c1 = kiln.kv_write %k, %k into %c[0] at %pos rope(theta = -1.0, layout = rotate_half) : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 8, kv_heads = 2, head_dim = 16, element_type = f16>
func.func @fused_qkv_rows(%x: tensor<?x64xf16>, %w: tensor<96x64xf16>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.fused_qkv' op the weight has 96 rows, q, k and v need 128}}
  %q, %c1 = kiln.fused_qkv %x, %w into %c[0] at %pos : tensor<?x64xf16>, tensor<96x64xf16>, tensor<?xi32>, !cache -> tensor<?x64xf16>
  return
}

// -----

!cache = !kiln.kv_cache<layers = 1, capacity = 8, kv_heads = 2, head_dim = 16, element_type = f32>
func.func @fused_qkv_cache_type(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>, %c: !cache) {
  // expected-error @+1 {{'kiln.fused_qkv' op input, weight, query and cache must share one element type}}
  %q, %c1 = kiln.fused_qkv %x, %w into %c[0] at %pos : tensor<?x64xf16>, tensor<128x64xf16>, tensor<?xi32>, !cache -> tensor<?x64xf16>
  return
}
