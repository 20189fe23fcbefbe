//===- tensor_core_emu.h - mma.sync, ldmatrix, cp.async on the CPU -*- C++
//-*-===//
//
// The warp-collective tensor-core instructions and the asynchronous copy of
// sm_80, as the emu device runs them (included by cuda_emu.h; the prelude's
// kiln_mma / kiln_ldmatrix / kiln_cp_async wrappers call these on emu and
// issue the PTX on a GPU). Each follows the PTX ISA's fragment layouts
// exactly ("Matrix Fragments for mma.m16n8k16 with floating point type";
// "ldmatrix"), so a kernel whose fragment indexing is wrong computes wrong
// numbers here, as it would on a GPU. With
//   g = lane >> 2 (groupID), q = lane % 4 (threadID_in_group):
// A (16 x 16, row-major) register r of a lane holds the two halves at row
//   g + 8 * (r & 1), columns 2q + 8 * (r >> 1) and that + 1;
// B (16 x 8, "col": k runs down a column) register r holds rows
//   2q + 8 * r and that + 1 of column g;
// C, D (16 x 8 f32) element i is row g + 8 * (i >> 1), column 2q + (i & 1);
// the lower 16 bits of a register hold the element with the lower index.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TENSOR_CORE_EMU_H
#define KILN_TENSOR_CORE_EMU_H

namespace kiln_emu {

/// 64-bit words of Block::exchange per thread and collective.
constexpr int kExchangeWords = 8;

/// Thread `linear`'s words of the block's exchange for its warp's
/// collective number `call`. Collectives alternate between two sets, so a
/// warp meets once per collective: a lane that posts for the next one
/// writes the other set while slower lanes still read this one, and none
/// can post twice ahead, since the next meeting waits for every lane.
inline uint64_t *exchangeOf(int linear, unsigned call) {
  std::vector<uint64_t> &x = block->exchange;
  if (x.empty()) // the first collective of this block
    x.assign(block->threads.size() * 2 * kExchangeWords, 0);
  return &x[(size_t(linear) * 2 + (call & 1)) * kExchangeWords];
}

/// An .aligned warp-wide instruction runs with all 32 lanes of the warp or
/// is undefined: the emulator stops, naming the instruction and the warp.
/// Called once the warp has met for its collective number `call`: a lane
/// that posted for it has counted past it (it may since have run on, even
/// to its end); one that has not has left the kernel before it.
inline void requireFullWarp(const char *instruction, unsigned call) {
  const int base = self().linear & ~31;
  const int n = int(block->threads.size());
  for (int i = base; i < base + 32; ++i)
    if (i >= n || block->threads[i].collectives <= call) {
      std::fprintf(stderr,
                   "kiln emu: %s in block (%u, %u, %u), warp %d, without "
                   "lane %d: every lane of the warp must execute it\n",
                   instruction, block->idx.x, block->idx.y, block->idx.z,
                   base / 32, i - base);
      std::abort();
    }
}

inline float halfBits(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

inline float bf16Bits(uint16_t bits) {
  const uint32_t word = uint32_t(bits) << 16; // bf16 is f32's upper half
  float f;
  std::memcpy(&f, &word, sizeof f);
  return f;
}

/// A warp's mma operands as floats, decoded once per collective by the
/// first of its lanes to run after the meeting (fibers of a block take
/// turns on one OS thread, and no lane can post the next collective's
/// fragments before every lane is done with this one).
struct MmaOperands {
  unsigned call = ~0u;
  float a[16][16], b[16][8];
};

inline MmaOperands &mmaOperandsOf(int warp) {
  std::vector<MmaOperands> &w = block->mmaOperands;
  if (w.empty())
    w.resize((block->threads.size() + 31) / 32);
  return w[warp];
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 with C
/// and D in `acc`: acc += A . B, each of the 16 products summed in fp32 in
/// k order onto acc.
inline void mmaM16N8K16(float (&acc)[4], const unsigned (&a)[4],
                        const unsigned (&b)[2], bool bf16) {
  Thread &t = self();
  const unsigned call = t.collectives++;
  uint64_t *mine = exchangeOf(t.linear, call);
  for (int r = 0; r < 4; ++r)
    mine[r] = a[r];
  mine[4] = b[0];
  mine[5] = b[1];
  yield(Wait::Warp);
  requireFullWarp("mma.sync.aligned.m16n8k16", call);
  const int lane = t.linear & 31, base = t.linear & ~31;
  const int g = lane >> 2, q = lane & 3;
  auto element = [&](int fromLane, int word, int k) {
    const uint32_t w = uint32_t(exchangeOf(base + fromLane, call)[word]);
    const uint16_t bits = (k & 1) ? uint16_t(w >> 16) : uint16_t(w);
    return bf16 ? bf16Bits(bits) : halfBits(bits);
  };
  // A[row][k] is in lane (row % 8) * 4 + (k % 8) / 2, register
  // (row >= 8) + 2 * (k >= 8); B[k][col] in lane col * 4 + (k % 8) / 2,
  // register k >= 8 (words 4 and 5).
  auto A = [&](int row, int k) {
    return element((row % 8) * 4 + (k % 8) / 2, (row >= 8) + 2 * (k >= 8), k);
  };
  auto B = [&](int k, int col) {
    return element(col * 4 + (k % 8) / 2, 4 + (k >= 8), k);
  };
  MmaOperands &m = mmaOperandsOf(t.linear / 32);
  if (m.call != call) {
    for (int row = 0; row < 16; ++row)
      for (int k = 0; k < 16; ++k)
        m.a[row][k] = A(row, k);
    for (int k = 0; k < 16; ++k)
      for (int col = 0; col < 8; ++col)
        m.b[k][col] = B(k, col);
    m.call = call;
  }
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * q + (i & 1);
    float sum = acc[i];
    for (int k = 0; k < 16; ++k)
      sum += m.a[row][k] * m.b[k][col];
    acc[i] = sum;
  }
}

/// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: N 8x8 matrices of
/// halves; lanes 8m .. 8m + 7 give the addresses of matrix m's rows (16
/// bytes each, 16-byte aligned). Register m of a lane holds row g, columns
/// 2q and 2q + 1 of matrix m; transposed, rows 2q and 2q + 1 of column g.
template <int N, bool TRANS>
inline void ldmatrix(unsigned (&r)[N], const void *row) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4");
  Thread &t = self();
  const int lane = t.linear & 31, base = t.linear & ~31;
  if (lane < 8 * N && reinterpret_cast<uintptr_t>(row) % 16) {
    std::fprintf(stderr,
                 "kiln emu: ldmatrix in block (%u, %u, %u): lane %d's row "
                 "address %p is not 16-byte aligned\n",
                 block->idx.x, block->idx.y, block->idx.z, lane, row);
    std::abort();
  }
  const unsigned call = t.collectives++;
  exchangeOf(t.linear, call)[0] = reinterpret_cast<uintptr_t>(row);
  yield(Wait::Warp);
  requireFullWarp(
      TRANS ? "ldmatrix.sync.aligned.trans" : "ldmatrix.sync.aligned", call);
  const int g = lane >> 2, q = lane & 3;
  auto rowOf = [&](int m, int i) {
    return reinterpret_cast<const uint16_t *>(
        exchangeOf(base + 8 * m + i, call)[0]);
  };
  for (int m = 0; m < N; ++m) {
    const uint16_t lo = TRANS ? rowOf(m, 2 * q)[g] : rowOf(m, g)[2 * q];
    const uint16_t hi = TRANS ? rowOf(m, 2 * q + 1)[g] : rowOf(m, g)[2 * q + 1];
    r[m] = unsigned(lo) | unsigned(hi) << 16;
  }
}

/// cp.async.{cg,ca}.shared.global of `bytes` (16, or 8 or 4; src null:
/// zero bytes, as a src-size of 0 gives): queued until a wait_group that
/// covers it.
inline void cpAsync(void *dst, const void *src, unsigned bytes) {
  if (reinterpret_cast<uintptr_t>(dst) % bytes ||
      reinterpret_cast<uintptr_t>(src) % bytes) {
    std::fprintf(stderr,
                 "kiln emu: cp.async of %u bytes in block (%u, %u, %u), "
                 "thread %d: %p <- %p is not %u-byte aligned\n",
                 bytes, block->idx.x, block->idx.y, block->idx.z, self().linear,
                 dst, src, bytes);
    std::abort();
  }
  Thread &t = self();
  t.copies.push_back({dst, src, t.committedGroups, bytes});
}
inline void cpAsync16(void *dst, const void *src) { cpAsync(dst, src, 16); }

/// cp.async.commit_group: the copies issued since the last one are a group.
inline void cpAsyncCommit() { ++self().committedGroups; }

/// cp.async.wait_group n: every committed group but the newest n lands.
/// Copies not yet committed stay queued, as the PTX ISA says.
inline void cpAsyncWait(unsigned n) {
  Thread &t = self();
  std::vector<AsyncCopy> pending;
  for (const AsyncCopy &c : t.copies) {
    if (c.group + n < t.committedGroups) {
      if (c.src)
        std::memcpy(c.dst, c.src, c.bytes);
      else
        std::memset(c.dst, 0, c.bytes);
    } else {
      pending.push_back(c);
    }
  }
  t.copies.swap(pending);
}

} // namespace kiln_emu

#endif // KILN_TENSOR_CORE_EMU_H
