// The KV pool planner refuses what it cannot plan, with the reason.
// RUN: not kiln-opt %s --kiln-plan-kv-pool="max-context=8192" 2>&1 | FileCheck %s --check-prefix=CONTEXT
// RUN: not kiln-opt %s --kiln-plan-kv-pool="memory-budget=1000" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not kiln-opt %s --kiln-plan-kv-pool="block-size=0" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: echo "func.func @f() { return }" | not kiln-opt --kiln-plan-kv-pool 2>&1 | FileCheck %s --check-prefix=NOCACHE

!cache = !kiln.kv_cache<layers = 4, capacity = 4096, kv_heads = 8, head_dim = 128, element_type = f16>
func.func @decode(%c: !cache) -> !cache {
  return %c : !cache
}

// CONTEXT: error: kiln-plan-kv-pool: max-context 8192 exceeds the model's context of 4096 tokens
// BUDGET: error: kiln-plan-kv-pool: a memory budget of 1000 bytes holds no block (one block for all layers takes 262144 bytes)
// BLOCK: error: kiln-plan-kv-pool: block-size and max-batch must be positive, memory-budget not negative
// NOCACHE: error: kiln-plan-kv-pool: the module has no !kiln.kv_cache argument to plan for
