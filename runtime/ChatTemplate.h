//===- ChatTemplate.h - Llama 2's chat prompts ------------------*- C++ -*-===//
//
// A conversation of {role, content} messages becomes token ids exactly as
// Meta's Llama 2 `chat_completion` (llama/generation.py) builds them: an
// optional system message folded into the first user message between
// <<SYS>> and <</SYS>>, then for each finished exchange
// `BOS [INST] {user} [/INST] {assistant} EOS` (contents stripped), and the
// last user message `BOS [INST] {user} [/INST]`, each piece encoded on its
// own. docs/chat.md.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CHATTEMPLATE_H
#define KILN_RUNTIME_CHATTEMPLATE_H

#include "runtime/TextTokenizer.h"

#include "absl/status/statusor.h"

#include <string>
#include <vector>

namespace kiln {

struct ChatMessage {
  std::string role; // "system", "user" or "assistant"
  std::string content;
};

/// A conversation file: a JSON array of {"role", "content"} objects (or an
/// object whose "messages" is one, as OpenAI's requests carry it). Faults
/// name the file and the message.
absl::StatusOr<std::vector<ChatMessage>>
readConversation(const std::string &path);

/// `system` (if not empty) as the first message of `dialog`, the
/// conversation read from `where`; a dialog that has one already is a
/// fault of --system.
absl::Status addSystem(std::vector<ChatMessage> &dialog,
                       const std::string &system, const std::string &where);

/// Why Meta's chat_completion would refuse `dialog` (roles: an optional
/// system message, then user and assistant alternating, ending with the
/// user), or OK; unless `allowTags`, also a content that holds one of the
/// format's tags ([INST], [/INST], <<SYS>>, <</SYS>>), which Meta's code
/// answers with an error instead of generating. `where` prefixes faults.
absl::Status checkConversation(const std::vector<ChatMessage> &dialog,
                               const std::string &where,
                               bool allowTags = false);

/// The prompt's token ids for `dialog` (checked first).
absl::StatusOr<std::vector<int32_t>>
llama2ChatTokens(const TextTokenizer &tokenizer,
                 const std::vector<ChatMessage> &dialog,
                 const std::string &where, bool allowTags = false);

/// One more user turn of a conversation whose earlier turns a device
/// already holds (interactive chat): after the assistant's reply its EOS
/// (the reply's own tokens stay as generated), then `BOS [INST] {user}
/// [/INST]`; the first turn carries `system` as llama2ChatTokens does.
std::vector<int32_t> llama2NextTurn(const TextTokenizer &tokenizer,
                                    const std::string &user, bool first,
                                    const std::string &system);

} // namespace kiln

#endif // KILN_RUNTIME_CHATTEMPLATE_H
