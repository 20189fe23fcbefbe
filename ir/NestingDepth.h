//===- NestingDepth.h - IR nested past the parser's stack -*- C++ -*-===//
//-*-===//
//
// MLIR's parser is recursive descent without a depth limit: text nested a
// few thousand brackets deep ("[[[[..." as an attribute) overflows the
// stack (the IR fuzzer's finding; mlir-opt has the same fault). kiln-opt,
// kiln-translate and the fuzzer check the nesting first and refuse such
// text with a diagnostic; no IR kiln writes comes near the limit.
//
//===----------------------------------------------------------------------===//
#ifndef KILN_IR_NESTINGDEPTH_H
#define KILN_IR_NESTINGDEPTH_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace kiln {

/// The deepest nesting of (), [], {} and <> IR text may have.
constexpr int kMaxIrNesting = 512;

/// Fails, naming the line, when `text` nests brackets deeper than
/// kMaxIrNesting (outside string literals and comments).
llvm::Error checkIrNesting(llvm::StringRef text);

/// checkIrNesting on the file at `path`; "-" (stdin) and files that cannot
/// be read pass (the tool's own reader reports those).
llvm::Error checkIrFileNesting(llvm::StringRef path);

} // namespace kiln

#endif // KILN_IR_NESTINGDEPTH_H
