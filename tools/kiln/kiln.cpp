//===- kiln.cpp - the kiln command ----------------------------------------===//
//
//   kiln compile [MODEL] [-o FILE] [--emit=summary|mlir]
//   kiln run [MODEL] --prompt-ids 1,2,3 [--max-new-tokens N] [--device ref]
//            [--dump-logits OUT.safetensors]
//
// MODEL is a Hugging Face folder or a preset name (models/); tiny-gqa when
// left out. Exit codes: 0 done, 1 bad input, 2 bad usage.
//
//===----------------------------------------------------------------------===//
#include "tools/kiln/Commands.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  std::string errors;
  llvm::raw_string_ostream errs(errors);
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv, "kiln: compile Llama 2 models into GPU binaries\n",
          &errs)) {
    llvm::errs() << errs.str();
    return 2;
  }
  if (kiln::compileCommand)
    return kiln::runCompile();
  if (kiln::runCommand)
    return kiln::runRun();
  llvm::errs() << "kiln: error: name a subcommand: compile or run "
                  "(kiln --help lists them)\n";
  return 2;
}
