// RUN: kiln-opt %s --kiln-plan-kv-pool -kiln-test-print-kv-plan | FileCheck %s
// RUN: kiln-opt %s --kiln-plan-kv-pool="memory-budget=1000000" -kiln-test-print-kv-plan | FileCheck %s --check-prefix=BUDGET
// RUN: kiln-opt %s --kiln-plan-kv-pool | FileCheck %s --check-prefix=ATTR

// plan-kv-pool.mlir's cache quantized to int8 (--kv-dtype int8): a block
// of one layer's keys is 16 tokens * 8 kv heads * 128 one-byte codes =
// 16384 bytes, and its scales 16 tokens * 8 kv heads * 2 bytes = 256.
!cache = !kiln.kv_cache<layers = 4, capacity = 4096, kv_heads = 8, head_dim = 128, element_type = i8>
func.func @decode(%t: tensor<1xi32>, %p: tensor<1xi32>, %c: !cache) -> !cache {
  return %c : !cache
}

// CHECK: kv pool: 34078720 bytes, 256 blocks of 16 tokens
// CHECK: layout: [4 layers][keys|values][256 blocks][16 tokens][8 kv heads][128 head dim] i8
// CHECK: scales: [4 layers][keys|values][256 blocks][16 tokens][8 kv heads] f16, after the values, 256 bytes a block
// CHECK: block: 16384 bytes per layer, 133120 bytes for keys and values of all layers
// CHECK: layer 0: keys at 0, values at 4194304, key scales at 8388608, value scales at 8454144
// CHECK: layer 1: keys at 8519680, values at 12713984, key scales at 16908288, value scales at 16973824

// The f16 pool's budget of 1000000 bytes held 3 blocks (262144 bytes all
// layers); the int8 pool's holds 7 (133120 each): twice the tokens and
// more, the scales taking 1.6%.
// BUDGET: kv pool: 931840 bytes, 7 blocks of 16 tokens

// ATTR: #kiln.kv_pool<block_size = 16, blocks = 256, block_bytes = 16384, layer_bytes = 8519680, bytes = 34078720, sequences = 1, table_blocks = 256, scale_bytes = 256>
