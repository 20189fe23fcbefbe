// The verifiers of tensor parallelism's ops and attributes name the op and
// the fault.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics

func.func @one_rank_is_no_reduction(%x: tensor<?x64xf16>) {
  // expected-error @+1 {{'kiln.all_reduce' op needs at least 2 ranks, not 1}}
  %s = kiln.all_reduce %x ranks = 1 : tensor<?x64xf16>
  return
}

// -----

func.func @residual_of_another_type(%x: tensor<?x64xf16>, %h: tensor<?x64xf32>) {
  // expected-error @+1 {{'kiln.all_reduce' op residual type 'tensor<?x64xf32>' differs from the input type 'tensor<?x64xf16>'}}
  %s = kiln.all_reduce %x residual(%h) ranks = 2 : tensor<?x64xf16>, tensor<?x64xf32>
  return
}

// -----

func.func @gather_of_wrong_width(%x: tensor<?x80xf32>) {
  // expected-error @+1 {{'kiln.all_gather' op result has 300 columns, not 4 ranks x 80}}
  %g = kiln.all_gather %x ranks = 4 : tensor<?x80xf32> -> tensor<?x300xf32>
  return
}

// -----

func.func @gather_changes_type(%x: tensor<?x80xf32>) {
  // expected-error @+1 {{'kiln.all_gather' op result element type 'f16' differs from the input's 'f32'}}
  %g = kiln.all_gather %x ranks = 4 : tensor<?x80xf32> -> tensor<?x320xf16>
  return
}

// -----

func.func @shard_axis_of_a_vector() {
  // expected-error @+1 {{'kiln.weight' op weight 'model.norm.weight' has rank 1: no axis 1 to shard}}
  %w = kiln.weight "model.norm.weight" shard <axis = 1, parts = 2> : tensor<64xf16>
  return
}

// -----

func.func @shard_axis_two() {
  // expected-error @+1 {{#kiln.shard: the axis is 0 (rows) or 1 (columns), not 2}}
  %w = kiln.weight "w" shard <axis = 2, parts = 2> : tensor<64x64xf16>
  return
}

// -----

func.func @shard_of_no_parts() {
  // expected-error @+1 {{#kiln.shard: needs at least one part, not 0}}
  %w = kiln.weight "w" shard <axis = 0, parts = 0> : tensor<64x64xf16>
  return
}

// -----

func.func @packed_parts_per_source() {
  // expected-error @+1 {{'kiln.packed_weight' op needs one shard_parts entry per source}}
  %p = kiln.packed_weight "q+k" = ["q.weight", "k.weight"] rows [16, 16] shard_parts [4] : tensor<32x64xf16>
  return
}

// -----

// expected-error @+1 {{'kiln.tensor_parallel' must be an i64 of at least 2 ranks on the module}}
module attributes {kiln.tensor_parallel = 1 : i64} {
}
