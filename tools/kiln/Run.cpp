//===- Run.cpp - kiln run -------------------------------------------------===//
#include "codegen/Program.h"
#include "reference/RefDevice.h"
#include "runtime/EmuDevice.h"
#include "runtime/Generate.h"
#include "tools/kiln/Commands.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace kiln {

namespace {
cl::opt<std::string> model(cl::Positional, cl::desc("[MODEL]"),
                           cl::init("tiny-gqa"), cl::sub(runCommand()));
cl::opt<std::string> promptIds("prompt-ids",
                               cl::desc("The prompt as token ids: 1,2,3"),
                               cl::value_desc("ids"), cl::sub(runCommand()));
// Numbers are read as text so that a bad value gets kiln's own one-line
// error (cl::opt's parser writes its own format straight to stderr).
cl::opt<std::string> maxNewTokensFlag("max-new-tokens",
                                      cl::desc("Tokens to generate"),
                                      cl::init("16"), cl::sub(runCommand()));
cl::opt<std::string> device("device",
                            cl::desc("Where to run: ref (fp32 interpreter of "
                                     "the IR) or emu (the CUDA kernels on "
                                     "the CPU)"),
                            cl::init("ref"), cl::sub(runCommand()));
cl::opt<std::string> dumpLogits(
    "dump-logits",
    cl::desc("Write prompt, tokens and every logit in the fixture layout"),
    cl::value_desc("file.safetensors"), cl::sub(runCommand()));

absl::StatusOr<std::vector<int32_t>> parseIds(const std::string &text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id))
      return absl::InvalidArgumentError(absl::StrCat(
          "--prompt-ids: '", std::string(part), "' is not an integer"));
    ids.push_back(id);
  }
  return ids;
}
} // namespace

int runRun() {
  if (promptIds.empty())
    return fail(absl::InvalidArgumentError(
                    "--prompt-ids: give the prompt as token ids, e.g. "
                    "--prompt-ids 1,2,3"),
                2);
  int64_t maxNewTokens;
  if (!absl::SimpleAtoi(std::string(maxNewTokensFlag), &maxNewTokens) ||
      maxNewTokens < 0)
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--max-new-tokens: '", std::string(maxNewTokensFlag),
                    "' is not a non-negative integer")),
                2);
  auto prompt = parseIds(promptIds);
  if (!prompt.ok())
    return fail(prompt.status(), 2);
  if (device != "ref" && device != "emu")
    return fail(absl::InvalidArgumentError(absl::StrCat(
                    "--device: '", std::string(device),
                    "' is not a device of this build (it has: ref, emu)")),
                2);
  FrontendOptions opts = frontendOptions();

  mlir::MLIRContext ctx;
  auto compiled = compileModel(ctx, model, opts);
  if (!compiled.ok())
    return fail(compiled.status());
  const LlamaConfig &c = compiled->source.config;
  if (absl::Status s =
          checkPrompt(*prompt, maxNewTokens, c.vocabSize, c.maxPositions);
      !s.ok())
    return fail(s);
  if (!WeightSet::present(compiled->source.folder))
    return fail(absl::InvalidArgumentError(absl::StrCat(
        compiled->source.folder,
        ": has no weights (model.safetensors); presets such as llama2-7b "
        "hold only shapes")));
  auto weights = WeightSet::open(compiled->source.folder);
  if (!weights.ok())
    return fail(weights.status());
  if (absl::Status s = (*weights)->check(compiled->weights); !s.ok())
    return fail(s);

  absl::StatusOr<std::unique_ptr<Device>> dev;
  if (device == "emu") {
    auto program = buildProgram(*compiled->module, CodegenOptions());
    if (!program)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          compiled->source.name, ": ", toString(program.takeError()))));
    dev = EmuDevice::create(std::move(*program), **weights);
  } else {
    dev = RefDevice::create(*compiled->module, **weights);
  }
  if (!dev.ok())
    return fail(dev.status());
  auto gen = generateGreedy(**dev, *prompt, maxNewTokens, c.vocabSize);
  if (!gen.ok())
    return fail(gen.status());
  if (!dumpLogits.empty())
    if (absl::Status s = writeLogitsDump(dumpLogits, *gen); !s.ok())
      return fail(s);

  auto &os = llvm::outs();
  os << llvm::formatv("kiln: {0} on {1}: {2} prompt tokens, {3} new\n",
                      compiled->source.name, (*dev)->name(), prompt->size(),
                      gen->tokens.size());
  os << llvm::formatv("  prefill   {0:F2} ms\n", gen->prefillSeconds * 1e3);
  if (!gen->tokens.empty())
    os << llvm::formatv("  decode    {0:F3} ms/token\n",
                        gen->decodeSeconds * 1e3 / gen->tokens.size());
  os << "  generated";
  for (int32_t t : gen->tokens)
    os << " " << t;
  os << "\n";
  if (!dumpLogits.empty())
    os << "  logits    " << dumpLogits << "\n";
  return 0;
}

} // namespace kiln
