//===- NestingDepth.cpp ---------------------------------------------------===//
#include "ir/NestingDepth.h"

#include "llvm/Support/MemoryBuffer.h"

namespace kiln {

llvm::Error checkIrNesting(llvm::StringRef text) {
  int depth = 0, line = 1;
  bool inString = false, inComment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      inComment = false;
      continue;
    }
    if (inComment)
      continue;
    if (inString) {
      if (c == '\\')
        ++i; // an escaped quote does not end the string
      else if (c == '"')
        inString = false;
      continue;
    }
    switch (c) {
    case '"':
      inString = true;
      break;
    case '/':
      inComment = i + 1 < text.size() && text[i + 1] == '/';
      break;
    case '(':
    case '[':
    case '{':
    case '<':
      if (++depth > kMaxIrNesting)
        return llvm::createStringError(
            "line " + std::to_string(line) + ": brackets nested deeper than " +
            std::to_string(kMaxIrNesting) +
            " (MLIR's parser would run out of stack)");
      break;
    case '>':
      if (i > 0 && text[i - 1] == '-')
        break; // a function type's arrow
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      depth = depth > 0 ? depth - 1 : 0;
      break;
    default:
      break;
    }
  }
  return llvm::Error::success();
}

llvm::Error checkIrFileNesting(llvm::StringRef path) {
  if (path == "-")
    return llvm::Error::success();
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file)
    return llvm::Error::success();
  if (llvm::Error e = checkIrNesting((*file)->getBuffer()))
    return llvm::createStringError(path + ": " + toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace kiln
