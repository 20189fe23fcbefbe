// RUN: kiln-opt %s --kiln-plan-kv-pool -kiln-test-print-kv-plan | FileCheck %s --check-prefix=DEFAULT
// RUN: kiln-opt %s --kiln-plan-kv-pool="block-size=32 max-batch=4 max-context=1024" -kiln-test-print-kv-plan | FileCheck %s --check-prefix=BATCH
// RUN: kiln-opt %s --kiln-plan-kv-pool="memory-budget=1000000" -kiln-test-print-kv-plan | FileCheck %s --check-prefix=BUDGET
// RUN: kiln-opt %s --kiln-plan-kv-pool | FileCheck %s --check-prefix=ATTR

// A GQA cache: 8 kv heads of 128 (a 70B-style layer), 4 layers, 4096 context.
!cache = !kiln.kv_cache<layers = 4, capacity = 4096, kv_heads = 8, head_dim = 128, element_type = f16>
func.func @decode(%t: tensor<1xi32>, %p: tensor<1xi32>, %c: !cache) -> !cache {
  return %c : !cache
}

// One sequence at full context: 4096 / 16 = 256 blocks; a block of one
// layer's keys is 16 tokens * 8 kv heads * 128 * 2 bytes = 32768 bytes.
// DEFAULT: kv pool: 67108864 bytes, 256 blocks of 16 tokens
// DEFAULT: layout: [4 layers][keys|values][256 blocks][16 tokens][8 kv heads][128 head dim] f16
// DEFAULT: tables: 1 sequences of 256 blocks
// DEFAULT: block: 32768 bytes per layer, 262144 bytes for keys and values of all layers
// DEFAULT: layer 0: keys at 0, values at 8388608
// DEFAULT: layer 3: keys at 50331648, values at 58720256

// 4 sequences of 1024 tokens in blocks of 32: 4 * 32 = 128 blocks.
// BATCH: kv pool: 67108864 bytes, 128 blocks of 32 tokens
// BATCH: tables: 4 sequences of 32 blocks
// BATCH: block: 65536 bytes per layer

// A budget of 1000000 bytes holds 3 blocks of 262144 bytes (all layers).
// BUDGET: kv pool: 786432 bytes, 3 blocks of 16 tokens
// BUDGET: tables: 1 sequences of 256 blocks

// ATTR: module attributes {kiln.kv_pool = #kiln.kv_pool<block_size = 16, blocks = 256, block_bytes = 32768, layer_bytes = 16777216, bytes = 67108864, sequences = 1, table_blocks = 256>}
