//===- cuda_emu.h - run kiln's generated CUDA C++ on the CPU ----*- C++ -*-===//
//
// Force-included (-include) before a generated kernel's translation unit
// when the emu device compiles it with the host compiler. Each CUDA thread
// of a block is a fiber (Boost.Context) on one OS thread, so
// __syncthreads, warp shuffles and shared memory keep their CUDA meaning:
// a thread that reaches a barrier yields until every live thread of its
// block (or warp) has reached it. The same text that NVRTC compiles runs
// here unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_CUDA_EMU_H
#define KILN_CUDA_EMU_H

#include <cuda_fp16.h>

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <dlfcn.h>
#include <link.h>

// Built with AddressSanitizer (kiln's sanitized build compiles the kernels
// with it too).
#if defined(__SANITIZE_ADDRESS__)
#define KILN_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_EMU_ASAN 1
#endif
#endif
#ifndef KILN_EMU_ASAN
#define KILN_EMU_ASAN 0
#endif
#if KILN_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// CUDA's qualifiers, for host code: device functions are file-local (each
// kernel is its own shared object), shared memory is per OS thread, which
// runs one block at a time.
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#undef __constant__
#undef __launch_bounds__
#define __global__
#define __device__ static
#define __forceinline__ inline
#define __shared__ static thread_local
#define __constant__ static
#define __launch_bounds__(...)

namespace kiln_emu {

enum class Wait { None, Block, Warp };

/// A cp.async a thread issued and has not yet waited for: it lands (bytes
/// copied, or zeros when src is null) only at a cp.async.wait_group that
/// covers its group, so a kernel that reads the destination before waiting
/// sees the block's poison, not the data (tensor_core_emu.h).
struct AsyncCopy {
  void *dst;
  const void *src;
  unsigned group;
  unsigned bytes; // 16, 8 or 4
};

struct Thread {
  uint3 idx{};
  int linear = 0;
  bool done = false;
  Wait wait = Wait::None;
  boost::context::fiber fiber, sink;
  std::vector<AsyncCopy> copies; // issued, not yet landed
  unsigned committedGroups = 0;  // cp.async.commit_group calls so far
  unsigned collectives = 0;      // tensor-core collectives so far
};

struct MmaOperands; // tensor_core_emu.h

struct Block {
  uint3 idx{};
  dim3 dim, grid;
  std::vector<Thread> threads;
  Thread *current = nullptr;
  std::vector<float> lanes; // one slot per thread, for shuffles
  /// 2 x kExchangeWords per thread, for the warp-collective tensor-core
  /// instructions (fragments, row addresses); sized at their first use.
  std::vector<uint64_t> exchange;
  std::vector<MmaOperands> mmaOperands; // per warp (tensor_core_emu.h)
  unsigned dynamicShared = 0;           // bytes the launch passed
};

inline thread_local Block *block = nullptr;

inline Thread &self() { return *block->current; }

/// KILN_DYNAMIC_SHARED: a launch that passes fewer bytes than the kernel's
/// buffer would fail on a GPU (or have it read past its shared memory).
inline void requireDynamicShared(unsigned bytes) {
  if (block->dynamicShared < bytes) {
    std::fprintf(stderr,
                 "kiln emu: the kernel's dynamic shared memory is %u bytes, "
                 "its launch passed %u\n",
                 bytes, block->dynamicShared);
    std::abort();
  }
}

/// Fiber stacks, kept for the next block: a block of 256 threads would
/// otherwise allocate and free 16 MiB of stacks, which the C library hands
/// back to the kernel and faults in again, block after block. One list for
/// the process (an inline variable: every kernel object shares it), at
/// most kMaxKeptStacks long.
constexpr size_t kStackBytes = 64 * 1024, kMaxKeptStacks = 2048;
struct KeptStacks {
  std::mutex mutex;
  std::vector<boost::context::stack_context> free;
  ~KeptStacks() { // so that a leak checker sees none
    for (boost::context::stack_context &sc : free)
      boost::context::fixedsize_stack(kStackBytes).deallocate(sc);
  }
};
inline KeptStacks keptStacks;

/// A Boost.Context stack allocator over keptStacks.
struct ReusedStack {
  boost::context::stack_context allocate() {
    {
      std::lock_guard<std::mutex> lock(keptStacks.mutex);
      if (!keptStacks.free.empty()) {
        boost::context::stack_context sc = keptStacks.free.back();
        keptStacks.free.pop_back();
#if KILN_EMU_ASAN
        // A reused stack may still carry the last fiber's frame markings.
        __asan_unpoison_memory_region(static_cast<char *>(sc.sp) - sc.size,
                                      sc.size);
#endif
        return sc;
      }
    }
    return boost::context::fixedsize_stack(kStackBytes).allocate();
  }
  void deallocate(boost::context::stack_context &sc) {
    {
      std::lock_guard<std::mutex> lock(keptStacks.mutex);
      if (keptStacks.free.size() < kMaxKeptStacks) {
        keptStacks.free.push_back(sc);
        return;
      }
    }
    boost::context::fixedsize_stack(kStackBytes).deallocate(sc);
  }
};

/// Back to the scheduler until the barrier this thread waits at opens.
inline void yield(Wait why) {
  Thread &t = self();
  t.wait = why;
  t.sink = std::move(t.sink).resume();
}

/// The order the scheduler runs a block's ready threads in, from
/// KILN_EMU_ORDER: forward (by index, the default), reverse, or shuffle (a
/// fixed pseudo-random order per block; EmuDevice refuses other values).
/// A kernel without races computes the same in every order; one whose
/// threads read shared memory another wrote without a barrier between gets
/// other numbers when the order turns, which the tests then show (the GPU
/// promises no order at all).
enum class Order { Forward, Reverse, Shuffle };
inline Order order() {
  static const Order o = [] {
    const char *e = std::getenv("KILN_EMU_ORDER");
    std::string v = e ? e : "";
    if (v == "reverse")
      return Order::Reverse;
    if (v == "shuffle")
      return Order::Shuffle;
    return Order::Forward;
  }();
  return o;
}

/// Thread indices of a block of `n` in the order the scheduler visits them.
inline std::vector<int> visitOrder(int n, const uint3 &where) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = i;
  if (order() == Order::Reverse) {
    std::reverse(v.begin(), v.end());
  } else if (order() == Order::Shuffle) {
    // Fisher-Yates with a splitmix-style hash: the same order every run.
    uint64_t z = (uint64_t(where.x) * 73856093u) ^
                 (uint64_t(where.y) * 19349663u) ^
                 (uint64_t(where.z) * 83492791u) ^ 0x9e3779b97f4a7c15ull;
    for (int i = n - 1; i > 0; --i) {
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      std::swap(v[i], v[int(z % uint64_t(i + 1))]);
    }
  }
  return v;
}

// Shared memory: every __shared__ variable of a kernel is a thread_local
// of its shared object, so the calling thread's instance of the object's
// TLS segment holds them all (with `block`, and the anchor below). On a GPU
// a block starts with whatever its SM's shared memory held; here each block
// starts with every byte 0xFF (NaN as f32 and f16, -1 as an integer), so a
// kernel that reads shared memory it did not write (masking a tile's
// padding by multiplying with zero, say) shows it in its numbers instead of
// reading the last block's finite values.
static thread_local char tlsAnchor;
static void tlsAnchorFunction() {}

/// This object's TLS segment: its size, and where the anchor lies in it.
struct TlsLayout {
  size_t size = 0;
  ptrdiff_t anchor = -1;
};
static const TlsLayout &tlsLayout() {
  static const TlsLayout layout = [] {
    tlsAnchor = 0; // the segment exists on this thread from here on
    Dl_info self;
    TlsLayout l;
    if (!dladdr(reinterpret_cast<void *>(&tlsAnchorFunction), &self))
      return l;
    struct Search {
      void *base;
      TlsLayout *out;
    } search{self.dli_fbase, &l};
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *data) {
          auto *s = static_cast<Search *>(data);
          if (reinterpret_cast<void *>(info->dlpi_addr) != s->base ||
              !info->dlpi_tls_data)
            return 0;
          for (int i = 0; i < info->dlpi_phnum; ++i)
            if (info->dlpi_phdr[i].p_type == PT_TLS)
              s->out->size = info->dlpi_phdr[i].p_memsz;
          s->out->anchor =
              &tlsAnchor - static_cast<char *>(info->dlpi_tls_data);
          return 1;
        },
        &search);
    return l;
  }();
  return layout;
}

/// Fills this thread's shared memory of this kernel with 0xFF, but for the
/// emulator's own variables in the segment.
static void poisonSharedMemory() {
  const TlsLayout &l = tlsLayout();
  if (l.anchor < 0)
    return;
  char *begin = &tlsAnchor - l.anchor, *end = begin + l.size;
  char *keep = reinterpret_cast<char *>(&block);
  for (char *p = begin; p < end; ++p)
    if (p != &tlsAnchor && (p < keep || p >= keep + sizeof block))
      *p = char(0xFF);
}

/// Runs one block of `body` to completion, scheduling its threads.
template <typename Body> void runBlock(Block &b, Body &body) {
  poisonSharedMemory();
  const int n = int(b.dim.x * b.dim.y * b.dim.z);
  b.threads = std::vector<Thread>(n);
  b.lanes.assign(n, 0.0f);
  for (int i = 0; i < n; ++i) {
    Thread &t = b.threads[i];
    t.linear = i;
    t.idx = {unsigned(i % b.dim.x), unsigned(i / b.dim.x % b.dim.y),
             unsigned(i / (b.dim.x * b.dim.y))};
    t.fiber = boost::context::fiber(std::allocator_arg, ReusedStack(),
                                    [&t, &body](boost::context::fiber &&sink) {
                                      t.sink = std::move(sink);
                                      body();
                                      t.done = true;
                                      return std::move(t.sink);
                                    });
  }
  const int warps = (n + 31) / 32;
  const std::vector<int> visit = visitOrder(n, b.idx);
  for (;;) {
    bool ran = false, live = false;
    for (int i : visit)
      if (Thread &t = b.threads[i]; !t.done && t.wait == Wait::None) {
        b.current = &t;
        t.fiber = std::move(t.fiber).resume();
        ran = true;
      }
    for (Thread &t : b.threads)
      live = live || !t.done;
    if (!live)
      return;
    if (ran)
      continue;
    // Nobody can run: open every barrier that all its live threads reached.
    bool opened = false;
    bool allAtBlock = true;
    for (Thread &t : b.threads)
      if (!t.done && t.wait != Wait::Block)
        allAtBlock = false;
    if (allAtBlock) {
      for (Thread &t : b.threads)
        t.wait = Wait::None;
      continue;
    }
    for (int w = 0; w < warps; ++w) {
      bool all = true, any = false;
      for (int i = w * 32; i < std::min(n, w * 32 + 32); ++i)
        if (!b.threads[i].done) {
          any = true;
          all = all && b.threads[i].wait == Wait::Warp;
        }
      if (any && all) {
        for (int i = w * 32; i < std::min(n, w * 32 + 32); ++i)
          b.threads[i].wait = Wait::None;
        opened = true;
      }
    }
    if (!opened) {
      std::fprintf(stderr,
                   "kiln emu: deadlock in block (%u, %u, %u): threads "
                   "wait at barriers that cannot open\n",
                   b.idx.x, b.idx.y, b.idx.z);
      std::abort();
    }
  }
}

/// Runs every block of the grid: OS threads take blocks one at a time, as
/// SMs would, so blocks really run concurrently (and cross-block protocols
/// such as split-KV's atomic ticket are exercised), each given the
/// launch's `dynamicShared` bytes (what KILN_DYNAMIC_SHARED checks).
/// KILN_EMU_THREADS caps the threads.
template <typename Body>
void launch(dim3 grid, dim3 dim, unsigned dynamicShared, Body body) {
  const unsigned total = grid.x * grid.y * grid.z;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char *cap = std::getenv("KILN_EMU_THREADS"); cap && *cap)
    threads = std::max(1, std::atoi(cap));
  threads = std::min(threads, total);
  std::atomic<unsigned> next{0};
  auto worker = [&] {
    for (unsigned i; (i = next.fetch_add(1)) < total;) {
      Block b;
      b.idx = {i % grid.x, i / grid.x % grid.y, i / (grid.x * grid.y)};
      b.dim = dim;
      b.grid = grid;
      b.dynamicShared = dynamicShared;
      block = &b;
      runBlock(b, body);
      block = nullptr;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
}

/// Calls a kernel with its parameters from an array of pointers.
template <typename... A, std::size_t... I>
void callWith(void (*f)(A...), void **args, std::index_sequence<I...>) {
  f(static_cast<A>(args[I])...);
}
template <typename... A> void call(void (*f)(A...), void **args) {
  callWith(f, args, std::index_sequence_for<A...>{});
}

} // namespace kiln_emu

#define threadIdx (kiln_emu::self().idx)
#define blockIdx (kiln_emu::block->idx)
#define blockDim (kiln_emu::block->dim)
#define gridDim (kiln_emu::block->grid)

inline void __syncthreads() { kiln_emu::yield(kiln_emu::Wait::Block); }

namespace kiln_emu {
/// The bits of lane `from(lane)`'s value: its own when that lane number is
/// outside the warp (as CUDA keeps it for __shfl_down_sync past lane 31);
/// a NaN's bits when the lane is inside the warp but not running (it has
/// returned, or the block ends before it), whose value CUDA leaves
/// undefined, so that a kernel that uses one shows it in its numbers.
/// Every lane posts, the warp meets, every lane reads, the warp meets again
/// (so no lane overwrites a value not yet read). An 8-byte value moves as
/// two 4-byte halves, as CUDA's 64-bit shuffles do.
template <typename T, typename From> T shuffle(T v, From from) {
  static_assert(sizeof(T) == sizeof(float) || sizeof(T) == 2 * sizeof(float));
  if constexpr (sizeof(T) == 2 * sizeof(float)) {
    uint32_t half[2];
    std::memcpy(half, &v, sizeof v);
    half[0] = shuffle(half[0], from);
    half[1] = shuffle(half[1], from);
    std::memcpy(&v, half, sizeof v);
    return v;
  } else {
    Thread &t = self();
    std::vector<float> &lanes = block->lanes;
    std::memcpy(&lanes[t.linear], &v, sizeof v);
    yield(Wait::Warp);
    const int src = from(t.linear & 31);
    const int at = (t.linear & ~31) | (src & 31);
    T r = v;
    if (src >= 0 && src < 32) {
      if (at < int(lanes.size()) && !block->threads[at].done) {
        std::memcpy(&r, &lanes[at], sizeof r);
      } else {
        const uint32_t undefined = 0x7fc00000u; // a quiet NaN
        std::memcpy(&r, &undefined, sizeof r);
      }
    }
    yield(Wait::Warp);
    return r;
  }
}

/// One bit per live lane of the warp whose predicate holds, and the live
/// lanes themselves.
inline std::pair<unsigned, unsigned> vote(bool predicate) {
  Thread &t = self();
  std::vector<float> &lanes = block->lanes;
  lanes[t.linear] = predicate ? 1.0f : 0.0f;
  yield(Wait::Warp);
  const int base = t.linear & ~31, n = int(lanes.size());
  unsigned ballot = 0, live = 0;
  for (int i = base; i < std::min(n, base + 32); ++i)
    if (!block->threads[i].done) {
      live |= 1u << (i - base);
      if (lanes[i] != 0.0f)
        ballot |= 1u << (i - base);
    }
  yield(Wait::Warp);
  return {ballot, live};
}
} // namespace kiln_emu

template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return kiln_emu::shuffle(v, [&](int lane) { return lane ^ mask; });
}
template <typename T> T __shfl_sync(unsigned, T v, int src) {
  // CUDA takes the source lane modulo the warp's width.
  return kiln_emu::shuffle(v, [&](int) { return src & 31; });
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned delta) {
  return kiln_emu::shuffle(v, [&](int lane) { return lane + int(delta); });
}
inline unsigned __ballot_sync(unsigned, int p) {
  return kiln_emu::vote(p != 0).first;
}
inline int __any_sync(unsigned, int p) {
  return kiln_emu::vote(p != 0).first != 0;
}
inline int __all_sync(unsigned, int p) {
  auto [ballot, live] = kiln_emu::vote(p != 0);
  return ballot == live;
}

// Atomics are the host's: blocks run on several OS threads at once.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline int atomicAdd(int *p, int v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline float atomicAdd(float *p, float v) {
  float old, sum;
  __atomic_load(p, &old, __ATOMIC_SEQ_CST);
  do
    sum = old + v;
  while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST));
  return old;
}
inline int atomicMax(int *p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (old < v && !__atomic_compare_exchange_n(
                        p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
    ;
  return old;
}
inline unsigned atomicCAS(unsigned *p, unsigned compare, unsigned v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return compare;
}
inline float __ldcg(const float *p) { return *p; }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
using std::max;
using std::min;

#include "tensor_core_emu.h"

#endif // KILN_CUDA_EMU_H
