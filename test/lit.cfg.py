# lit configuration for kiln's tests: .mlir files drive kiln-opt, .test files
# drive the kiln command. Tools come from the build tree and LLVM's tools
# folder as CMake configured them, never from fixed paths.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "fixtures", "unit", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR"])
# RUN lines call `not` and `count` by name, as LLVM's own tests do.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()  # FileCheck, %python
llvm_config.add_tool_substitutions(["kiln", "kiln-opt", "kiln-translate", "kiln-run"], [config.kiln_tools_dir])

# The emu device's compiled kernels and NVRTC's kernel cache: one of each
# for the whole test run, in the build tree, not the user's home.
config.environment["KILN_EMU_CACHE"] = os.path.join(config.test_exec_root, "emu-cache")
config.environment["KILN_CACHE_DIR"] = os.path.join(config.test_exec_root, "kernel-cache")
# The sanitized build takes the plain build's NVRTC cache when there is one
# (build/ of the source tree, as for the test venv below): entries are
# content-addressed, so both builds' kiln get the same cubins, and compiling
# every kernel again cost the sanitized stage minutes of NVRTC, which no
# sanitizer checks. Misses still run sanitized: kernel-cache.test and the
# tests of --cache-dir fill caches of their own.
plain_cache = os.path.join(os.path.dirname(config.test_source_root), "build",
                           "test", "kernel-cache")
if config.kiln_sanitize and os.path.isdir(plain_cache):
    config.environment["KILN_CACHE_DIR"] = plain_cache

# The kiln binary by path, for helpers that start it themselves.
config.substitutions.append(
    ("%kiln-path", os.path.join(config.kiln_tools_dir, "kiln")))
config.substitutions.append(
    ("%kiln-run-path", os.path.join(config.kiln_tools_dir, "kiln-run")))

# The Python with the official `openai` client that the server's tests
# drive it with: scripts/install-test-venv.sh puts it in build/test-venv of
# the source tree, which the sanitized build shares.
config.substitutions.append(
    ("%serve-python",
     os.path.join(os.path.dirname(config.test_source_root), "build",
                  "test-venv", "bin", "python")))

fixtures = os.path.join(config.test_source_root, "fixtures")
config.substitutions.append(("%fixtures", fixtures))
# compare_logits.py EXPECTED GOT TOL: the fixtures' own checker.
config.substitutions.append(
    ("%compare-logits",
     "%s %s" % (config.python_executable,
                os.path.join(config.test_source_root, "compare_logits.py"))))
# expect_exit.py CODE CMD...: runs CMD, requires exit code CODE and a
# one-line error, and echoes stderr for FileCheck.
config.substitutions.append(
    ("%expect-exit",
     "%s %s" % (config.python_executable,
                os.path.join(config.test_source_root, "expect_exit.py"))))

# AddressSanitizer for the emu device's kernels: the kernels are built with
# -fsanitize=address and the runtime is preloaded, so every buffer the
# device allocates gets redzones and an out-of-bounds access in a generated
# kernel aborts the run. In the sanitized build (-DKILN_SANITIZE=ON) every
# kernel is built so already and the runtime is inside the tools.
import subprocess
emu_asan_cache = "KILN_EMU_CACHE=%s" % os.path.join(config.test_exec_root,
                                                    "emu-asan-cache")
if config.kiln_sanitize:
    config.available_features.add("sanitized")
    config.available_features.add("emu-asan")
    config.substitutions.append(("%emu-asan", "env " + emu_asan_cache))
else:
    try:
        asan = subprocess.run(["c++", "-print-file-name=libasan.so"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        asan = ""
    if asan and os.path.isabs(asan) and os.path.exists(asan):
        config.available_features.add("emu-asan")
        config.substitutions.append(
            ("%emu-asan",
             "env %s KILN_EMU_CXXFLAGS='-fsanitize=address "
             "-fno-omit-frame-pointer' LD_PRELOAD=%s "
             "ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0"
             % (emu_asan_cache, asan)))

# Whether this machine has a CUDA driver (the cuda device's tests of a
# missing driver run only where there is none).
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    config.available_features.add("no-cuda-driver")
