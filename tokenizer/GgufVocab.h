//===- GgufVocab.h - a SentencePiece model from GGUF metadata ---*- C++ -*-===//
//
// A llama GGUF file carries its tokenizer as metadata (tokenizer.ggml.*:
// the pieces, their scores and types, the special ids), not as
// tokenizer.model. llama.cpp's converter copies those fields from the
// SentencePiece model; this rebuilds the model from them, as the protobuf
// that libsentencepiece loads (docs/gguf.md): Llama 2's BPE with byte
// fallback and its normalizer (identity, a dummy prefix, whitespace kept),
// which the converter does not record because every Llama 2 file has them.
// No Abseil here (Tokenizer.h says why): errors come back as text.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TOKENIZER_GGUFVOCAB_H
#define KILN_TOKENIZER_GGUFVOCAB_H

#include <string>

namespace kiln {

/// True when the file at `path` is a GGUF file.
bool isGgufFile(const std::string &path);

/// True when the GGUF file at `path` carries tokenizer.ggml.tokens.
bool ggufHasVocab(const std::string &path);

/// A serialized SentencePiece ModelProto built from the GGUF file's
/// tokenizer metadata; false with `error` (one line, naming the file and
/// the key) when the file has none or it is malformed.
bool ggufSentencePieceModel(const std::string &path, std::string &proto,
                            bool &addBos, std::string &error);

} // namespace kiln

#endif // KILN_TOKENIZER_GGUFVOCAB_H
