//===- Llama2cVocab.h - a SentencePiece model from tokenizer.bin -*- C++
//-*-===//
//
// llama2.c keeps its tokenizer beside the checkpoint, as tokenizer.bin
// (tokenizer.py's export, docs/llama2c.md): a uint32 max_token_length, then
// per piece an f32 score, an int32 length and the piece's UTF-8 bytes, with
// SentencePiece's U+2581 written as a space and bos/eos as "\n<s>\n" and
// "\n</s>\n". No count: run.c reads as many pieces as the model's
// vocab_size. The piece types are not stored; they are inferred as Llama
// 2's tokenizer has them (id 0 unknown, 1 and 2 control, "<0xXX>" bytes,
// the rest normal) and the pieces become the SentencePiece model that
// libsentencepiece loads (SentencePieceModel.h). No Abseil here
// (Tokenizer.h says why): errors come back as text.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_TOKENIZER_LLAMA2CVOCAB_H
#define KILN_TOKENIZER_LLAMA2CVOCAB_H

#include "tokenizer/SentencePieceModel.h"

#include <cstdint>
#include <string>

namespace kiln {

/// The pieces of the tokenizer.bin at `path`, spelled, scored and typed as
/// SentencePiece's; false with `error` (one line naming the file and the
/// piece) when it is truncated or garbled: a piece past the end, a negative
/// or empty length, one longer than max_token_length, a score that is not
/// finite, a piece twice.
bool readLlama2cVocab(const std::string &path, SentencePieceSpec &spec,
                      std::string &error);

/// A serialized SentencePiece ModelProto of the tokenizer.bin at `path`,
/// which must hold exactly `vocab` pieces (the model's vocab_size); false
/// with `error` otherwise.
bool llama2cSentencePieceModel(const std::string &path, int64_t vocab,
                               std::string &proto, std::string &error);

} // namespace kiln

#endif // KILN_TOKENIZER_LLAMA2CVOCAB_H
