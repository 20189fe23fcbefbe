//===- SanitizerDefaults.cpp - ASan/UBSan settings of the sanitized build -===//
//
// Linked into every executable of a -DKILN_SANITIZE=ON build, so that the
// tools behave the same under CTest, lit and a shell.
//
//===----------------------------------------------------------------------===//

extern "C" {

// allow_user_poisoning=0: LLVM's allocators poison and unpoison their slabs
// by hand only where they are compiled with ASan. Debian's libMLIR is not,
// so kiln's instrumented code and the library would disagree about which
// bytes are live (a false use-after-poison in RankedTensorType::get). Heap,
// global and stack redzones stay on.
// detect_leaks=0: MLIR's contexts and LLVM's option registry live until
// exit on purpose.
// detect_stack_use_after_return=0: the emu device runs kernel threads on
// Boost.Context fiber stacks that ASan does not know.
const char *__asan_default_options() {
  return "allow_user_poisoning=0:detect_leaks=0:"
         "detect_stack_use_after_return=0";
}

const char *__ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

} // extern "C"
