// The discardable kiln.* attributes: each of its kind and in its place
// (KilnDialect::verifyOperationAttribute), so that passes and emitters can
// read a present one without checking its kind.
// RUN: kiln-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Every attribute where the frontend and the passes put it.
// CHECK-LABEL: module attributes {kiln.arena_bytes = 64 : i64
module attributes {kiln.arena_bytes = 64 : i64, kiln.arena_peak_bytes = 64 : i64, kiln.config = {hidden_size = 64 : i64}, kiln.kv_pool = #kiln.kv_pool<block_size = 16, blocks = 4, block_bytes = 512, layer_bytes = 4096, bytes = 8192, sequences = 1, table_blocks = 4>, kiln.model = "tiny"} {
  // CHECK: func.func @decode
  // CHECK-SAME: kiln.phase = #kiln.phase<decode>
  func.func @decode(%t: tensor<1xi32>) -> tensor<1x64xf16> attributes {kiln.arena_bytes = 128 : i64, kiln.arena_peak_bytes = 128 : i64, kiln.arena_tokens = 1 : i64, kiln.phase = #kiln.phase<decode>} {
    %w = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
    // CHECK: kiln.embedding
    // CHECK-SAME: kiln.arena_offsets = array<i64: 0>, kiln.kernel = "decode.embed_tokens", kiln.name = "embed_tokens"
    %h = kiln.embedding %w[%t] {kiln.arena_offsets = array<i64: 0>, kiln.kernel = "decode.embed_tokens", kiln.name = "embed_tokens"} : tensor<320x64xf16>, tensor<1xi32> -> tensor<1x64xf16>
    return %h : tensor<1x64xf16>
  }
}

// -----

// expected-error @+1 {{'kiln.phase' must be a #kiln.phase on a function}}
module attributes {kiln.phase = #kiln.phase<prefill>} {}

// -----

func.func @phase_of_the_wrong_kind() attributes {kiln.phase = "prefill"} {
  // expected-error @-1 {{'kiln.phase' must be a #kiln.phase on a function}}
  return
}

// -----

func.func @kernel_name_on_a_weight() {
  // expected-error @+1 {{'kiln.kernel' must be a non-empty string on a kernel op}}
  %w = kiln.weight "w" {kiln.kernel = "decode.w"} : tensor<4x4xf16>
  return
}

// -----

func.func @empty_name(%t: tensor<1xi32>) {
  %w = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  // expected-error @+1 {{'kiln.name' must be a non-empty string on a kernel op}}
  %h = kiln.embedding %w[%t] {kiln.name = ""} : tensor<320x64xf16>, tensor<1xi32> -> tensor<1x64xf16>
  return
}

// -----

func.func @offsets_short_of_the_results(%t: tensor<1xi32>) {
  %w = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  // expected-error @+1 {{'kiln.arena_offsets' must be an array of one offset per result}}
  %h = kiln.embedding %w[%t] {kiln.arena_offsets = array<i64>} : tensor<320x64xf16>, tensor<1xi32> -> tensor<1x64xf16>
  return
}

// -----

func.func @negative_offset(%t: tensor<1xi32>) {
  %w = kiln.weight "model.embed_tokens.weight" : tensor<320x64xf16>
  // expected-error @+1 {{'kiln.arena_offsets' must hold offsets of 0 and up (-1: not in the arena)}}
  %h = kiln.embedding %w[%t] {kiln.arena_offsets = array<i64: -8>} : tensor<320x64xf16>, tensor<1xi32> -> tensor<1x64xf16>
  return
}

// -----

// expected-error @+1 {{'kiln.arena_bytes' must be a non-negative i64 on the module or a function}}
module attributes {kiln.arena_bytes = -1 : i64} {}

// -----

// expected-error @+1 {{'kiln.kv_pool' must have positive sizes}}
module attributes {kiln.kv_pool = #kiln.kv_pool<block_size = 0, blocks = 4, block_bytes = 512, layer_bytes = 4096, bytes = 8192, sequences = 1, table_blocks = 4>} {}

// -----

// expected-error @+1 {{'kiln.kv_pool' holds less than a layer's keys and values (layer_bytes < 2 * blocks * block_bytes)}}
module attributes {kiln.kv_pool = #kiln.kv_pool<block_size = 16, blocks = 4, block_bytes = 512, layer_bytes = 1024, bytes = 2048, sequences = 1, table_blocks = 4>} {}

// -----

// expected-error @+1 {{'kiln.model' must be a string on the module}}
module attributes {kiln.model = 7 : i64} {}

// -----

// expected-error @+1 {{unknown attribute 'kiln.kernal' in the kiln namespace}}
module attributes {kiln.kernal = "typo"} {}
