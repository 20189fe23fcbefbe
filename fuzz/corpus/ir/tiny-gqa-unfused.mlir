module attributes {kiln.config = {hidden_size = 64 : i64, intermediate_size = 192 : i64, max_position_embeddings = 128 : i64, num_attention_heads = 4 : i64, num_hidden_layers = 2 : i64, num_key_value_heads = 2 : i64, rms_norm_eps = 1.000000e-05 : f64, rope_theta = 1.000000e+04 : f64, vocab_size = 320 : i64}, kiln.model = "tiny-gqa"} {
  func.func @prefill(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>, %arg2: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>) -> (tensor<?x320xf32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>) attributes {kiln.phase = #kiln.phase<prefill>} {
    %0 = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
    %1 = kiln.embedding %0[%arg0] : tensor<320x64xf16>, tensor<?xi32> -> tensor<?x64xf16>
    %2 = kiln.weight "model.layers.0.input_layernorm.weight" : tensor<64xf16>
    %3 = kiln.rms_norm %1, %2 eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
    %4 = kiln.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf16>
    %5 = kiln.linear %3, %4 : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
    %6 = kiln.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf16>
    %7 = kiln.linear %3, %6 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
    %8 = kiln.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf16>
    %9 = kiln.linear %3, %8 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
    %10 = kiln.rope %5 at %arg1 heads = 4, theta = 1.000000e+04, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
    %11 = kiln.rope %7 at %arg1 heads = 2, theta = 1.000000e+04, layout = rotate_half : tensor<?x32xf16>, tensor<?xi32>
    %12 = kiln.kv_write %11, %9 into %arg2[0] at %arg1 : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
    %keys, %values = kiln.kv_read %12[0] upto %arg1 : !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
    %13 = kiln.qk %10, %keys heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf32>
    %14 = kiln.causal_mask %13 at %arg1 : tensor<4x?x?xf32>, tensor<?xi32>
    %15 = kiln.softmax %14 : tensor<4x?x?xf32>
    %16 = kiln.pv %15, %values kv_heads = 2 : tensor<4x?x?xf32>, tensor<?x32xf16> -> tensor<?x64xf16>
    %17 = kiln.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf16>
    %18 = kiln.linear %16, %17 : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
    %19 = kiln.add %1, %18 : tensor<?x64xf16>
    %20 = kiln.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf16>
    %21 = kiln.rms_norm %19, %20 eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
    %22 = kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<192x64xf16>
    %23 = kiln.linear %21, %22 : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
    %24 = kiln.weight "model.layers.0.mlp.up_proj.weight" : tensor<192x64xf16>
    %25 = kiln.linear %21, %24 : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
    %26 = kiln.silu %23 : tensor<?x192xf16>
    %27 = kiln.mul %26, %25 : tensor<?x192xf16>
    %28 = kiln.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x192xf16>
    %29 = kiln.linear %27, %28 : tensor<?x192xf16>, tensor<64x192xf16> -> tensor<?x64xf16>
    %30 = kiln.add %19, %29 : tensor<?x64xf16>
    %31 = kiln.weight "model.layers.1.input_layernorm.weight" : tensor<64xf16>
    %32 = kiln.rms_norm %30, %31 eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
    %33 = kiln.weight "model.layers.1.self_attn.q_proj.weight" : tensor<64x64xf16>
    %34 = kiln.linear %32, %33 : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
    %35 = kiln.weight "model.layers.1.self_attn.k_proj.weight" : tensor<32x64xf16>
    %36 = kiln.linear %32, %35 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
    %37 = kiln.weight "model.layers.1.self_attn.v_proj.weight" : tensor<32x64xf16>
    %38 = kiln.linear %32, %37 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
    %39 = kiln.rope %34 at %arg1 heads = 4, theta = 1.000000e+04, layout = rotate_half : tensor<?x64xf16>, tensor<?xi32>
    %40 = kiln.rope %36 at %arg1 heads = 2, theta = 1.000000e+04, layout = rotate_half : tensor<?x32xf16>, tensor<?xi32>
    %41 = kiln.kv_write %40, %38 into %12[1] at %arg1 : tensor<?x32xf16>, tensor<?x32xf16>, tensor<?xi32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
    %keys_0, %values_1 = kiln.kv_read %41[1] upto %arg1 : !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>, tensor<?xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
    %42 = kiln.qk %39, %keys_0 heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<?x64xf16>, tensor<?x32xf16> -> tensor<4x?x?xf32>
    %43 = kiln.causal_mask %42 at %arg1 : tensor<4x?x?xf32>, tensor<?xi32>
    %44 = kiln.softmax %43 : tensor<4x?x?xf32>
    %45 = kiln.pv %44, %values_1 kv_heads = 2 : tensor<4x?x?xf32>, tensor<?x32xf16> -> tensor<?x64xf16>
    %46 = kiln.weight "model.layers.1.self_attn.o_proj.weight" : tensor<64x64xf16>
    %47 = kiln.linear %45, %46 : tensor<?x64xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
    %48 = kiln.add %30, %47 : tensor<?x64xf16>
    %49 = kiln.weight "model.layers.1.post_attention_layernorm.weight" : tensor<64xf16>
    %50 = kiln.rms_norm %48, %49 eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
    %51 = kiln.weight "model.layers.1.mlp.gate_proj.weight" : tensor<192x64xf16>
    %52 = kiln.linear %50, %51 : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
    %53 = kiln.weight "model.layers.1.mlp.up_proj.weight" : tensor<192x64xf16>
    %54 = kiln.linear %50, %53 : tensor<?x64xf16>, tensor<192x64xf16> -> tensor<?x192xf16>
    %55 = kiln.silu %52 : tensor<?x192xf16>
    %56 = kiln.mul %55, %54 : tensor<?x192xf16>
    %57 = kiln.weight "model.layers.1.mlp.down_proj.weight" : tensor<64x192xf16>
    %58 = kiln.linear %56, %57 : tensor<?x192xf16>, tensor<64x192xf16> -> tensor<?x64xf16>
    %59 = kiln.add %48, %58 : tensor<?x64xf16>
    %60 = kiln.weight "model.norm.weight" : tensor<64xf16>
    %61 = kiln.rms_norm %59, %60 eps = 1.000000e-05 : tensor<?x64xf16>, tensor<64xf16>
    %62 = kiln.weight "lm_head.weight" : tensor<320x64xf16>
    %63 = kiln.logits %61, %62 : tensor<?x64xf16>, tensor<320x64xf16> -> tensor<?x320xf32>
    return %63, %41 : tensor<?x320xf32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
  }
  func.func @decode(%arg0: tensor<1xi32>, %arg1: tensor<1xi32>, %arg2: !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>) -> (tensor<1x320xf32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>) attributes {kiln.phase = #kiln.phase<decode>} {
    %0 = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
    %1 = kiln.embedding %0[%arg0] : tensor<320x64xf16>, tensor<1xi32> -> tensor<1x64xf16>
    %2 = kiln.weight "model.layers.0.input_layernorm.weight" : tensor<64xf16>
    %3 = kiln.rms_norm %1, %2 eps = 1.000000e-05 : tensor<1x64xf16>, tensor<64xf16>
    %4 = kiln.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf16>
    %5 = kiln.linear %3, %4 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
    %6 = kiln.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf16>
    %7 = kiln.linear %3, %6 : tensor<1x64xf16>, tensor<32x64xf16> -> tensor<1x32xf16>
    %8 = kiln.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf16>
    %9 = kiln.linear %3, %8 : tensor<1x64xf16>, tensor<32x64xf16> -> tensor<1x32xf16>
    %10 = kiln.rope %5 at %arg1 heads = 4, theta = 1.000000e+04, layout = rotate_half : tensor<1x64xf16>, tensor<1xi32>
    %11 = kiln.rope %7 at %arg1 heads = 2, theta = 1.000000e+04, layout = rotate_half : tensor<1x32xf16>, tensor<1xi32>
    %12 = kiln.kv_write %11, %9 into %arg2[0] at %arg1 : tensor<1x32xf16>, tensor<1x32xf16>, tensor<1xi32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
    %keys, %values = kiln.kv_read %12[0] upto %arg1 : !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>, tensor<1xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
    %13 = kiln.qk %10, %keys heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<1x64xf16>, tensor<?x32xf16> -> tensor<4x1x?xf32>
    %14 = kiln.causal_mask %13 at %arg1 : tensor<4x1x?xf32>, tensor<1xi32>
    %15 = kiln.softmax %14 : tensor<4x1x?xf32>
    %16 = kiln.pv %15, %values kv_heads = 2 : tensor<4x1x?xf32>, tensor<?x32xf16> -> tensor<1x64xf16>
    %17 = kiln.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf16>
    %18 = kiln.linear %16, %17 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
    %19 = kiln.add %1, %18 : tensor<1x64xf16>
    %20 = kiln.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf16>
    %21 = kiln.rms_norm %19, %20 eps = 1.000000e-05 : tensor<1x64xf16>, tensor<64xf16>
    %22 = kiln.weight "model.layers.0.mlp.gate_proj.weight" : tensor<192x64xf16>
    %23 = kiln.linear %21, %22 : tensor<1x64xf16>, tensor<192x64xf16> -> tensor<1x192xf16>
    %24 = kiln.weight "model.layers.0.mlp.up_proj.weight" : tensor<192x64xf16>
    %25 = kiln.linear %21, %24 : tensor<1x64xf16>, tensor<192x64xf16> -> tensor<1x192xf16>
    %26 = kiln.silu %23 : tensor<1x192xf16>
    %27 = kiln.mul %26, %25 : tensor<1x192xf16>
    %28 = kiln.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x192xf16>
    %29 = kiln.linear %27, %28 : tensor<1x192xf16>, tensor<64x192xf16> -> tensor<1x64xf16>
    %30 = kiln.add %19, %29 : tensor<1x64xf16>
    %31 = kiln.weight "model.layers.1.input_layernorm.weight" : tensor<64xf16>
    %32 = kiln.rms_norm %30, %31 eps = 1.000000e-05 : tensor<1x64xf16>, tensor<64xf16>
    %33 = kiln.weight "model.layers.1.self_attn.q_proj.weight" : tensor<64x64xf16>
    %34 = kiln.linear %32, %33 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
    %35 = kiln.weight "model.layers.1.self_attn.k_proj.weight" : tensor<32x64xf16>
    %36 = kiln.linear %32, %35 : tensor<1x64xf16>, tensor<32x64xf16> -> tensor<1x32xf16>
    %37 = kiln.weight "model.layers.1.self_attn.v_proj.weight" : tensor<32x64xf16>
    %38 = kiln.linear %32, %37 : tensor<1x64xf16>, tensor<32x64xf16> -> tensor<1x32xf16>
    %39 = kiln.rope %34 at %arg1 heads = 4, theta = 1.000000e+04, layout = rotate_half : tensor<1x64xf16>, tensor<1xi32>
    %40 = kiln.rope %36 at %arg1 heads = 2, theta = 1.000000e+04, layout = rotate_half : tensor<1x32xf16>, tensor<1xi32>
    %41 = kiln.kv_write %40, %38 into %12[1] at %arg1 : tensor<1x32xf16>, tensor<1x32xf16>, tensor<1xi32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
    %keys_0, %values_1 = kiln.kv_read %41[1] upto %arg1 : !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>, tensor<1xi32> -> tensor<?x32xf16>, tensor<?x32xf16>
    %42 = kiln.qk %39, %keys_0 heads = 4, kv_heads = 2, scale = 2.500000e-01 : tensor<1x64xf16>, tensor<?x32xf16> -> tensor<4x1x?xf32>
    %43 = kiln.causal_mask %42 at %arg1 : tensor<4x1x?xf32>, tensor<1xi32>
    %44 = kiln.softmax %43 : tensor<4x1x?xf32>
    %45 = kiln.pv %44, %values_1 kv_heads = 2 : tensor<4x1x?xf32>, tensor<?x32xf16> -> tensor<1x64xf16>
    %46 = kiln.weight "model.layers.1.self_attn.o_proj.weight" : tensor<64x64xf16>
    %47 = kiln.linear %45, %46 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
    %48 = kiln.add %30, %47 : tensor<1x64xf16>
    %49 = kiln.weight "model.layers.1.post_attention_layernorm.weight" : tensor<64xf16>
    %50 = kiln.rms_norm %48, %49 eps = 1.000000e-05 : tensor<1x64xf16>, tensor<64xf16>
    %51 = kiln.weight "model.layers.1.mlp.gate_proj.weight" : tensor<192x64xf16>
    %52 = kiln.linear %50, %51 : tensor<1x64xf16>, tensor<192x64xf16> -> tensor<1x192xf16>
    %53 = kiln.weight "model.layers.1.mlp.up_proj.weight" : tensor<192x64xf16>
    %54 = kiln.linear %50, %53 : tensor<1x64xf16>, tensor<192x64xf16> -> tensor<1x192xf16>
    %55 = kiln.silu %52 : tensor<1x192xf16>
    %56 = kiln.mul %55, %54 : tensor<1x192xf16>
    %57 = kiln.weight "model.layers.1.mlp.down_proj.weight" : tensor<64x192xf16>
    %58 = kiln.linear %56, %57 : tensor<1x192xf16>, tensor<64x192xf16> -> tensor<1x64xf16>
    %59 = kiln.add %48, %58 : tensor<1x64xf16>
    %60 = kiln.weight "model.norm.weight" : tensor<64xf16>
    %61 = kiln.rms_norm %59, %60 eps = 1.000000e-05 : tensor<1x64xf16>, tensor<64xf16>
    %62 = kiln.weight "lm_head.weight" : tensor<320x64xf16>
    %63 = kiln.logits %61, %62 : tensor<1x64xf16>, tensor<320x64xf16> -> tensor<1x320xf32>
    return %63, %41 : tensor<1x320xf32>, !kiln.kv_cache<layers = 2, capacity = 128, kv_heads = 2, head_dim = 16, element_type = f16>
  }
}
