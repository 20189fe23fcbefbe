//===- KVBlockAllocator.h - block tables over the paged KV pool -*- C++ -*-===//
#ifndef KILN_RUNTIME_KVBLOCKALLOCATOR_H
#define KILN_RUNTIME_KVBLOCKALLOCATOR_H

#include "absl/status/status.h"

#include <cstdint>
#include <map>
#include <vector>

namespace kiln {

/// Hands out the blocks of the KV pool (#kiln.kv_pool) to sequences. Each
/// sequence has a block table: entry i is the pool block that holds its
/// tokens [i * blockSize, (i + 1) * blockSize) in every layer. A sequence
/// wastes less than one block, whatever its length.
class KVBlockAllocator {
public:
  KVBlockAllocator(int64_t blocks, int64_t blockSize);

  /// Grows sequence `seq` to hold `tokens` tokens. When the pool cannot, it
  /// fails with a clear error and the sequence keeps what it had: the other
  /// sequences are not affected.
  absl::Status reserve(int64_t seq, int64_t tokens);
  /// Returns the sequence's blocks to the pool.
  void release(int64_t seq);

  /// The block table of `seq` (empty for an unknown sequence).
  const std::vector<int32_t> &blockTable(int64_t seq) const;
  int64_t freeBlocks() const { return int64_t(free_.size()); }
  int64_t blockSize() const { return blockSize_; }
  /// Token slots that sequences hold, and the ones they asked for.
  int64_t allocatedTokens() const;
  int64_t usedTokens() const;

private:
  struct Sequence {
    int64_t tokens = 0;
    std::vector<int32_t> table;
  };
  int64_t blockSize_;
  std::vector<int32_t> free_; // a stack: the lowest block ids come out first
  std::map<int64_t, Sequence> sequences_;
};

} // namespace kiln

#endif // KILN_RUNTIME_KVBLOCKALLOCATOR_H
