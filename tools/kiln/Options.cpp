//===- Options.cpp - the subcommands and the options they share -----------===//
#include "tools/kiln/Commands.h"

namespace cl = llvm::cl;

namespace kiln {

cl::SubCommand &compileCommand() {
  static cl::SubCommand command("compile", "Compile a model to kiln IR");
  return command;
}

cl::SubCommand &runCommand() {
  static cl::SubCommand command("run", "Generate tokens with a model");
  return command;
}

cl::opt<std::string> dtypeFlag("dtype",
                               cl::desc("Storage type: f16, bf16 or f32"),
                               cl::init("f16"), cl::sub(compileCommand()),
                               cl::sub(runCommand()));

cl::opt<bool> fusionFlag("fusion",
                         cl::desc("Run the fusion pipeline (default on; "
                                  "--fusion=false keeps the tensor-level IR)"),
                         cl::init(true), cl::sub(compileCommand()),
                         cl::sub(runCommand()));

} // namespace kiln
