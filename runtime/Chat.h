//===- Chat.h - interactive chat turns --------------------------*- C++ -*-===//
#ifndef KILN_RUNTIME_CHAT_H
#define KILN_RUNTIME_CHAT_H

#include "runtime/Device.h"
#include "runtime/Sampling.h"
#include "runtime/TextTokenizer.h"

#include "absl/status/statusor.h"

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

/// What a chat runs with.
struct ChatOptions {
  int64_t vocab = 0, context = 0, maxNewTokens = 0;
  SamplingParams sampling;
  LogitBias bias;
  std::vector<std::string> stops; // stop strings
  std::string system;             // the system prompt, or empty
  bool terminal = false;          // prompt for each turn with "> "
};

/// One turn of a chat: what was prefilled and what came back.
struct ChatTurn {
  int64_t start = 0;           // the position its prompt started at
  std::vector<int32_t> prompt; // [P]: the turn's template tokens
  std::vector<int32_t> reply;  // [N]: the generated tokens
  double prefillSeconds = 0, decodeSeconds = 0;
};

/// Reads user turns from `in`, a line each (an empty line or the end of
/// the input ends the chat), and streams each reply to `out`. The device
/// keeps the conversation's KV cache between turns: a turn prefills only
/// its own tokens (llama2NextTurn), after the earlier ones. Fails when the
/// device does, or when a turn would pass the context.
absl::StatusOr<std::vector<ChatTurn>>
chatTurns(Device &device, const TextTokenizer &tokenizer,
          const ChatOptions &options, std::istream &in, std::ostream &out);

/// The lines a chat ends with: each turn's positions and tokens.
std::string chatReport(const std::string &model, const std::string &device,
                       const std::vector<ChatTurn> &turns);

} // namespace kiln

#endif // KILN_RUNTIME_CHAT_H
