// Every kiln op and the kv_cache type print and parse back unchanged.
// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

!cache = !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>

// CHECK-LABEL: func.func @layer
// CHECK-SAME: (%[[TOK:.*]]: tensor<?xi32>, %[[POS:.*]]: tensor<?xi32>, %[[C0:.*]]: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>)
func.func @layer(%tok: tensor<?xi32>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x320xf32>, !cache) {
  // CHECK: %[[TABLE:.*]] = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  %table = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  %norm = kiln.weight "model.layers.0.input_layernorm.weight" : tensor<64xf16>
  %wq = kiln.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf16>
  %wk = kiln.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf16>
  %head = kiln.weight "lm_head.weight" : tensor<320x64xf16>
  // CHECK: %[[H:.*]] = kiln.embedding %[[TABLE]][%[[TOK]]] : tensor<320x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  %h = kiln.embedding %table[%tok] : tensor<320x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
  // CHECK: %[[X:.*]] = kiln.rms_norm %[[H]], %{{.*}} eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
  %x = kiln.rms_norm %h, %norm eps = 1.0e-05 : tensor<?x64xf16>, tensor<64xf16>
  // CHECK: %[[Q:.*]] = kiln.linear %[[X]], %{{.*}} : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %q = kiln.linear %x, %wq : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %k = kiln.linear %x, %wk : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  // CHECK: %[[QR:.*]] = kiln.rope %[[Q]] at %[[POS]] heads = 4, theta = 1.000000e+04, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  %qr = kiln.rope %q at %pos heads = 4, theta = 10000.0, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
  // CHECK-DAG: kiln.rope %{{.*}} at %[[POS]] heads = 2, theta = 5.000000e+05, layout = interleaved
  // CHECK-DAG: kiln.rope %{{.*}} at %[[POS]] heads = 2, theta = 1.000000e+04, layout = rotate_half {linear = 4.000000e+00 : f64}
  %kl = kiln.rope %k at %pos heads = 2, theta = 10000.0, layout = rotate_half {linear = 4.0} : tensor<?x32xf16>, tensor<?xi32>
  // CHECK-DAG: kiln.rope %{{.*}} at %[[POS]] heads = 2, theta = 1.000000e+04, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.000000e+00, original = 4096>}
  %kd = kiln.rope %k at %pos heads = 2, theta = 10000.0, layout = rotate_half {dynamic = #kiln.rope_dynamic<factor = 2.0, original = 4096>} : tensor<?x32xf16>, tensor<?xi32>
  %kr = kiln.rope %k at %pos heads = 2, theta = 500000.0, layout = interleaved : tensor<?x32xf16>, tensor<?xi32>
  // CHECK: %[[C1:.*]] = kiln.kv_write %{{.*}}, %{{.*}} into %[[C0]][0] at %[[POS]] : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !kiln.kv_cache
  %c1 = kiln.kv_write %kr, %k into %c0[0] at %pos : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  // CHECK: %[[K:.*]], %[[V:.*]] = kiln.kv_read %[[C1]][0] upto %[[POS]] : !kiln.kv_cache<{{.*}}>, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  %keys, %values = kiln.kv_read %c1[0] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  // CHECK: %[[S:.*]] = kiln.qk %[[QR]], %[[K]] heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf32>
  %s = kiln.qk %qr, %keys heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf32>
  // CHECK: %[[M:.*]] = kiln.causal_mask %[[S]] at %[[POS]] : tensor<4x?x?xf32>, tensor<?xi32>
  %m = kiln.causal_mask %s at %pos : tensor<4x?x?xf32>, tensor<?xi32>
  // CHECK: %[[P:.*]] = kiln.softmax %[[M]] : tensor<4x?x?xf32>
  %p = kiln.softmax %m : tensor<4x?x?xf32>
  // CHECK: %[[A:.*]] = kiln.pv %[[P]], %[[V]] kv_heads = 2 : tensor<4x?x?xf32>, tensor<?x32xf16> -> tensor<?x64xf16>
  %a = kiln.pv %p, %values kv_heads = 2 : tensor<4x?x?xf32>, tensor<?x32xf16> -> tensor<?x64xf16>
  // CHECK: %[[G:.*]] = kiln.silu %[[A]] : tensor<?x64xf16>
  %g = kiln.silu %a : tensor<?x64xf16>
  // CHECK: %[[MUL:.*]] = kiln.mul %[[G]], %[[X]] : tensor<?x64xf16>
  %mul = kiln.mul %g, %x : tensor<?x64xf16>
  // CHECK: %[[SUM:.*]] = kiln.add %[[H]], %[[MUL]] : tensor<?x64xf16>
  %sum = kiln.add %h, %mul : tensor<?x64xf16>
  // CHECK: %[[L:.*]] = kiln.logits %[[SUM]], %{{.*}} : tensor<?x64xf16>, tensor<320x64xf16> -> tensor<?x320xf32>
  %l = kiln.logits %sum, %head : tensor<?x64xf16>, tensor<320x64xf16> -> tensor<?x320xf32>
  // CHECK: return %[[L]], %[[C1]]
  return %l, %c1 : tensor<?x320xf32>, !cache
}

// A softmax in pieces.
// CHECK-LABEL: func.func @softmax_pieces
func.func @softmax_pieces(%x: tensor<4x?x?xf32>) -> tensor<4x?x?xf32> {
  // CHECK: %[[M:.*]] = kiln.reduce_max %{{.*}} : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %m = kiln.reduce_max %x : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  // CHECK: %[[Y:.*]] = kiln.sub %{{.*}}, %[[M]] : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  %y = kiln.sub %x, %m : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  // CHECK: %[[E:.*]] = kiln.exp %[[Y]] : tensor<4x?x?xf32>
  %e = kiln.exp %y : tensor<4x?x?xf32>
  // CHECK: %[[Z:.*]] = kiln.reduce_sum %[[E]] : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  %z = kiln.reduce_sum %e : tensor<4x?x?xf32> -> tensor<4x?x1xf32>
  // CHECK: kiln.div %[[E]], %[[Z]] : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  %p = kiln.div %e, %z : tensor<4x?x?xf32>, tensor<4x?x1xf32>
  return %p : tensor<4x?x?xf32>
}

// Static shapes (a decode step) and float32 storage are IR too.
// CHECK-LABEL: func.func @decode_f32
func.func @decode_f32(%x: tensor<1x64xf32>, %w: tensor<64xf32>) -> tensor<1x64xf32> {
  // CHECK: kiln.rms_norm %{{.*}}, %{{.*}} eps = 9.9999999999999995E-7 : tensor<1x64xf32>, tensor<64xf32>
  %y = kiln.rms_norm %x, %w eps = 1.0e-06 : tensor<1x64xf32>, tensor<64xf32>
  return %y : tensor<1x64xf32>
}

// The fused ops that the passes create.
// CHECK-LABEL: func.func @fused
func.func @fused(%h: tensor<?x64xf16>, %pos: tensor<?xi32>, %c0: !cache) -> (tensor<?x64xf16>, !cache) {
  // CHECK: %[[W:.*]] = kiln.packed_weight "l.q_proj+k_proj+v_proj" = ["l.q_proj.weight", "l.k_proj.weight", "l.v_proj.weight"] rows [64, 32, 32] scaled_by "l.norm.weight" : tensor<128x64xf16>
  %w = kiln.packed_weight "l.q_proj+k_proj+v_proj" = ["l.q_proj.weight", "l.k_proj.weight", "l.v_proj.weight"] rows [64, 32, 32] scaled_by "l.norm.weight" : tensor<128x64xf16>
  // CHECK: %[[F:.*]]:3 = kiln.fused_linear %{{.*}}, %[[W]] norm(eps = 1.000000e-05) : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  %q, %k, %v = kiln.fused_linear %h, %w norm(eps = 1.0e-05) : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>
  // CHECK: %[[C1:.*]] = kiln.kv_write %[[F]]#1, %[[F]]#2 into %{{.*}}[1] at %{{.*}} rope(theta = 1.000000e+04, layout = interleaved)
  %c1 = kiln.kv_write %k, %v into %c0[1] at %pos rope(theta = 10000.0, layout = interleaved) : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !cache
  %keys, %values = kiln.kv_read %c1[1] upto %pos : !cache, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
  // CHECK: %[[A:.*]] = kiln.attention %[[F]]#0, %{{.*}}, %{{.*}} at %{{.*}} heads = 4, kv_heads = 2, scale = 2.500000e-01 rope(theta = 1.000000e+04, layout = interleaved) : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  %a = kiln.attention %q, %keys, %values at %pos heads = 4, kv_heads = 2, scale = 0.25 rope(theta = 10000.0, layout = interleaved) : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  // CHECK: kiln.attention {{.*}} scale = 2.500000e-01 : tensor<?x64xf16>
  %a2 = kiln.attention %q, %keys, %values at %pos heads = 4, kv_heads = 2, scale = 0.25 : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32> -> tensor<?x64xf16>
  %wo = kiln.weight "l.o_proj.weight" : tensor<64x64xf16>
  // CHECK: %[[R:.*]] = kiln.fused_linear %[[A]], %{{.*}} residual(%{{.*}}) : tensor<?x64xf16>, tensor<64x64xf16>, tensor<?x64xf16> -> tensor<?x64xf16>
  %r = kiln.fused_linear %a, %wo residual(%h) : tensor<?x64xf16>, tensor<64x64xf16>, tensor<?x64xf16> -> tensor<?x64xf16>
  %wgu = kiln.packed_weight "l.gate_proj+up_proj" = ["l.gate_proj.weight", "l.up_proj.weight"] rows [192, 192] : tensor<384x64xf16>
  // CHECK: kiln.fused_linear %[[R]], %{{.*}} norm(eps = 1.000000e-05) swiglu : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>
  %m = kiln.fused_linear %r, %wgu norm(eps = 1.0e-05) swiglu : tensor<?x64xf16>, tensor<384x64xf16> -> tensor<?x192xf16>
  // CHECK: %{{.*}}, %{{.*}} = kiln.fused_qkv %{{.*}}, %[[W]] norm(eps = 1.000000e-05) into %{{.*}}[0] at %{{.*}} rope(theta = 1.000000e+04, layout = rotate_half) : tensor<?x64xf16>, tensor<128x64xf16>, tensor<?xi32>, !kiln.kv_cache<{{.*}}> -> tensor<?x64xf16>
  %q2, %c2 = kiln.fused_qkv %h, %w norm(eps = 1.0e-05) into %c1[0] at %pos rope(theta = 10000.0, layout = rotate_half) : tensor<?x64xf16>, tensor<128x64xf16>, tensor<?xi32>, !cache -> tensor<?x64xf16>
  return %a2, %c2 : tensor<?x64xf16>, !cache
}
