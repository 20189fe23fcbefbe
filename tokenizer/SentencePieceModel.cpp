//===- SentencePieceModel.cpp - a SentencePiece model from pieces ---------===//
#include "tokenizer/SentencePieceModel.h"

#include <cstring>

namespace kiln {
namespace {
// Protobuf's wire format, the little of it a ModelProto needs.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += char(uint8_t(v) | 0x80);
    v >>= 7;
  }
  out += char(uint8_t(v));
}
void tag(std::string &out, int field, int wire) {
  varint(out, uint64_t(field) << 3 | uint64_t(wire));
}
void intField(std::string &out, int field, int64_t v) {
  tag(out, field, 0);
  varint(out, uint64_t(v)); // negative int32s take ten bytes, as protobuf's
}
void bytesField(std::string &out, int field, const std::string &v) {
  tag(out, field, 2);
  varint(out, v.size());
  out += v;
}
void floatField(std::string &out, int field, float v) {
  tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}
} // namespace

std::string sentencePieceSpecError(const SentencePieceSpec &spec) {
  const int n = int(spec.pieces.size());
  for (int id : {spec.unk, spec.bos, spec.eos})
    if (id < 0 || id >= n)
      return "special token id " + std::to_string(id) + " is not below " +
             std::to_string(n);
  for (int i = 0; i < n; ++i) {
    PieceType t = spec.pieces[i].type;
    if ((i == spec.unk) != (t == PieceType::Unknown))
      return "token " + std::to_string(i) + " has type " +
             std::to_string(int(t)) + ", but the unknown token id is " +
             std::to_string(spec.unk) + " (the one UNKNOWN token)";
    if ((i == spec.bos || i == spec.eos) && t != PieceType::Control)
      return "token " + std::to_string(i) +
             " (bos or eos) is not a CONTROL token";
  }
  return "";
}

std::string serializeSentencePieceModel(const SentencePieceSpec &spec) {
  std::string proto;
  bool bytes = false;
  for (const Piece &p : spec.pieces) {
    bytes |= p.type == PieceType::Byte;
    std::string piece;
    bytesField(piece, 1, p.text);
    floatField(piece, 2, p.score);
    intField(piece, 3, int(p.type));
    bytesField(proto, 1, piece);
  }
  std::string trainer;
  intField(trainer, 3, 2); // model_type: BPE
  intField(trainer, 4, int64_t(spec.pieces.size()));
  intField(trainer, 35, bytes); // byte_fallback
  intField(trainer, 40, spec.unk);
  intField(trainer, 41, spec.bos);
  intField(trainer, 42, spec.eos);
  intField(trainer, 43, -1); // pad_id: encoding and decoding never use it
  bytesField(proto, 2, trainer);
  std::string normalizer;
  bytesField(normalizer, 1, "identity");
  intField(normalizer, 3, spec.dummyPrefix);
  intField(normalizer, 4, 0); // remove_extra_whitespaces: Llama 2 keeps them
  intField(normalizer, 5, 1); // escape_whitespaces
  bytesField(proto, 3, normalizer);
  return proto;
}

} // namespace kiln
