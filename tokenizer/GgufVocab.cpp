//===- GgufVocab.cpp - a SentencePiece model from GGUF metadata -----------===//
#include "tokenizer/GgufVocab.h"
#include "runtime/GgufFile.h"

#include <cstring>

namespace kiln {
namespace {
// Protobuf's wire format, the little of it a ModelProto needs
// (sentencepiece_model.proto gives the field numbers).
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
void bytesField(std::string &out, int field, std::string_view v) {
  tag(out, field, 2);
  varint(out, v.size());
  out.append(v.data(), v.size());
}
void floatField(std::string &out, int field, float v) {
  tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

// SentencePiece's piece types; GGUF's token_type uses the same numbers.
constexpr int64_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
} // namespace

bool isGgufFile(const std::string &path) {
  return GgufFile::looksLikeGguf(path);
}

bool ggufHasVocab(const std::string &path) {
  auto file = GgufFile::open(path);
  return file.ok() && (*file)->find("tokenizer.ggml.tokens");
}

bool ggufSentencePieceModel(const std::string &path, std::string &proto,
                            bool &addBos, std::string &error) {
  auto opened = GgufFile::open(path);
  if (!opened.ok()) {
    error = std::string(opened.status().message());
    return false;
  }
  const GgufFile &file = **opened;
  auto fail = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  const GgufValue *model = file.find("tokenizer.ggml.model");
  const GgufValue *tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens)
    return fail("has no tokenizer (tokenizer.ggml.tokens): give the prompt "
                "as --prompt-ids");
  if (!model || !model->string())
    return fail("tokenizer.ggml.model is missing or not a string");
  if (*model->string() != "llama")
    return fail("tokenizer.ggml.model is '" + std::string(*model->string()) +
                "'; kiln reads 'llama' (SentencePiece) tokenizers");
  if (!tokens->isArray() || tokens->elemType != GgufType::String ||
      tokens->count == 0)
    return fail("tokenizer.ggml.tokens is not a non-empty array of strings");
  const uint64_t n = tokens->count;
  const GgufValue *scores = file.find("tokenizer.ggml.scores");
  const GgufValue *types = file.find("tokenizer.ggml.token_type");
  if (scores &&
      (!scores->isArray() || scores->count != n || !scores->number(0)))
    return fail("tokenizer.ggml.scores is not an array of " +
                std::to_string(n) + " numbers");
  if (types && (!types->isArray() || types->count != n || !types->integer(0)))
    return fail("tokenizer.ggml.token_type is not an array of " +
                std::to_string(n) + " integers");
  auto special = [&](const char *key, int64_t fallback, int64_t &id) {
    id = fallback;
    const GgufValue *v = file.find(key);
    if (!v)
      return true;
    auto x = v->isArray() ? std::nullopt : v->integer();
    if (!x || *x < 0 || uint64_t(*x) >= n)
      return fail(std::string(key) + " (" + v->describe() +
                  ") is not a token id below " + std::to_string(n));
    id = *x;
    return true;
  };
  // No pad id: encoding and decoding never use it, and files often give
  // unk's (which SentencePiece would refuse as a duplicate).
  int64_t unk, bos, eos;
  if (!special("tokenizer.ggml.unknown_token_id", 0, unk) ||
      !special("tokenizer.ggml.bos_token_id", 1, bos) ||
      !special("tokenizer.ggml.eos_token_id", 2, eos))
    return false;
  auto flag = [&](const char *key, bool fallback) {
    const GgufValue *v = file.find(key);
    auto x = v && !v->isArray() ? v->integer() : std::nullopt;
    return x ? *x != 0 : fallback;
  };
  addBos = flag("tokenizer.ggml.add_bos_token", true);
  const bool dummyPrefix = flag("tokenizer.ggml.add_space_prefix", true);

  proto.clear();
  bool bytes = false;
  for (uint64_t i = 0; i < n; ++i) {
    int64_t type = types ? *types->integer(i) : kNormal;
    if (type < 1 || type > 6)
      return fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] is " +
                  std::to_string(type) + ", not a type from 1 to 6");
    // SentencePiece insists on these; a file that disagrees is corrupt.
    if ((int64_t(i) == unk) != (type == kUnknown))
      return fail("token " + std::to_string(i) + " has type " +
                  std::to_string(type) +
                  ", but tokenizer.ggml.unknown_token_id is " +
                  std::to_string(unk) + " (the one UNKNOWN token)");
    if ((int64_t(i) == bos || int64_t(i) == eos) && type != kControl)
      return fail("token " + std::to_string(i) +
                  " (bos or eos) is not a CONTROL token");
    bytes |= type == kByte;
    std::string piece;
    bytesField(piece, 1, tokens->strings[i]);
    floatField(piece, 2, scores ? float(*scores->number(i)) : 0.0f);
    intField(piece, 3, type);
    bytesField(proto, 1, piece);
  }
  std::string trainer;
  intField(trainer, 3, 2); // model_type: BPE
  intField(trainer, 4, int64_t(n));
  intField(trainer, 35, bytes); // byte_fallback
  intField(trainer, 40, unk);
  intField(trainer, 41, bos);
  intField(trainer, 42, eos);
  intField(trainer, 43, -1); // pad_id
  bytesField(proto, 2, trainer);
  std::string normalizer;
  bytesField(normalizer, 1, "identity");
  intField(normalizer, 3, dummyPrefix);
  intField(normalizer, 4, 0); // remove_extra_whitespaces: Llama 2 keeps them
  intField(normalizer, 5, 1); // escape_whitespaces
  bytesField(proto, 3, normalizer);
  return true;
}

} // namespace kiln
