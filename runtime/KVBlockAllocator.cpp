//===- KVBlockAllocator.cpp -----------------------------------------------===//
#include "runtime/KVBlockAllocator.h"

#include "absl/strings/str_cat.h"

namespace kiln {

KVBlockAllocator::KVBlockAllocator(int64_t blocks, int64_t blockSize)
    : blockSize_(blockSize) {
  for (int64_t b = blocks - 1; b >= 0; --b)
    free_.push_back(int32_t(b));
}

absl::Status KVBlockAllocator::reserve(int64_t seq, int64_t tokens) {
  Sequence &s = sequences_[seq];
  int64_t needed = (tokens + blockSize_ - 1) / blockSize_;
  int64_t more = needed - int64_t(s.table.size());
  if (more > int64_t(free_.size()))
    return absl::ResourceExhaustedError(
        absl::StrCat("KV pool exhausted: sequence ", seq, " needs ", more,
                     " more blocks of ", blockSize_, " tokens for ", tokens,
                     " tokens, the pool has ", free_.size(), " free"));
  for (int64_t i = 0; i < more; ++i) {
    s.table.push_back(free_.back());
    free_.pop_back();
  }
  s.tokens = std::max(s.tokens, tokens);
  return absl::OkStatus();
}

void KVBlockAllocator::release(int64_t seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end())
    return;
  for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b)
    free_.push_back(*b);
  sequences_.erase(it);
}

const std::vector<int32_t> &KVBlockAllocator::blockTable(int64_t seq) const {
  static const std::vector<int32_t> empty;
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? empty : it->second.table;
}

int64_t KVBlockAllocator::allocatedTokens() const {
  int64_t n = 0;
  for (const auto &[id, s] : sequences_)
    n += int64_t(s.table.size()) * blockSize_;
  return n;
}

int64_t KVBlockAllocator::usedTokens() const {
  int64_t n = 0;
  for (const auto &[id, s] : sequences_)
    n += s.tokens;
  return n;
}

} // namespace kiln
