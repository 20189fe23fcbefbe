//===- SentencePieceBpe.cpp - Llama's tokenizer without libsentencepiece --===//
#include "runtime/SentencePieceBpe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>
#include <sstream>

namespace kiln {
namespace {

// sentencepiece_model.proto's field numbers.
enum : int {
  kModelPieces = 1,
  kModelTrainer = 2,
  kModelNormalizer = 3,
  kPieceText = 1,
  kPieceScore = 2,
  kPieceType = 3,
  kTrainerModelType = 3,
  kTrainerSuffix = 24,
  kTrainerByteFallback = 35,
  kTrainerUnk = 40,
  kTrainerBos = 41,
  kTrainerEos = 42,
  kTrainerUnkSurface = 44,
  kNormalizerName = 1,
  kNormalizerCharsmap = 2,
  kNormalizerDummyPrefix = 3,
  kNormalizerRemoveSpaces = 4,
  kNormalizerEscapeSpaces = 5,
};
constexpr int kBpe = 2;
const std::string kSpace = "\xE2\x96\x81"; // U+2581, SentencePiece's space

/// Protobuf's wire format, read: each field of a message in turn.
class Wire {
public:
  explicit Wire(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }
  /// The next field's number and wire type; false when malformed.
  bool next(int &field, int &wire) {
    uint64_t key;
    if (!varint(key))
      return false;
    field = int(key >> 3), wire = int(key & 7);
    return field > 0;
  }
  bool varint(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty())
        return false;
      uint8_t b = uint8_t(rest_[0]);
      rest_.remove_prefix(1);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  }
  bool bytes(std::string_view &out) {
    uint64_t n;
    if (!varint(n) || n > rest_.size())
      return false;
    out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  bool fixed32(uint32_t &v) {
    if (rest_.size() < 4)
      return false;
    std::memcpy(&v, rest_.data(), 4);
    rest_.remove_prefix(4);
    return true;
  }
  /// Skips a field of wire type `wire`.
  bool skip(int wire) {
    uint64_t v;
    uint32_t f;
    std::string_view b;
    switch (wire) {
    case 0:
      return varint(v);
    case 1:
      if (rest_.size() < 8)
        return false;
      rest_.remove_prefix(8);
      return true;
    case 2:
      return bytes(b);
    case 5:
      return fixed32(f);
    default:
      return false;
    }
  }

private:
  std::string_view rest_;
};

/// SentencePiece's OneCharLen: a UTF-8 character's length by its lead byte.
size_t charLength(char lead) {
  return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(uint8_t(lead)) >> 4];
}

/// Whether `s` starts with a valid UTF-8 character; its length in `n`
/// (1 when it does not).
bool validChar(std::string_view s, size_t &n) {
  n = 1;
  uint8_t c = uint8_t(s[0]);
  if (c < 0x80)
    return true;
  size_t len = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
  if (len == 0 || s.size() < len)
    return false;
  uint32_t cp = c & (0xFF >> (len + 1));
  for (size_t i = 1; i < len; ++i) {
    if ((uint8_t(s[i]) & 0xC0) != 0x80)
      return false;
    cp = cp << 6 | (uint8_t(s[i]) & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return false;
  n = len;
  return true;
}

} // namespace

absl::StatusOr<std::unique_ptr<SentencePieceBpe>>
SentencePieceBpe::open(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be read"));
  std::stringstream s;
  s << in.rdbuf();
  return fromProto(s.str(), path);
}

absl::StatusOr<std::unique_ptr<SentencePieceBpe>>
SentencePieceBpe::fromProto(const std::string &proto, const std::string &what) {
  auto fault = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not a SentencePiece model kiln-run reads (", why, ")"));
  };
  std::unique_ptr<SentencePieceBpe> t(new SentencePieceBpe());
  int modelType = 1; // unigram, the proto's default
  bool suffix = false;
  std::string normalizer, charsmap;
  Wire model(proto);
  int field, wire;
  while (!model.done()) {
    if (!model.next(field, wire))
      return fault("malformed");
    std::string_view sub;
    if (wire != 2 || (field != kModelPieces && field != kModelTrainer &&
                      field != kModelNormalizer)) {
      if (!model.skip(wire))
        return fault("malformed");
      continue;
    }
    if (!model.bytes(sub))
      return fault("malformed");
    Piece piece; // (a ModelProto.SentencePiece)
    Wire r(sub);
    int f, w;
    while (!r.done()) {
      if (!r.next(f, w))
        return fault("malformed");
      uint64_t v = 0;
      uint32_t f32 = 0;
      std::string_view b;
      bool ok = w == 0   ? r.varint(v)
                : w == 2 ? r.bytes(b)
                : w == 5 ? r.fixed32(f32)
                         : r.skip(w);
      if (!ok)
        return fault("malformed");
      if (field == kModelPieces) {
        if (f == kPieceText && w == 2)
          piece.text = std::string(b);
        else if (f == kPieceScore && w == 5)
          std::memcpy(&piece.score, &f32, 4);
        else if (f == kPieceType && w == 0)
          piece.type = int(v);
      } else if (field == kModelTrainer) {
        if (f == kTrainerModelType && w == 0)
          modelType = int(v);
        else if (f == kTrainerSuffix && w == 0)
          suffix = v != 0;
        else if (f == kTrainerByteFallback && w == 0)
          t->byteFallback_ = v != 0;
        else if (f == kTrainerUnk && w == 0)
          t->unk_ = int32_t(v);
        else if (f == kTrainerBos && w == 0)
          t->bos_ = int32_t(v);
        else if (f == kTrainerEos && w == 0)
          t->eos_ = int32_t(v);
        else if (f == kTrainerUnkSurface && w == 2)
          t->unkSurface_ = std::string(b);
      } else {
        if (f == kNormalizerName && w == 2)
          normalizer = std::string(b);
        else if (f == kNormalizerCharsmap && w == 2)
          charsmap = std::string(b);
        else if (f == kNormalizerDummyPrefix && w == 0)
          t->dummyPrefix_ = v != 0;
        else if (f == kNormalizerRemoveSpaces && w == 0)
          t->removeSpaces_ = v != 0;
        else if (f == kNormalizerEscapeSpaces && w == 0)
          t->escapeSpaces_ = v != 0;
      }
    }
    if (field == kModelPieces)
      t->pieces_.push_back(std::move(piece));
  }
  if (t->pieces_.empty())
    return fault("no pieces");
  if (modelType != kBpe)
    return fault(absl::StrCat("model type ", modelType,
                              "; Llama's tokenizers are BPE, type 2"));
  if (!charsmap.empty())
    return fault(absl::StrCat("the normalizer '", normalizer,
                              "' maps characters; Llama's is 'identity'"));
  if (suffix)
    return fault("whitespace as a suffix");
  for (int32_t id = 0; id < int32_t(t->pieces_.size()); ++id) {
    const Piece &p = t->pieces_[id];
    if (p.type < Normal || p.type > Byte)
      return fault(absl::StrCat("piece ", id, " has type ", p.type));
    bool mergeable = p.type == Normal || p.type == User || p.type == Unused;
    auto &map = mergeable ? t->mergeable_ : t->reserved_;
    if (!map.emplace(p.text, id).second)
      return fault(absl::StrCat("piece '", p.text, "' is there twice"));
    if (p.type == User)
      t->userSymbols_.push_back(p.text);
  }
  for (int32_t id : {t->unk_, t->bos_, t->eos_})
    if (id >= int32_t(t->pieces_.size()))
      return fault(absl::StrCat("special id ", id, " has no piece"));
  if (t->unk_ < 0 || t->pieces_[t->unk_].type != Unknown)
    return fault("no unknown piece");
  return t;
}

std::string SentencePieceBpe::normalize(const std::string &text) const {
  // normalizer.cc with the identity rule: a byte that starts no valid
  // UTF-8 character becomes U+FFFD, spaces become U+2581, runs of them
  // collapse and the ends drop when remove_extra_whitespaces, and a dummy
  // prefix marks the first word.
  std::string_view in(text);
  if (removeSpaces_)
    while (!in.empty() && in[0] == ' ')
      in.remove_prefix(1);
  if (in.empty())
    return "";
  std::string out;
  const std::string space = escapeSpaces_ ? kSpace : " ";
  if (dummyPrefix_)
    out += space;
  bool lastSpace = dummyPrefix_;
  while (!in.empty()) {
    size_t n;
    const bool valid = validChar(in, n);
    if (in[0] == ' ') {
      if (!(removeSpaces_ && lastSpace))
        out += space;
      lastSpace = true;
    } else {
      out += valid ? std::string(in.substr(0, n)) : "\xEF\xBF\xBD";
      lastSpace = false;
    }
    in.remove_prefix(n);
  }
  if (removeSpaces_)
    while (out.size() >= space.size() &&
           out.compare(out.size() - space.size(), space.size(), space) == 0)
      out.resize(out.size() - space.size());
  return out;
}

int32_t SentencePieceBpe::idOf(const std::string &piece) const {
  if (auto it = reserved_.find(piece); it != reserved_.end())
    return it->second;
  if (auto it = mergeable_.find(piece); it != mergeable_.end())
    return it->second;
  return unk_;
}

std::vector<int32_t>
SentencePieceBpe::encodeText(const std::string &text) const {
  const std::string normalized = normalize(text);
  // Symbols: a character each, a user-defined symbol whole (frozen).
  struct Symbol {
    size_t begin, size;
    int prev, next;
    bool freeze;
  };
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < normalized.size();) {
    size_t len = std::min(charLength(normalized[at]), normalized.size() - at);
    bool freeze = false;
    for (const std::string &u : userSymbols_)
      if (u.size() >= len && normalized.compare(at, u.size(), u) == 0) {
        len = u.size(), freeze = true;
      }
    int index = int(symbols.size());
    symbols.push_back({at, len, index - 1, -1, freeze});
    at += len;
    if (at < normalized.size())
      symbols.back().next = index + 1;
  }
  // The agenda: the best-scoring mergeable pair first, the leftmost of a
  // tie (bpe_model.cc's SymbolPairComparator).
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  auto worse = [](const Pair &a, const Pair &b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> agenda(worse);
  std::map<std::string, std::pair<std::string, std::string>> revMerge;
  auto surface = [&](const Symbol &s) {
    return std::string_view(normalized).substr(s.begin, s.size);
  };
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0 || symbols[left].freeze || symbols[right].freeze)
      return;
    std::string piece(std::string_view(normalized)
                          .substr(symbols[left].begin,
                                  symbols[left].size + symbols[right].size));
    auto it = mergeable_.find(piece);
    if (it == mergeable_.end())
      return;
    agenda.push({left, right, pieces_[it->second].score, piece.size()});
    if (pieces_[it->second].type == Unused)
      revMerge[piece] = {std::string(surface(symbols[left])),
                         std::string(surface(symbols[right]))};
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    consider(int(i) - 1, int(i));
  while (!agenda.empty()) {
    Pair top = agenda.top();
    agenda.pop();
    Symbol &l = symbols[top.left], &r = symbols[top.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != top.size)
      continue; // stale: one side has merged since
    l.size += r.size;
    l.next = r.next;
    if (r.next >= 0)
      symbols[r.next].prev = top.left;
    r.size = 0;
    consider(l.prev, top.left);
    consider(top.left, l.next);
  }
  std::vector<int32_t> ids;
  // An unused piece is split back into what merged to it; an unknown one
  // falls back to its bytes.
  std::function<void(const std::string &)> emit = [&](const std::string &w) {
    int32_t id = idOf(w);
    if (id != unk_ && pieces_[id].type == Unused) {
      if (auto it = revMerge.find(w); it != revMerge.end()) {
        emit(it->second.first);
        emit(it->second.second);
        return;
      }
    }
    if (id == unk_ && byteFallback_) {
      for (char c : w)
        ids.push_back(idOf(absl::StrFormat("<0x%02X>", uint8_t(c))));
      return;
    }
    ids.push_back(id);
  };
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next)
    emit(std::string(surface(symbols[i])));
  return ids;
}

std::string SentencePieceBpe::decode(const std::vector<int32_t> &ids) const {
  // The processor's Decode: byte pieces gather into UTF-8 (an invalid byte
  // becomes U+FFFD), control pieces vanish, the first text's dummy prefix
  // goes, U+2581 is a space again.
  std::string out, bytes;
  bool bosSpace = true;
  auto flush = [&] {
    std::string_view b(bytes);
    while (!b.empty()) {
      size_t n;
      if (validChar(b, n))
        out.append(b.substr(0, n));
      else
        out += "\xEF\xBF\xBD";
      b.remove_prefix(n);
    }
    bytes.clear();
  };
  for (int32_t id : ids) {
    if (id < 0 || id >= int32_t(pieces_.size()))
      continue;
    const Piece &p = pieces_[id];
    if (p.type == Byte) {
      unsigned v = 0;
      if (std::sscanf(p.text.c_str(), "<0x%2X>", &v) == 1)
        bytes += char(v);
      continue;
    }
    flush();
    if (p.type == Control)
      continue;
    if (p.type == Unknown) {
      out += unkSurface_;
      continue;
    }
    std::string_view piece(p.text);
    // The dummy prefix: the first U+2581 of the text, once.
    if (bosSpace && out.empty() && (dummyPrefix_ || removeSpaces_) &&
        piece.substr(0, kSpace.size()) == kSpace) {
      piece.remove_prefix(kSpace.size());
      bosSpace = false;
    }
    for (size_t at = 0; at < piece.size();) {
      if (piece.substr(at, kSpace.size()) == kSpace) {
        out += ' ';
        at += kSpace.size();
      } else {
        out += piece[at++];
      }
    }
  }
  flush();
  return out;
}

} // namespace kiln
