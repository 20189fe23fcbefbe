//===- Chat.cpp - interactive chat turns ----------------------------------===//
#include "runtime/Chat.h"

#include "runtime/ChatTemplate.h"
#include "runtime/Generate.h"
#include "runtime/TextStream.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln {

absl::StatusOr<std::vector<ChatTurn>>
chatTurns(Device &device, const TextTokenizer &tokenizer,
          const ChatOptions &options, std::istream &in, std::ostream &out) {
  std::vector<ChatTurn> turns;
  std::vector<int32_t> conversation; // [held]: every token the device holds
  std::vector<int32_t> seen;         // [V]: the penalties' history
  std::string line;
  while (true) {
    if (options.terminal) {
      out << "> ";
      out.flush();
    }
    if (!std::getline(in, line) || line.empty())
      break;
    ChatTurn &turn = turns.emplace_back();
    turn.start = int64_t(conversation.size());
    turn.prompt =
        llama2NextTurn(tokenizer, line, turns.size() == 1, options.system);
    int64_t need =
        turn.start + int64_t(turn.prompt.size()) + options.maxNewTokens;
    if (need > options.context)
      return absl::InvalidArgumentError(absl::StrCat(
          "--chat: turn ", turns.size(), " (", turn.prompt.size(),
          " tokens after the conversation's ", turn.start, ") plus ",
          options.maxNewTokens, " new tokens exceeds the context of ",
          options.context, " tokens"));
    // The reply streams as it comes; the stream decodes it after the
    // whole conversation, so that a word's leading space survives.
    std::vector<int32_t> before = conversation;
    before.insert(before.end(), turn.prompt.begin(), turn.prompt.end());
    TextStream stream(
        tokenizer, before,
        [&](const std::string &piece) {
          out << piece;
          out.flush();
        },
        options.stops);
    GenerateHooks hooks;
    hooks.stopTokens = {tokenizer.eos()};
    hooks.onToken = [&](int32_t t) { return stream.add(t); };
    // A fresh draw each turn: the seed moves on with the turns.
    SamplingParams sampling = options.sampling;
    sampling.seed += uint32_t(turns.size() - 1);
    auto g =
        generate(device, turn.prompt, options.maxNewTokens, options.vocab,
                 sampling, hooks, options.bias, {int32_t(turn.start), &seen});
    if (!g.ok())
      return g.status();
    stream.finish();
    out << "\n";
    turn.reply = g->tokens;
    turn.prefillSeconds = g->prefillSeconds;
    turn.decodeSeconds = g->decodeSeconds;
    // What the device holds: the turn and the reply's fed tokens.
    conversation.insert(conversation.end(), turn.prompt.begin(),
                        turn.prompt.end());
    conversation.insert(conversation.end(), g->tokens.begin(),
                        g->tokens.begin() + (g->held - int64_t(before.size())));
  }
  return turns;
}

std::string chatReport(const std::string &model, const std::string &device,
                       const std::vector<ChatTurn> &turns) {
  std::string out = absl::StrFormat("kiln: chat with %s on %s: %d turns\n",
                                    model, device, turns.size());
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatTurn &t = turns[i];
    absl::StrAppendFormat(
        &out,
        "  turn %d: prefilled %d tokens at positions %d-%d (%.2f ms), %d new "
        "(%.3f ms/token): %s\n",
        i + 1, t.prompt.size(), t.start, t.start + int64_t(t.prompt.size()) - 1,
        t.prefillSeconds * 1e3, t.reply.size(),
        t.reply.empty() ? 0.0 : t.decodeSeconds * 1e3 / t.reply.size(),
        absl::StrJoin(t.reply, " "));
    absl::StrAppend(&out, "    prompt ids ", absl::StrJoin(t.prompt, " "),
                    "\n");
  }
  return out;
}

} // namespace kiln
