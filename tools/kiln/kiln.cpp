//===- kiln.cpp - the kiln command ----------------------------------------===//
//
//   kiln compile [MODEL] [-o model.kiln | -o model.mlir] [--emit=summary|mlir]
//   kiln run [MODEL] --prompt-ids 1,2,3 [--max-new-tokens N] [--device ref]
//            [--dump-logits OUT.safetensors]
//   kiln run model.kiln --weights FOLDER --prompt-ids ... [--device emu]
//   kiln inspect model.kiln [--sass | --sass-json] [--sass-expect ...]
//   kiln cache list | explain DIGEST DIGEST | clear
//   kiln eval MODEL --quantize FORMAT | --compare-to MODEL2 --prompt-ids ...
//             [--device ref|emu|cuda] [--json FILE]
//   kiln tune [MODEL | BUNDLE] --seq-lens 1,2,4,... [--batch 1,8,32]
//             --tuning-db FILE [--families ...] [--plot-dir DIR]
//
// MODEL is a Hugging Face folder or a preset name (models/); tiny-gqa when
// left out. Exit codes: 0 done, 1 bad input, 2 bad usage.
//
//===----------------------------------------------------------------------===//
#include "tools/kiln/Commands.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <iterator>
#include <string>
#include <vector>

namespace {
/// The libraries kiln links (LLVM's, MLIR's) register hundreds of options
/// of their own at the top level (--print-after-all, --color, --mlir-...).
/// Every option of kiln's belongs to one of its subcommands: the others are
/// hidden from every --help (they still parse), but --help and its kin,
/// which every subcommand has.
// Not checked by UBSan's vptr check: the options are objects of classes
// whose type information lives in libLLVM (uninstrumented, its typeinfo
// not visible here), so every member call on them looked like a call on a
// wrong type to the sanitized build.
__attribute__((no_sanitize("vptr"))) void hideOtherOptions() {
  namespace cl = llvm::cl;
  cl::SubCommand *commands[] = {
      &kiln::compileCommand(), &kiln::runCommand(),   &kiln::tuneCommand(),
      &kiln::inspectCommand(), &kiln::cacheCommand(), &kiln::evalCommand(),
      &kiln::serveCommand()};
  llvm::SmallVector<cl::SubCommand *> all = {&cl::SubCommand::getTopLevel()};
  all.append(std::begin(commands), std::end(commands));
  for (cl::SubCommand *sub : all)
    for (auto &entry : cl::getRegisteredOptions(*sub)) {
      cl::Option *o = entry.second;
      bool ours = o->Subs.contains(&cl::SubCommand::getAll());
      for (cl::SubCommand *command : commands)
        ours = ours || o->Subs.contains(command);
      if (!ours)
        o->setHiddenFlag(cl::ReallyHidden);
    }
}
/// kiln's file values (--prompt-ids @FILE, --logit-bias @FILE.json, ...)
/// are the flag's to read: LLVM's parser would expand an argument that
/// starts with @ as a response file (its text split into arguments, quotes
/// dropped). A flag followed by such an argument becomes --flag=@FILE,
/// which the parser leaves alone.
std::vector<char *> keepFileValues(int argc, char **argv,
                                   std::vector<std::string> &joined) {
  joined.reserve(argc);
  std::vector<char *> out;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (i + 1 < argc && arg.starts_with("--") && !arg.contains('=') &&
        argv[i + 1][0] == '@') {
      joined.push_back((arg + "=" + argv[i + 1]).str());
      out.push_back(joined.back().data());
      ++i;
      continue;
    }
    out.push_back(argv[i]);
  }
  return out;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  hideOtherOptions();
  std::string errors;
  llvm::raw_string_ostream errs(errors);
  std::vector<std::string> joined;
  std::vector<char *> args = keepFileValues(argc, argv, joined);
  if (!llvm::cl::ParseCommandLineOptions(
          int(args.size()), args.data(),
          "kiln: compile Llama 2 models into GPU binaries\n", &errs)) {
    // One line, in kiln's error format, whatever the parser wrote.
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(errors).trim().split(lines, '\n');
    llvm::errs() << "kiln: error:";
    for (llvm::StringRef line : lines) {
      line = line.trim();
      line.consume_front(argv[0]);
      line.consume_front("kiln");
      line.consume_front(":");
      llvm::errs() << " " << line.trim();
    }
    llvm::errs() << "\n";
    return 2;
  }
  if (kiln::compileCommand())
    return kiln::runCompile();
  if (kiln::runCommand())
    return kiln::runRun();
  if (kiln::inspectCommand())
    return kiln::runInspect();
  if (kiln::cacheCommand())
    return kiln::runCache();
  if (kiln::tuneCommand())
    return kiln::runTune();
  if (kiln::evalCommand())
    return kiln::runEval();
  if (kiln::serveCommand())
    return kiln::runServe();
  llvm::errs() << "kiln: error: name a subcommand: compile, run, serve, tune, "
                  "inspect, cache or eval (kiln --help lists them)\n";
  return 2;
}
