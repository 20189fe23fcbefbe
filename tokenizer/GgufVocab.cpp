//===- GgufVocab.cpp - a SentencePiece model from GGUF metadata -----------===//
#include "tokenizer/GgufVocab.h"
#include "runtime/GgufFile.h"
#include "tokenizer/SentencePieceModel.h"

#include <cmath>
#include <cstring>

namespace kiln {

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

  SentencePieceSpec spec;
  spec.unk = int(unk);
  spec.bos = int(bos);
  spec.eos = int(eos);
  spec.dummyPrefix = flag("tokenizer.ggml.add_space_prefix", true);
  for (uint64_t i = 0; i < n; ++i) {
    // Each element checked: a u64 past INT64_MAX has no integer value.
    auto type = types ? types->integer(i) : int64_t(PieceType::Normal);
    if (!type || *type < 1 || *type > 6)
      return fail("tokenizer.ggml.token_type[" + std::to_string(i) +
                  "] is not a type from 1 to 6");
    auto score = scores ? scores->number(i) : 0.0;
    if (!score || !std::isfinite(float(*score)))
      return fail("tokenizer.ggml.scores[" + std::to_string(i) +
                  "] is not a finite number");
    spec.pieces.push_back(
        {std::string(tokens->strings[i]), float(*score), PieceType(*type)});
  }
  // SentencePiece insists on these; a file that disagrees is corrupt.
  if (std::string e = sentencePieceSpecError(spec); !e.empty())
    return fail("tokenizer.ggml.token_type: " + e);
  proto = serializeSentencePieceModel(spec);
  return true;
}

} // namespace kiln
