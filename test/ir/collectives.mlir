// Tensor parallelism's ops and attributes (docs/tensor-parallel.md) parse,
// verify and print back; the verifiers refuse what cannot be one rank's.
// RUN: kiln-opt %s -split-input-file | kiln-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @one_rank
// CHECK: kiln.weight "model.layers.0.self_attn.o_proj.weight" shard <axis = 1, parts = 4> : tensor<64x16xf16>
// CHECK: kiln.all_reduce %{{.*}} residual(%{{.*}}) ranks = 4 : tensor<?x64xf16>, tensor<?x64xf16>
// CHECK: kiln.all_reduce %{{.*}} ranks = 4 : tensor<?x64xf16>
// CHECK: kiln.packed_weight "q+k" = ["q.weight", "k.weight"] rows [16, 16] shard_parts [4, 2] : tensor<32x64xf16>
// CHECK: kiln.all_gather %{{.*}} ranks = 4 : tensor<?x80xf32> -> tensor<?x320xf32>
func.func @one_rank(%a: tensor<?x16xf16>, %h: tensor<?x64xf16>, %l: tensor<?x80xf32>) -> tensor<?x320xf32> {
  %w = kiln.weight "model.layers.0.self_attn.o_proj.weight" shard <axis = 1, parts = 4> : tensor<64x16xf16>
  %o = kiln.linear %a, %w : tensor<?x16xf16>, tensor<64x16xf16> -> tensor<?x64xf16>
  %s = kiln.all_reduce %o residual(%h) ranks = 4 : tensor<?x64xf16>, tensor<?x64xf16>
  %t = kiln.all_reduce %s ranks = 4 : tensor<?x64xf16>
  %p = kiln.packed_weight "q+k" = ["q.weight", "k.weight"] rows [16, 16] shard_parts [4, 2] : tensor<32x64xf16>
  %g = kiln.all_gather %l ranks = 4 : tensor<?x80xf32> -> tensor<?x320xf32>
  return %g : tensor<?x320xf32>
}
