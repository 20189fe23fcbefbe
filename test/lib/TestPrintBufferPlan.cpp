//===- TestPrintBufferPlan.cpp - -kiln-test-print-buffer-plan -------------===//
//
// Prints each function's arena plan for FileCheck: the arena against the
// most bytes alive at once, then every activation's offset, size and life.
//
//===----------------------------------------------------------------------===//
#include "test/lib/TestPasses.h"

#include "ir/KilnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
struct TestPrintBufferPlan
    : PassWrapper<TestPrintBufferPlan, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintBufferPlan)
  StringRef getArgument() const final { return "kiln-test-print-buffer-plan"; }
  StringRef getDescription() const final {
    return "Print each function's activation arena plan";
  }

  void runOnOperation() override {
    auto &os = llvm::outs();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      auto arena = fn->getAttrOfType<IntegerAttr>("kiln.arena_bytes");
      auto peak = fn->getAttrOfType<IntegerAttr>("kiln.arena_peak_bytes");
      if (!arena || !peak) {
        os << "@" << fn.getName() << ": no arena planned\n";
        continue;
      }
      os << llvm::formatv("@{0}: arena {1} bytes, peak live {2} bytes, "
                          "ratio {3:F3}\n",
                          fn.getName(), arena.getInt(), peak.getInt(),
                          double(arena.getInt()) / double(peak.getInt()));
      AsmState state(fn);
      fn.walk([&](Operation *op) {
        auto offsets =
            op->getAttrOfType<DenseI64ArrayAttr>("kiln.arena_offsets");
        if (!offsets)
          return;
        for (auto [r, offset] :
             llvm::zip(op->getResults(), offsets.asArrayRef())) {
          if (offset < 0)
            continue;
          os << "  ";
          r.printAsOperand(os, state);
          os << " " << op->getName() << " at " << offset << "\n";
        }
      });
    }
  }
};
} // namespace

void kiln::test::registerTestPrintBufferPlan() {
  PassRegistration<TestPrintBufferPlan>();
}
