// RUN: kiln-opt %s --kiln-plan-buffers -kiln-test-print-buffer-plan -o /dev/null | FileCheck %s
// RUN: kiln-opt %s --kiln-plan-buffers | FileCheck %s --check-prefix=ATTR

// A chain a -> b -> c -> d of equal [4, 64] f16 tensors (512 bytes each):
// at most two are alive at once, so two slots serve all four.
// CHECK-LABEL: @chain: arena 1024 bytes, peak live 1024 bytes, ratio 1.000
// CHECK-NEXT: %[[A:.*]] kiln.silu at 0
// CHECK-NEXT: %{{.*}} kiln.silu at 512
// CHECK-NEXT: %{{.*}} kiln.silu at 0
// CHECK-NEXT: %{{.*}} kiln.silu at 512
func.func @chain(%x: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %a = kiln.silu %x : tensor<4x64xf16>
  %b = kiln.silu %a : tensor<4x64xf16>
  %c = kiln.silu %b : tensor<4x64xf16>
  %d = kiln.silu %c : tensor<4x64xf16>
  return %d : tensor<4x64xf16>
}

// A residual stays alive across the block: the others reuse what is free
// around it, and a value never shares bytes with its own operands.
// CHECK-LABEL: @residual: arena 1536 bytes, peak live 1536 bytes, ratio 1.000
// CHECK-NEXT: %[[H:.*]] kiln.silu at 0
// CHECK-NEXT: %{{.*}} kiln.silu at 512
// CHECK-NEXT: %{{.*}} kiln.silu at 1024
// CHECK-NEXT: %{{.*}} kiln.add at 512
func.func @residual(%x: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %h = kiln.silu %x : tensor<4x64xf16>
  %a = kiln.silu %h : tensor<4x64xf16>
  %b = kiln.silu %a : tensor<4x64xf16>
  %r = kiln.add %h, %b : tensor<4x64xf16>
  return %r : tensor<4x64xf16>
}

// Weights and function arguments take no arena bytes.
// CHECK-LABEL: @weights: arena 512 bytes
// CHECK-NOT: kiln.weight at
func.func @weights(%x: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %w = kiln.weight "w" : tensor<64x64xf16>
  %y = kiln.linear %x, %w : tensor<4x64xf16>, tensor<64x64xf16> -> tensor<4x64xf16>
  return %y : tensor<4x64xf16>
}

// ATTR: module attributes {kiln.arena_bytes = 1536 : i64, kiln.arena_peak_bytes = 1536 : i64}
// ATTR: func.func @chain{{.*}} attributes {kiln.arena_bytes = 1024 : i64, kiln.arena_peak_bytes = 1024 : i64, kiln.arena_tokens = 2048 : i64}
// ATTR: kiln.silu %{{.*}} {kiln.arena_offsets = array<i64: 0>}
