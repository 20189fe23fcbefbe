//===- SassAudit.h - what each kernel compiled to, from its SASS -*- C++
//-*-===//
//
// The SASS audit (kiln inspect --sass, docs/sass-audit.md): for every
// kernel of a bundle and target, what ptxas made of it (registers, spills,
// local memory, shared memory), the occupancy that allows, the instruction
// mix, and the memory-level parallelism of its steady-state loop. Read from
// the CUBIN with cuobjdump (PyPI's nvidia-cuda-cuobjdump and -nvdisasm, put
// in build/sass-tools by scripts/install-sass-tools.sh) and from ptxas -v
// on the bundle's PTX; no GPU is needed.
//
// The parsing and the analysis work on text and are unit-tested on
// hand-written SASS (test/unit/SassAuditTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef KILN_INSPECT_SASSAUDIT_H
#define KILN_INSPECT_SASSAUDIT_H

#include "runtime/Bundle.h"

#include "absl/status/statusor.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::sass {

//===----------------------------------------------------------------------===//
// SASS text
//===----------------------------------------------------------------------===//

/// One instruction as cuobjdump -sass prints it:
///   /*0120*/ @!P0 LDG.E.128.CONSTANT R8, desc[UR4][R8.64] ;
struct Instruction {
  int64_t address = 0;
  std::string predicate;             // "@!P0", or empty
  std::string opcode;                // "LDG.E.128.CONSTANT"
  std::vector<std::string> operands; // "R8", "desc[UR4][R8.64]"

  /// The opcode up to its first dot ("LDG").
  llvm::StringRef base() const;
  /// Whether one of the opcode's dot-separated modifiers is `m`.
  bool hasModifier(llvm::StringRef m) const;
  /// Bytes one thread moves for a load or store (LDG.E.128: 16; .64: 8;
  /// .U16/.S16: 2; .U8/.S8: 1; otherwise 4).
  int accessBytes() const;
  /// A global load: LDG, or LDGSTS (cp.async, global to shared).
  bool isGlobalLoad() const;
  /// The registers (R0-R255) it reads and writes. Widths follow the
  /// operand's .64 suffix, the access width of loads and stores, and a
  /// small table for instructions whose operands are wider than they print
  /// (HMMA fragments, IMAD.WIDE's addend, fp64): see SassAudit.cpp.
  std::vector<int> reads() const, writes() const;
};

/// A function of cuobjdump -sass's listing and its instructions.
struct Function {
  std::string name;
  std::vector<Instruction> code;
};

/// Every function of a cuobjdump -sass listing (an error names a line it
/// cannot read).
absl::StatusOr<std::vector<Function>> parseSass(llvm::StringRef text);

/// A loop: the instructions from a label to a backward branch to it.
struct Loop {
  int64_t begin = 0, end = 0; // addresses of its first and last instruction
  int globalLoads = 0;        // LDG and LDGSTS in its body, per thread
  int64_t globalLoadBytes = 0;
  /// Memory-level parallelism, per thread and iteration: the global loads
  /// issued, in program order from the loop's top, before the first
  /// instruction that reads (or overwrites) a register one of them loads,
  /// or, for LDGSTS, before a DEPBAR that waits for every copy group.
  int loadsInFlight = 0;
  int64_t bytesInFlight = 0;
  std::vector<int> inFlight; // those loads, as indices into Function::code
  int function = 0;          // steadyState: the index of its function
};

/// The loops of `f`, by address. Two branches back to one label are one
/// loop (to the later branch).
std::vector<Loop> findLoops(const Function &f);

/// The steady state: of the innermost loops (those containing no other
/// loop) of all of `functions`, the one with the most global load bytes;
/// none when no loop loads from global memory.
std::optional<Loop> steadyState(const std::vector<Function> &functions);

/// For each instruction of `f` that loads from global memory, the kernel
/// parameters its address is computed from (bit i: parameter i, 8 bytes
/// each in the constant bank from `paramBase`); 0 for the others. Follows
/// registers (R and UR) through arithmetic in program order, and around
/// each loop from its backward branches to its top; a value loaded from
/// memory starts afresh (a block table's entry is not its table).
std::vector<uint64_t> addressOrigins(const Function &f, int paramBase);

/// Programmatic dependent launch (docs/kernels.md): where a kernel's global
/// memory accesses stand to its wait for the previous grid (ACQBULK, PTX
/// griddepcontrol.wait). The counts are of instructions that some path
/// from the kernel's entry reaches without passing an (unpredicated)
/// ACQBULK, by what their address comes from (addressOrigins): a weight,
/// only the host's step inputs, or anything else (an activation, the KV
/// pool, scratch: what an earlier kernel writes, or an address from memory).
struct GridWait {
  int weightLoads = 0, inputLoads = 0; // may come before the wait
  int unwaitedLoads = 0;               // must not: the rest
  int unwaitedStores = 0; // global stores, reductions and atomics: none may
};
/// `weights` and `inputs`: the parameters (bit i: parameter i) that are
/// weights and the host's inputs. Branches are followed (BRA, CALL, EXIT,
/// RET; a predicated one may fall through).
GridWait gridWait(const Function &f, const std::vector<uint64_t> &origins,
                  uint64_t weights, uint64_t inputs);

/// Static counts of the instructions the audit reports, by category:
/// "HMMA", "HGMMA", "LDGSTS", "LDSM", "LDG.8", "LDG.16", "LDG.32",
/// "LDG.64", "LDG.128", "LDS.8" ... "LDS.128", "STG", "STS", "FFMA",
/// "HFMA2", "MUFU", "BAR", "LDL", "STL", "SHFL", "ACQBULK", "PREEXIT"
/// (griddepcontrol.wait and .launch_dependents), "F2FP.E4M3" (fp8 codes
/// converted to f16 pairs, sm_89 on), and "total". Static: each
/// instruction once, whether it runs once or in a loop.
std::map<std::string, int>
instructionMix(const std::vector<Function> &functions);

/// What one warp's pass through a stretch of code asks of an SM's pipes,
/// each instruction once (the cost model's compute roofs, tune/Predict.h):
/// instructions issued; the FMA pipe's (FFMA, FADD, FMUL, HFMA2, HADD2,
/// HMUL2) and their FLOPs per lane (2 an FFMA, 4 an HFMA2, ...); MUFU (the
/// special-function unit: exp2, rcp, ...); the shared-memory pipe's cycles
/// (an LDS, STS or LDSM moves 128 bytes a cycle, at least a cycle each;
/// bank conflicts are not seen); and the tensor cores' FLOPs: 2 m n k an
/// HMMA (mma.sync, by its shape: .16816 is 4096), a quarter of a warpgroup's
/// 2 m n k an HGMMA (wgmma, sm_90).
struct PipeWork {
  int instructions = 0;
  int fma = 0;
  int64_t fmaFlopsPerLane = 0;
  int mufu = 0;
  int64_t sharedCycles = 0;
  int hmma = 0, hgmma = 0;
  int64_t mmaFlops = 0, wgmmaFlops = 0; // per warp
};

/// The pipes' work of the instructions of `f` from address `begin` to
/// `end` (inclusive).
PipeWork pipeWork(const Function &f, int64_t begin, int64_t end);

/// The compute steady state: of the innermost loops of all of `functions`,
/// the one whose body has the most FLOPs (tensor-core FLOPs, then the FMA
/// pipe's x 32 lanes); none when no loop computes.
std::optional<Loop> computeLoop(const std::vector<Function> &functions);

//===----------------------------------------------------------------------===//
// ptxas' figures
//===----------------------------------------------------------------------===//

/// One function's resources, from cuobjdump -res-usage (registers, stack)
/// and ptxas -v (spills, static shared memory).
struct Resources {
  int registers = 0;
  int64_t stackBytes = 0;  // the local-memory frame per thread
  int64_t sharedBytes = 0; // static shared memory per block
  int64_t spillStoreBytes = 0, spillLoadBytes = 0;
};

/// cuobjdump -res-usage: "Function NAME:" then "REG:32 STACK:0 SHARED:0
/// ..." for each function, by name (registers and stack; shared is the
/// CUBIN's section, which on sm_90 includes 1 KiB the driver reserves).
std::map<std::string, Resources> parseResUsage(llvm::StringRef text);

/// ptxas -v's report: registers, stack, spills and shared memory per
/// function, by name.
std::map<std::string, Resources> parsePtxasInfo(llvm::StringRef text);

//===----------------------------------------------------------------------===//
// Occupancy
//===----------------------------------------------------------------------===//

/// A target's per-SM limits, as the CUDA occupancy calculator
/// (cuda_occupancy.h) and the CUDA C++ Programming Guide's table of
/// technical specifications per compute capability give them, and the SM
/// count of the GPU kiln assumes for it.
struct SmLimits {
  std::string gpu; // the GPU whose SM count is used
  int sms = 0;
  int maxThreads = 0, maxBlocks = 0;
  int registers = 65536;      // per SM and per block
  int64_t sharedBytes = 0;    // per SM, the largest carveout
  int64_t sharedPerBlock = 0; // per block, opted in
  int reservedShared = 1024;  // per block, for the driver
  int paramBase = 0x210;      // kernel parameter 0 in constant bank 0
};

/// sm_80, sm_86, sm_89 and sm_90; none for other targets.
std::optional<SmLimits> smLimitsFor(llvm::StringRef target);

/// Blocks of `threads` threads using `registers` registers each and
/// `sharedBytes` of shared memory (static and dynamic) one SM holds at once (0:
/// none fits), with cuda_occupancy.h's rules: registers allocated per warp in
/// units of 256, warps spread over 4 sub-partitions; shared memory in units
/// of 128 bytes, plus the reserved 1 KiB per block.
int blocksPerSm(const SmLimits &sm, int64_t threads, int registers,
                int64_t sharedBytes);

//===----------------------------------------------------------------------===//
// The audit
//===----------------------------------------------------------------------===//

/// Where the tools are: $KILN_SASS_TOOLS (a folder) first, then the folder
/// CMake configured (build/sass-tools/bin; the CUDA toolkit's bin folder
/// for ptxas), then PATH.
struct Tools {
  std::string cuobjdump, nvdisasm, ptxas;
};
/// A one-line error naming what is missing and where it looked.
absl::StatusOr<Tools> findTools();

/// cuobjdump's listing of a CUBIN: -sass (the instructions) or, with
/// `resources`, -res-usage.
absl::StatusOr<std::string>
disassemble(const Tools &tools, llvm::StringRef cubin, bool resources = false);

/// One kernel for one target.
struct KernelAudit {
  std::string kernel, target;
  Resources resources;
  int ldl = 0, stl = 0;           // local memory instructions
  int64_t dynamicSharedBytes = 0; // a block's, beside resources' static
  int64_t threads = 0;            // per block, of the launch below
  int64_t gridBlocks = 0;         // of the launch below
  int blocksPerSmLimit = 0;       // occupancy: what fits on an SM
  int warpsPerSm = 0;             // at that occupancy
  double residentBlocksPerSm = 0; // min(occupancy, grid blocks / SMs)
  std::map<std::string, int> mix;
  std::optional<Loop> loop; // the steady state
  /// The pipes' work of one pass through the compute steady state
  /// (computeLoop; the whole kernel, each instruction once, when no loop
  /// computes), and whether it came from a loop.
  PipeWork computeWork;
  bool computeInLoop = false;
  int computeLoopFunction = 0;  // with computeInLoop: the loop's function
  int64_t computeLoopBegin = 0; // and its first instruction's address
  /// Of the loop's bytesInFlight, those whose address comes from a weight
  /// parameter (per thread and iteration).
  int64_t weightBytesInFlight = 0;
  GridWait gridWait; // of its launch's parameters (launched kernels)
  /// Bytes in flight per SM: the loop's bytesInFlight (and its weight
  /// bytes) x threads x resident blocks, and the upper bound (every load
  /// byte of the loop body).
  double inFlightBytesPerSm = 0, weightInFlightBytesPerSm = 0,
         loopBytesPerSm = 0;
  bool launched = false; // false: no plan launches it (nothing per SM)
};

/// Audits every kernel of `bundle` for every target it holds, in the
/// bundle's kernel order, then by target. A kernel launched with several
/// shapes is audited at its largest launch (the most blocks, then the most
/// threads): the one whose time matters most.
absl::StatusOr<std::vector<KernelAudit>> auditBundle(const Bundle &bundle,
                                                     const Tools &tools);

/// The audit as a table for people, and as JSON for programs.
std::string formatTable(const std::vector<KernelAudit> &audits);
std::string formatJson(const std::vector<KernelAudit> &audits);

/// A KernelAudit's figure by the name the table and JSON use ("regs",
/// "spill_bytes", "stack_bytes", "LDL", "warps_per_sm", "HMMA", "LDG.128",
/// "loop_loads", "kb_in_flight", ...); none for an unknown name.
std::optional<double> metric(const KernelAudit &audit, llvm::StringRef name);

/// An expectation such as "decode.mlp.*: kb_in_flight >= 32" or
/// "*@sm_90: LDL + STL == 0": kernels (a glob, optionally @target), a sum
/// of metrics, a comparison and a number. Returns one line per kernel that
/// breaks it (empty: it holds), or an error for a malformed expectation or
/// one that matches no kernel. With no audits it only checks the form.
absl::StatusOr<std::vector<std::string>>
checkExpectation(const std::vector<KernelAudit> &audits,
                 llvm::StringRef expectation);

} // namespace kiln::sass

#endif // KILN_INSPECT_SASSAUDIT_H
