//===- GgmlBlocks.h - ggml's tensor types and their blocks ------*- C++ -*-===//
//
// A ggml tensor stores its contiguous dimension (ne[0]) in blocks: a block
// of `blockElements` values takes `blockBytes` bytes (1 value for the plain
// types). dequantize() turns blocks into float32 exactly as llama.cpp's
// ggml-quants.c dequantize_row_* does, operation for operation (float32
// products, no fused multiply-add), so that every value equals llama.cpp's
// and the `gguf` Python package's. docs/gguf.md draws each block.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_GGMLBLOCKS_H
#define KILN_RUNTIME_GGMLBLOCKS_H

#include "runtime/DType.h"

#include <cstdint>
#include <optional>

namespace kiln {

/// ggml's type ids (ggml.h's enum ggml_type).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

struct GgmlTypeInfo {
  const char *name;      // "Q4_K", as llama.cpp prints it
  int64_t blockElements; // values a block holds
  int64_t blockBytes;    // bytes a block takes
};

/// The type `id` names; nullopt for an id ggml does not define.
std::optional<GgmlTypeInfo> ggmlTypeInfo(uint32_t id);
inline GgmlTypeInfo ggmlTypeInfo(GgmlType t) {
  return *ggmlTypeInfo(uint32_t(t));
}

/// Bytes of `elements` values of type `t` (a whole number of blocks);
/// nullopt when elements is not a multiple of the block or the bytes
/// overflow.
std::optional<uint64_t> ggmlBytes(GgmlType t, int64_t elements);

/// Dequantizes `elements` values (a whole number of blocks) of a type
/// dtypeOfGgml knows from `blocks` into out[elements].
void ggmlDequantize(GgmlType t, const uint8_t *blocks, int64_t elements,
                    float *out);

/// A quantized block as groups of ggmlGroupSize values (16 for Q6_K, 32
/// for the others): each value's unsigned code into codes[blockElements]
/// and each group's scale and min into scales[] and mins[], so that value
/// = code * scale - min (exactly: Q4_0's (q - 8) d has min 8 d). For the
/// dequantizable block types (dtypeOfGgml).
void ggmlBlockGroups(GgmlType t, const uint8_t *block, uint8_t *codes,
                     float *scales, float *mins);
/// Values a group of ggmlBlockGroups holds.
int ggmlGroupSize(GgmlType t);
/// The code of zero where llama.cpp computes (code - zero) * scale (Q4_0 8,
/// Q5_0 16, Q8_0 128, Q6_K 32); -1 where it computes code * scale - min.
int ggmlZeroCode(GgmlType t);

/// The DType of a ggml type kiln reads (F32, F16, BF16 and the
/// dequantizable block types); nullopt for the others.
std::optional<DType> dtypeOfGgml(GgmlType t);
/// The ggml type of a block DType; nullopt for the plain types.
std::optional<GgmlType> ggmlTypeOf(DType t);

} // namespace kiln

#endif // KILN_RUNTIME_GGMLBLOCKS_H
