//===- Tokenizer.cpp ------------------------------------------------------===//
#include "tokenizer/Tokenizer.h"
#include "tokenizer/GgufVocab.h"
#include "tokenizer/Llama2cVocab.h"

#include <sentencepiece_processor.h>

#include <filesystem>

namespace kiln {

Tokenizer::Tokenizer()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Tokenizer::~Tokenizer() = default;

bool Tokenizer::present(const std::string &folder) {
  if (isGgufFile(folder))
    return ggufHasVocab(folder);
  return std::filesystem::is_regular_file(std::filesystem::path(folder) /
                                          "tokenizer.model");
}

bool Tokenizer::loadModel(const std::string &path, std::string &error) {
  if (auto s = sp_->Load(path); !s.ok()) {
    error = path + ": not a SentencePiece model (" + s.ToString() + ")";
    return false;
  }
  return true;
}

bool Tokenizer::loadPieces(const std::string &proto, const std::string &path,
                           std::string &error) {
  if (auto s = sp_->LoadFromSerializedProto(proto); !s.ok()) {
    error = path + ": its pieces do not make a SentencePiece model (" +
            s.ToString() + ")";
    return false;
  }
  return true;
}

bool Tokenizer::fits(const std::string &path, int64_t vocab,
                     std::string &error) const {
  if (sp_->GetPieceSize() <= vocab)
    return true;
  error = path + ": " + std::to_string(sp_->GetPieceSize()) +
          " pieces do not fit the model's vocabulary of " +
          std::to_string(vocab);
  return false;
}

std::unique_ptr<Tokenizer> Tokenizer::open(const std::string &folder,
                                           int64_t vocab, std::string &error) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  std::string path = folder;
  if (isGgufFile(folder)) {
    std::string proto;
    if (!ggufSentencePieceModel(folder, proto, t->addBos_, error) ||
        !t->loadPieces(proto, folder, error))
      return nullptr;
  } else if (std::filesystem::is_regular_file(folder)) {
    error = folder + ": a llama2.c checkpoint holds no tokenizer: name its "
                     "tokenizer.bin with --tokenizer, or give the prompt as "
                     "--prompt-ids";
    return nullptr;
  } else {
    path = std::filesystem::path(folder) / "tokenizer.model";
    if (!present(folder)) {
      error =
          folder + ": has no tokenizer.model: give the prompt as --prompt-ids";
      return nullptr;
    }
    if (!t->loadModel(path, error))
      return nullptr;
  }
  return t->fits(path, vocab, error) ? std::move(t) : nullptr;
}

std::unique_ptr<Tokenizer> Tokenizer::openFile(const std::string &path,
                                               int64_t vocab,
                                               std::string &error) {
  if (!std::filesystem::is_regular_file(path)) {
    error = path + ": no such tokenizer file";
    return nullptr;
  }
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".model") == 0)
    return t->loadModel(path, error) && t->fits(path, vocab, error)
               ? std::move(t)
               : nullptr;
  // llama2.c's tokenizer.bin, checked against the vocabulary as it is read.
  std::string proto;
  if (!llama2cSentencePieceModel(path, vocab, proto, error) ||
      !t->loadPieces(proto, path, error))
    return nullptr;
  return t;
}

std::vector<int32_t> Tokenizer::encode(const std::string &text) const {
  std::vector<int32_t> out;
  if (addBos_ && sp_->bos_id() >= 0)
    out.push_back(sp_->bos_id());
  std::vector<int32_t> ids = encodeText(text);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

std::vector<int32_t> Tokenizer::encodeText(const std::string &text) const {
  std::vector<int> ids;
  sp_->Encode(text, &ids).IgnoreError(); // a loaded model encodes any text
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::vector<int> known;
  for (int32_t id : ids)
    if (id >= 0 && id < sp_->GetPieceSize())
      known.push_back(id);
  std::string text;
  sp_->Decode(known, &text).IgnoreError();
  return text;
}

int32_t Tokenizer::eos() const { return sp_->eos_id(); }
int32_t Tokenizer::bos() const { return sp_->bos_id(); }

} // namespace kiln
