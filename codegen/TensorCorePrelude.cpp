//===- TensorCorePrelude.cpp - mma.sync, ldmatrix and cp.async wrappers ---===//
//
// The tensor-core and asynchronous-copy instructions of sm_80 and later, as
// small wrappers that a template appends to cudaPrelude() when it uses
// them. On a GPU each is one inline PTX instruction; on the emu device each
// calls the warp-collective in runtime/emu/tensor_core_emu.h, which follows
// the PTX ISA's fragment layouts, so a kernel that indexes a fragment wrongly
// computes the same wrong numbers on both.
//
//===----------------------------------------------------------------------===//
#include "codegen/CudaKernel.h"

namespace kiln {

std::string tensorCorePrelude() {
  return R"cuda(
// Tensor cores (mma.sync m16n8k16) and asynchronous copies (cp.async), sm_80
// and later. Fragments, with g = lane / 4 and q = lane % 4 (the PTX ISA's
// "Matrix Fragments for mma.m16n8k16 with floating point type"):
//   A (16 x 16, row-major), 4 registers of 2 halves: register r holds row
//     g + 8 (r & 1), columns 2q + 8 (r >> 1) and the next one;
//   B (16 x 8, k down a column), 2 registers: register r holds rows
//     2q + 8 r and the next one of column g;
//   C, D (16 x 8, f32), 4 floats: element i is row g + 8 (i >> 1), column
//     2q + (i & 1).
// The lower half of a register is the element with the lower index.

#ifndef KILN_CUDA_EMU_H
// A shared-memory address as the PTX .shared state space takes it.
__device__ __forceinline__ unsigned kiln_shared_address(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
#endif

// d += a . b over one m16n8k16 tile: f16 (or, with BF16, bf16) inputs, f32
// products and sums. Every lane of the warp calls it.
template <bool BF16 = false>
__device__ __forceinline__ void kiln_mma(float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
#ifdef KILN_CUDA_EMU_H
  kiln_emu::mmaM16N8K16(d, a, b, BF16);
#else
  if constexpr (BF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, "
        "%3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Two floats as the register of two halves an mma fragment takes (x in the
// lower half).
__device__ __forceinline__ unsigned kiln_pack_half2(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const unsigned *>(&h);
}

// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: N 8 x 8 matrices of
// halves from shared memory, register m of a lane holding matrix m's row
// g, columns 2q and 2q + 1 (TRANS: rows 2q and 2q + 1 of column g). Lanes
// 8m to 8m + 7 give the addresses of matrix m's eight rows (16 bytes each,
// 16-byte aligned); every lane of the warp calls it.
template <int N, bool TRANS = false>
__device__ __forceinline__ void kiln_ldmatrix(unsigned (&r)[N],
                                              const void *row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4");
#ifdef KILN_CUDA_EMU_H
  kiln_emu::ldmatrix<N, TRANS>(r, row);
#else
  const unsigned at = kiln_shared_address(row);
  if constexpr (N == 1 && !TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
                 : "=r"(r[0])
                 : "r"(at));
  else if constexpr (N == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                 : "=r"(r[0])
                 : "r"(at));
  else if constexpr (N == 2 && !TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(at));
  else if constexpr (N == 2)
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
        : "=r"(r[0]), "=r"(r[1])
        : "r"(at));
  else if constexpr (!TRANS)
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, "
                 "%2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
#endif
}

// cp.async.cg.shared.global: 16 bytes from global to shared memory without
// passing through registers or L1 (.cg), or 16 zero bytes when !valid (a
// source size of 0: src is not read). Both addresses 16-byte aligned. It
// lands at a kiln_cp_async_wait that covers its group.
__device__ __forceinline__ void kiln_cp_async16(void *dst, const void *src,
                                                bool valid) {
#ifdef KILN_CUDA_EMU_H
  kiln_emu::cpAsync16(dst, valid ? src : nullptr);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :
               : "r"(kiln_shared_address(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#endif
}

// The same of 8 bytes (cp.async.ca: .cg copies 16 only).
__device__ __forceinline__ void kiln_cp_async8(void *dst, const void *src,
                                               bool valid) {
#ifdef KILN_CUDA_EMU_H
  kiln_emu::cpAsync(dst, valid ? src : nullptr, 8);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;"
               :
               : "r"(kiln_shared_address(dst)), "l"(src), "r"(valid ? 8 : 0)
               : "memory");
#endif
}

// cp.async.commit_group: the copies this thread issued since the last
// commit are one group.
__device__ __forceinline__ void kiln_cp_async_commit() {
#ifdef KILN_CUDA_EMU_H
  kiln_emu::cpAsyncCommit();
#else
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// cp.async.wait_group N: this thread's committed groups but the newest N
// have landed (others' copies need a barrier after it, too).
template <int N> __device__ __forceinline__ void kiln_cp_async_wait() {
#ifdef KILN_CUDA_EMU_H
  kiln_emu::cpAsyncWait(N);
#else
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
)cuda";
}

} // namespace kiln
