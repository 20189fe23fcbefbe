//===- SassAudit.cpp ------------------------------------------------------===//
#include "inspect/SassAudit.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatAdapters.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <cstdlib>
#include <limits>

extern char **environ;

namespace kiln::sass {
using llvm::StringRef;

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

StringRef Instruction::base() const {
  return StringRef(opcode).split('.').first;
}

bool Instruction::hasModifier(StringRef m) const {
  llvm::SmallVector<StringRef> parts;
  StringRef(opcode).split(parts, '.');
  return llvm::is_contained(llvm::ArrayRef(parts).drop_front(), m);
}

int Instruction::accessBytes() const {
  if (hasModifier("128"))
    return 16;
  if (hasModifier("64"))
    return 8;
  if (hasModifier("U16") || hasModifier("S16"))
    return 2;
  if (hasModifier("U8") || hasModifier("S8"))
    return 1;
  return 4;
}

bool Instruction::isGlobalLoad() const {
  return base() == "LDG" || base() == "LDGSTS";
}

namespace {
/// A register range an operand names: R8 (1), R8.64 (2).
struct RegRange {
  int first, count;
};

/// The R registers in one operand ("desc[UR4][R20.64+-0x200]": R20-R21),
/// or with `prefix` "UR" the uniform ones (UR4), each `width` registers
/// wide unless its .64 suffix says 2.
llvm::SmallVector<RegRange> registersIn(StringRef operand, int width = 1,
                                        StringRef prefix = "R") {
  llvm::SmallVector<RegRange> regs;
  for (size_t i = 0; i + prefix.size() < operand.size(); ++i) {
    char prev = i ? operand[i - 1] : ' ';
    size_t digits = i + prefix.size();
    if (!operand.substr(i).starts_with(prefix) || llvm::isAlnum(prev) ||
        prev == '_' || !llvm::isDigit(operand[digits]))
      continue;
    size_t end = digits;
    while (end < operand.size() && llvm::isDigit(operand[end]))
      ++end;
    int reg = 0;
    operand.slice(digits, end).getAsInteger(10, reg);
    int count = operand.substr(end).starts_with(".64") ? 2 : width;
    regs.push_back({reg, std::max(count, 1)});
    i = end - 1;
  }
  return regs;
}

/// Instructions with no register result: all their operands are read.
bool writesNoRegister(StringRef base) {
  static const char *const kinds[] = {
      "ST",        "STG",     "STS",   "STL",      "RED",    "REDG",
      "BAR",       "BRA",     "BRX",   "JMP",      "EXIT",   "RET",
      "BSSY",      "BSYNC",   "CALL",  "WARPSYNC", "LDGSTS", "DEPBAR",
      "LDGDEPBAR", "MEMBAR",  "NOP",   "YIELD",    "ERRBAR", "CCTL",
      "FENCE",     "ARRIVES", "SYNCS", "BPT",      "KILL",   "NANOSLEEP"};
  return llvm::is_contained(kinds, base);
}

bool isLoad(StringRef base) {
  return base == "LDG" || base == "LDS" || base == "LDL" || base == "LD" ||
         base == "LDC" || base == "ATOM" || base == "ATOMG" || base == "ATOMS";
}

bool isStore(StringRef base) {
  return base == "ST" || base == "STG" || base == "STS" || base == "STL";
}

bool isDouble(StringRef base) {
  return base == "DADD" || base == "DMUL" || base == "DFMA" ||
         base == "DSETP" || base == "DMNMX";
}

/// The index of the operand an instruction writes its register result to
/// (-1: none). SHFL and ATOM* put a predicate result first.
int resultOperand(const Instruction &in) {
  StringRef base = in.base();
  if (writesNoRegister(base) || in.operands.empty())
    return -1;
  if ((base == "SHFL" || base.starts_with("ATOM")) &&
      registersIn(in.operands[0]).empty())
    return in.operands.size() > 1 ? 1 : -1;
  return 0;
}

/// The registers of operand i of an HMMA (0 its result D, 1 A, 2 B, 3 C)
/// by its shape and accumulator (m16n8k16: A 4, B 2, an f32 C 4, an f16
/// C 2; m16n8k8: A 2, B 1); 4, the widest, for a shape it does not know,
/// and for IMMA: never miss a use. (At 4 everywhere, a B fragment's load
/// seemed to read the next two registers: the decode GEMVs' refilled
/// loads, written there, looked waited for.)
int mmaFragmentWidth(const Instruction &in, int operand) {
  if (in.base() != "HMMA" || operand < 0 || operand > 3)
    return 4;
  const int acc = in.hasModifier("F16") && !in.hasModifier("F32") ? 2 : 4;
  if (in.hasModifier("16816"))
    return operand == 1 ? 4 : operand == 2 ? 2 : acc;
  if (in.hasModifier("1688"))
    return operand == 1 ? 2 : operand == 2 ? 1 : acc;
  return 4;
}

/// How many registers the result of `in` spans.
int resultWidth(const Instruction &in) {
  StringRef base = in.base();
  if (base == "LDSM") // .M88 one 8x8 matrix per register; .2, .4
    return in.hasModifier("4") ? 4 : in.hasModifier("2") ? 2 : 1;
  if (isLoad(base))
    return std::max(in.accessBytes() / 4, 1);
  if (base == "HMMA" || base == "IMMA")
    return mmaFragmentWidth(in, 0);
  if (base == "CS2R") // a 64-bit special register (CS2R R2, SRZ: R2 and R3)
    return in.hasModifier("32") ? 1 : 2;
  if (in.hasModifier("WIDE") || isDouble(base) || in.hasModifier("F64"))
    return 2;
  return 1;
}

void expand(llvm::SmallVector<RegRange> ranges, std::vector<int> &out) {
  for (RegRange r : ranges)
    for (int i = 0; i < r.count; ++i)
      if (r.first + i < 256)
        out.push_back(r.first + i);
}
} // namespace

std::vector<int> Instruction::writes() const {
  std::vector<int> regs;
  int result = resultOperand(*this);
  if (result >= 0)
    expand(registersIn(operands[result], resultWidth(*this)), regs);
  return regs;
}

std::vector<int> Instruction::reads() const {
  std::vector<int> regs;
  int result = resultOperand(*this);
  StringRef b = base();
  for (int i = 0, e = int(operands.size()); i < e; ++i) {
    if (i == result)
      continue;
    int width = 1;
    if (b == "HMMA" || b == "IMMA")
      width = mmaFragmentWidth(*this, i);
    else if (isStore(b) && i == e - 1)
      width = std::max(accessBytes() / 4, 1); // the data stored
    else if (hasModifier("WIDE") && i == e - 1)
      width = 2; // IMAD.WIDE's 64-bit addend
    else if (isDouble(b))
      width = 2;
    expand(registersIn(operands[i], width), regs);
  }
  return regs;
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {
/// Splits at the commas outside brackets.
std::vector<std::string> splitOperands(StringRef text) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '[' || c == '{' || c == '(')
      ++depth;
    else if (c == ']' || c == '}' || c == ')')
      --depth;
    else if (c == ',' && depth <= 0) {
      StringRef op = text.slice(start, i).trim();
      if (!op.empty())
        out.push_back(op.str());
      start = i + 1;
    }
  }
  return out;
}
} // namespace

absl::StatusOr<std::vector<Function>> parseSass(StringRef text) {
  std::vector<Function> functions;
  int lineNo = 0;
  for (StringRef line : llvm::split(text, '\n')) {
    ++lineNo;
    StringRef t = line.trim();
    if (t.consume_front("Function :")) {
      functions.push_back({t.trim().str(), {}});
      continue;
    }
    // "/*0120*/  @P0 LDG.E R2, desc[UR4][R2.64] ;  /* 0x...  */"; the
    // lines that hold only an encoding ("/* 0x... */") have a space.
    if (!t.starts_with("/*") || t.starts_with("/* "))
      continue;
    auto bad = [&] {
      return absl::InvalidArgumentError(
          llvm::formatv("SASS line {0} is not an instruction: {1}", lineNo, t)
              .str());
    };
    size_t close = t.find("*/");
    size_t semi = t.find(';');
    if (close == StringRef::npos || semi == StringRef::npos || semi < close ||
        functions.empty())
      return bad();
    Instruction in;
    if (t.slice(2, close).trim().getAsInteger(16, in.address))
      return bad();
    StringRef body = t.slice(close + 2, semi).trim();
    if (body.starts_with("@")) {
      auto [pred, rest] = body.split(' ');
      in.predicate = pred.str();
      body = rest.trim();
    }
    auto [opcode, operands] = body.split(' ');
    if (opcode.empty())
      return bad();
    in.opcode = opcode.str();
    in.operands = splitOperands(operands);
    functions.back().code.push_back(std::move(in));
  }
  return functions;
}

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

namespace {
/// A DEPBAR that waits until no cp.async group is pending
/// (cp.async.wait_group 0 / wait_all): "DEPBAR.LE SB0, 0x0".
bool waitsForAllCopies(const Instruction &in) {
  if (in.base() != "DEPBAR" || in.operands.size() < 2)
    return false;
  uint64_t pending = 1;
  return in.operands[0] == "SB0" &&
         !StringRef(in.operands[1]).getAsInteger(0, pending) && pending == 0;
}

void measure(const Function &f, Loop &loop) {
  std::bitset<256> pending; // registers loads of this iteration will write
  bool copies = false, stopped = false;
  for (const Instruction &in : f.code) {
    if (in.address < loop.begin || in.address > loop.end)
      continue;
    if (in.isGlobalLoad()) {
      ++loop.globalLoads;
      loop.globalLoadBytes += in.accessBytes();
    }
    if (stopped)
      continue;
    bool uses = copies && waitsForAllCopies(in);
    for (int r : in.reads())
      uses = uses || pending.test(r);
    for (int r : in.writes())
      uses = uses || pending.test(r);
    if (uses) {
      stopped = true;
      continue;
    }
    if (in.isGlobalLoad()) {
      ++loop.loadsInFlight;
      loop.bytesInFlight += in.accessBytes();
      loop.inFlight.push_back(int(&in - f.code.data()));
      copies = copies || in.base() == "LDGSTS";
      for (int r : in.writes())
        pending.set(r);
    }
  }
}
} // namespace

std::vector<Loop> findLoops(const Function &f) {
  std::map<int64_t, int64_t> ends; // label -> its last backward branch
  for (const Instruction &in : f.code) {
    if (in.base() != "BRA" || in.operands.empty())
      continue;
    int64_t target = 0;
    if (StringRef(in.operands.back()).getAsInteger(0, target))
      continue; // a label or register target: not cuobjdump's form
    // A branch to itself is the trap after EXIT, not a loop.
    if (target < in.address)
      ends[target] = std::max(ends[target], in.address);
  }
  std::vector<Loop> loops;
  for (auto [begin, end] : ends) {
    Loop loop;
    loop.begin = begin;
    loop.end = end;
    measure(f, loop);
    loops.push_back(loop);
  }
  return loops;
}

namespace {
/// `visit(function, loop)` for every innermost loop (one holding no other)
/// of `functions`, its `function` index set.
template <class Visit>
void forEachInnermostLoop(const std::vector<Function> &functions, Visit visit) {
  for (const Function &f : functions) {
    std::vector<Loop> loops = findLoops(f);
    for (Loop &l : loops) {
      l.function = int(&f - functions.data());
      if (llvm::none_of(loops, [&](const Loop &o) {
            return &o != &l && l.begin <= o.begin && o.end <= l.end;
          }))
        visit(f, l);
    }
  }
}
} // namespace

std::optional<Loop> steadyState(const std::vector<Function> &functions) {
  std::optional<Loop> best;
  forEachInnermostLoop(functions, [&](const Function &, const Loop &l) {
    if (l.globalLoadBytes > 0 &&
        (!best || l.globalLoadBytes > best->globalLoadBytes))
      best = l;
  });
  return best;
}

namespace {
/// 2 m n k of an HMMA by its shape modifier (HMMA.16816.F32: m16 n8 k16);
/// 0 for a shape this table does not know.
int64_t hmmaFlops(const Instruction &in) {
  llvm::SmallVector<StringRef> parts;
  StringRef(in.opcode).split(parts, '.');
  for (StringRef p : llvm::ArrayRef(parts).drop_front()) {
    int64_t k = 0;
    if (p == "884")
      return 2 * 8 * 8 * 4;
    if (p.consume_front("168") && !p.getAsInteger(10, k))
      return 2 * 16 * 8 * k;
  }
  return 0;
}

/// A warp's share of an HGMMA's 2 m n k (HGMMA.64x128x16.F32: a warpgroup
/// of 4 warps computes m64 n128 k16).
int64_t hgmmaFlops(const Instruction &in) {
  llvm::SmallVector<StringRef> parts;
  StringRef(in.opcode).split(parts, '.');
  for (StringRef p : llvm::ArrayRef(parts).drop_front()) {
    llvm::SmallVector<StringRef> mnk;
    p.split(mnk, 'x');
    int64_t m = 0, n = 0, k = 0;
    if (mnk.size() == 3 && !mnk[0].getAsInteger(10, m) &&
        !mnk[1].getAsInteger(10, n) && !mnk[2].getAsInteger(10, k))
      return 2 * m * n * k / 4;
  }
  return 0;
}

/// The shared-memory pipe's cycles of an instruction (128 bytes a cycle,
/// at least one), 0 for one that does not use it.
int64_t sharedCycles(const Instruction &in) {
  StringRef b = in.base();
  if (b == "LDS" || b == "STS")
    return std::max<int64_t>(1, 32 * in.accessBytes() / 128);
  if (b == "LDSM" || b == "STSM") { // .M88.4: four 8x8 matrices, 128 B each
    int64_t matrices = 1;
    for (StringRef m : {"2", "4"})
      if (in.hasModifier(m))
        m.getAsInteger(10, matrices);
    return matrices;
  }
  return 0;
}
} // namespace

PipeWork pipeWork(const Function &f, int64_t begin, int64_t end) {
  PipeWork w;
  for (const Instruction &in : f.code) {
    if (in.address < begin || in.address > end)
      continue;
    ++w.instructions;
    StringRef b = in.base();
    static const std::pair<StringRef, int> fma[] = {{"FFMA", 2},  {"FADD", 1},
                                                    {"FMUL", 1},  {"HFMA2", 4},
                                                    {"HADD2", 2}, {"HMUL2", 2}};
    // HFMA2.MMA with RZ operands is how ptxas moves a constant into a
    // register (on the MMA pipe): no arithmetic.
    for (auto [name, flops] : fma)
      if (b == name && !in.hasModifier("MMA")) {
        ++w.fma;
        w.fmaFlopsPerLane += flops;
      }
    w.mufu += b == "MUFU";
    w.sharedCycles += sharedCycles(in);
    if (b == "HMMA") {
      ++w.hmma;
      w.mmaFlops += hmmaFlops(in);
    } else if (b == "HGMMA") {
      ++w.hgmma;
      w.wgmmaFlops += hgmmaFlops(in);
    }
  }
  return w;
}

std::optional<Loop> computeLoop(const std::vector<Function> &functions) {
  std::optional<Loop> best;
  std::pair<int64_t, int64_t> bestFlops = {0, 0}; // tensor, then FMA pipe
  forEachInnermostLoop(functions, [&](const Function &f, const Loop &l) {
    PipeWork w = pipeWork(f, l.begin, l.end);
    std::pair<int64_t, int64_t> flops = {w.mmaFlops + w.wgmmaFlops,
                                         w.fmaFlopsPerLane};
    if (flops > bestFlops) {
      best = l;
      bestFlops = flops;
    }
  });
  if (bestFlops.first > 0)
    return best;
  // No innermost loop runs on tensor cores, but a loop around one may: a
  // tile loop with a small loop of its own inside (prefill attention's
  // conversion of a quantized cache's codes). The one with the most tensor
  // FLOPs, the shortest of a tie.
  std::optional<Loop> outer;
  int64_t outerFlops = 0;
  for (const Function &f : functions)
    for (Loop &l : findLoops(f)) {
      l.function = int(&f - functions.data());
      PipeWork w = pipeWork(f, l.begin, l.end);
      int64_t tensor = w.mmaFlops + w.wgmmaFlops;
      if (tensor > outerFlops ||
          (tensor > 0 && tensor == outerFlops &&
           l.end - l.begin < outer->end - outer->begin)) {
        outer = l;
        outerFlops = tensor;
      }
    }
  return outer ? outer : best;
}

namespace {
/// The kernel parameters an operand reads from the constant bank directly
/// (c[0x0][OFFSET], 8 bytes a parameter from `paramBase`): bit i for
/// parameter i.
uint64_t paramsIn(StringRef operand, int paramBase) {
  uint64_t mask = 0;
  for (size_t at = operand.find("c[0x0]["); at != StringRef::npos;
       at = operand.find("c[0x0][", at)) {
    at += 7;
    int64_t offset = 0;
    if (!operand.slice(at, operand.find(']', at)).getAsInteger(0, offset) &&
        offset >= paramBase && offset < paramBase + 64 * 8)
      mask |= uint64_t(1) << ((offset - paramBase) / 8);
  }
  return mask;
}

/// R registers as 0-255, uniform registers as 256-511.
void addRegisters(StringRef operand, int width, std::vector<int> &out) {
  expand(registersIn(operand, width), out);
  std::vector<int> uniform;
  expand(registersIn(operand, width, "UR"), uniform);
  for (int r : uniform)
    out.push_back(256 + r);
}
} // namespace

std::vector<uint64_t> addressOrigins(const Function &f, int paramBase) {
  std::vector<uint64_t> origin(512, 0), loads(f.code.size(), 0);
  // Program order, twice: the second pass adds, at each loop's top, what
  // its backward branches carried there in the first (values from a later
  // iteration), and nothing else: a register that code after the loops
  // reuses does not flow back into code before them.
  std::map<int64_t, std::vector<uint64_t>> backEdges; // loop top -> origins
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1)
      std::fill(origin.begin(), origin.end(), 0);
    for (size_t i = 0; i < f.code.size(); ++i) {
      const Instruction &in = f.code[i];
      if (pass == 1)
        if (auto it = backEdges.find(in.address); it != backEdges.end())
          for (size_t r = 0; r < origin.size(); ++r)
            origin[r] |= it->second[r];
      int result = resultOperand(in);
      uint64_t from = 0;
      std::vector<int> read;
      for (int o = 0, e = int(in.operands.size()); o < e; ++o)
        if (o != result) {
          from |= paramsIn(in.operands[o], paramBase);
          addRegisters(in.operands[o], 1, read);
        }
      for (int r : read)
        from |= origin[r];
      StringRef b = in.base();
      if (in.isGlobalLoad() && !in.operands.empty()) {
        // The global address: the last operand in brackets (LDG's only
        // one; LDGSTS's second, before the predicate a zero-filling copy
        // ends with: `[R7], desc[UR8][R12.64], !P0`).
        StringRef address = in.operands.back();
        for (const std::string &o : in.operands)
          if (StringRef(o).contains('['))
            address = o;
        std::vector<int> regs;
        addRegisters(address, 1, regs);
        uint64_t mask = paramsIn(address, paramBase);
        for (int r : regs)
          mask |= origin[r];
        loads[i] = mask;
      }
      int64_t target = 0;
      if (pass == 0 && b == "BRA" && !in.operands.empty() &&
          !StringRef(in.operands.back()).getAsInteger(0, target) &&
          target <= in.address) {
        std::vector<uint64_t> &carried = backEdges[target];
        carried.resize(origin.size(), 0);
        for (size_t r = 0; r < origin.size(); ++r)
          carried[r] |= origin[r];
      }
      if (result < 0)
        continue;
      // What memory holds is data, not an address derived from a
      // parameter, unless it is the parameter itself (LDC, ULDC).
      bool param = b == "LDC" || b == "ULDC";
      uint64_t value = (isLoad(b) || b == "LDSM") && !param ? 0 : from;
      std::vector<int> written;
      addRegisters(in.operands[result],
                   std::max(resultWidth(in), in.hasModifier("64") ? 2 : 1),
                   written);
      for (int r : written)
        origin[r] = in.predicate.empty() ? value : origin[r] | value;
    }
  }
  return loads;
}

GridWait gridWait(const Function &f, const std::vector<uint64_t> &origins,
                  uint64_t weights, uint64_t inputs) {
  const size_t n = f.code.size();
  std::map<int64_t, size_t> at; // address -> index
  for (size_t i = 0; i < n; ++i)
    at[f.code[i].address] = i;
  // Successors: the next instruction unless an unpredicated EXIT, RET or
  // BRA ends the path; a branch's (or call's) target. A BRA with a
  // condition among its operands (BRA.U !UP0, 0x...; BRA.DIV UR4, 0x...)
  // may fall through.
  std::vector<llvm::SmallVector<size_t, 2>> next(n);
  for (size_t i = 0; i < n; ++i) {
    const Instruction &in = f.code[i];
    StringRef b = in.base();
    bool ends =
        in.predicate.empty() &&
        (b == "EXIT" || b == "RET" || (b == "BRA" && in.operands.size() == 1) ||
         b == "BRX" || b == "JMX" || b == "JMP");
    if (!ends && i + 1 < n)
      next[i].push_back(i + 1);
    if ((b == "BRA" || b == "CALL" || b == "JMP") && !in.operands.empty()) {
      int64_t target = 0;
      StringRef t = StringRef(in.operands.back()).trim();
      if (!t.getAsInteger(0, target) && at.count(target))
        next[i].push_back(at[target]);
    }
  }
  // Waited[i]: every path from the entry to i has passed a wait (a must
  // analysis: start from "all waited", the entry not).
  std::vector<char> waited(n, 1), reached(n, 0);
  std::vector<size_t> work;
  if (n) {
    waited[0] = 0;
    reached[0] = 1;
    work.push_back(0);
  }
  while (!work.empty()) {
    size_t i = work.back();
    work.pop_back();
    const Instruction &in = f.code[i];
    bool out = waited[i] || (in.base() == "ACQBULK" && in.predicate.empty());
    for (size_t s : next[i]) {
      bool w = waited[s] && out;
      if (!reached[s] || w != bool(waited[s])) {
        reached[s] = 1;
        waited[s] = w;
        work.push_back(s);
      }
    }
  }
  GridWait g;
  for (size_t i = 0; i < n; ++i) {
    if (!reached[i] || waited[i])
      continue;
    const Instruction &in = f.code[i];
    StringRef b = in.base();
    if (b == "STG" || b == "ST" || b == "RED" || b == "REDG" || b == "ATOM" ||
        b == "ATOMG") {
      ++g.unwaitedStores;
      continue;
    }
    if (!in.isGlobalLoad())
      continue;
    uint64_t from = i < origins.size() ? origins[i] : 0;
    if (from == 0 || (from & ~(weights | inputs)))
      ++g.unwaitedLoads;
    else if (from & weights)
      ++g.weightLoads;
    else
      ++g.inputLoads;
  }
  return g;
}

std::map<std::string, int>
instructionMix(const std::vector<Function> &functions) {
  std::map<std::string, int> mix;
  for (const char *k :
       {"HMMA",    "HGMMA",     "LDGSTS",  "LDSM",  "LDG.8",  "LDG.16",
        "LDG.32",  "LDG.64",    "LDG.128", "LDS.8", "LDS.16", "LDS.32",
        "LDS.64",  "LDS.128",   "STG",     "STS",   "FFMA",   "HFMA2",
        "MUFU",    "BAR",       "LDL",     "STL",   "SHFL",   "ACQBULK",
        "PREEXIT", "F2FP.E4M3", "total"})
    mix[k] = 0;
  for (const Function &f : functions)
    for (const Instruction &in : f.code) {
      StringRef b = in.base();
      ++mix["total"];
      if (b == "LDG" || b == "LDS")
        ++mix[(b + "." + llvm::Twine(in.accessBytes() * 8)).str()];
      else if (b == "F2FP" && in.hasModifier("E4M3")) // fp8 codes to f16
        ++mix["F2FP.E4M3"];
      else if (mix.count(b.str()) && b != "total")
        ++mix[b.str()];
    }
  return mix;
}

//===----------------------------------------------------------------------===//
// Resource reports
//===----------------------------------------------------------------------===//

std::map<std::string, Resources> parseResUsage(StringRef text) {
  std::map<std::string, Resources> out;
  std::string current;
  for (StringRef line : llvm::split(text, '\n')) {
    StringRef t = line.trim();
    if (t.consume_front("Function ")) {
      current = t.rtrim(':').str();
      out[current];
      continue;
    }
    if (current.empty() || !t.starts_with("REG:"))
      continue;
    for (StringRef field : llvm::split(t, ' ')) {
      auto [key, value] = field.split(':');
      int64_t v = 0;
      if (value.getAsInteger(10, v))
        continue;
      if (key == "REG")
        out[current].registers = int(v);
      else if (key == "STACK")
        out[current].stackBytes = v;
      else if (key == "SHARED")
        out[current].sharedBytes = v;
    }
    current.clear();
  }
  return out;
}

namespace {
/// The integer right before `what` in `text` ("56 registers" -> 56).
std::optional<int64_t> numberBefore(StringRef text, StringRef what) {
  size_t at = text.find(what);
  if (at == StringRef::npos)
    return std::nullopt;
  StringRef head = text.take_front(at).rtrim();
  size_t start = head.find_last_not_of("0123456789");
  int64_t v = 0;
  if (head.substr(start == StringRef::npos ? 0 : start + 1).getAsInteger(10, v))
    return std::nullopt;
  return v;
}
} // namespace

std::map<std::string, Resources> parsePtxasInfo(StringRef text) {
  std::map<std::string, Resources> out;
  std::string current;
  for (StringRef line : llvm::split(text, '\n')) {
    StringRef t = line.trim();
    // "Compiling entry function 'NAME' for 'sm_90'", "Function properties
    // for NAME": the lines after them are about NAME.
    if (t.contains("Compiling entry function '")) {
      current = t.split('\'').second.split('\'').first.str();
      continue;
    }
    if (size_t at = t.find("Function properties for "); at != StringRef::npos) {
      current = t.substr(at + 24).trim().str();
      continue;
    }
    if (current.empty())
      continue;
    Resources &r = out[current];
    if (auto v = numberBefore(t, " bytes stack frame"))
      r.stackBytes = *v;
    if (auto v = numberBefore(t, " bytes spill stores"))
      r.spillStoreBytes = *v;
    if (auto v = numberBefore(t, " bytes spill loads"))
      r.spillLoadBytes = *v;
    if (auto v = numberBefore(t, " registers"))
      r.registers = int(*v);
    if (auto v = numberBefore(t, " bytes smem"))
      r.sharedBytes = *v;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Occupancy
//===----------------------------------------------------------------------===//

std::optional<SmLimits> smLimitsFor(StringRef target) {
  // CUDA C++ Programming Guide, "Technical Specifications per Compute
  // Capability"; cuda_occupancy.h's cudaOccMaxBlocksPerMultiprocessor. SM
  // counts: H100/H200 SXM 132, A100 108, A40 84, L40S 142. Kernel
  // parameters start at c[0x0][0x210] on sm_90, c[0x0][0x160] before it
  // (as the SASS of kiln's kernels reads them).
  SmLimits l;
  if (target == "sm_90")
    l = {"H100/H200 SXM", 132, 2048, 32, 65536, 228 * 1024, 0, 1024, 0x210};
  else if (target == "sm_80")
    l = {"A100", 108, 2048, 32, 65536, 164 * 1024, 0, 1024, 0x160};
  else if (target == "sm_86")
    l = {"A40", 84, 1536, 16, 65536, 100 * 1024, 0, 1024, 0x160};
  else if (target == "sm_89")
    l = {"L40S", 142, 1536, 24, 65536, 100 * 1024, 0, 1024, 0x160};
  else
    return std::nullopt;
  l.sharedPerBlock = maxSharedPerBlock(target.str());
  return l;
}

int blocksPerSm(const SmLimits &sm, int64_t threads, int registers,
                int64_t sharedBytes) {
  if (threads <= 0 || threads > 1024 || registers > 255)
    return 0;
  auto roundUp = [](int64_t x, int64_t unit) {
    return (x + unit - 1) / unit * unit;
  };
  constexpr int subPartitions = 4;
  int64_t warps = (threads + 31) / 32;
  int64_t fit = std::min<int64_t>(sm.maxBlocks, sm.maxThreads / 32 / warps);
  // Registers: per warp in units of 256, each warp in one of the four
  // sub-partitions, which hold a quarter of the file each.
  int64_t perWarp = roundUp(int64_t(std::max(registers, 1)) * 32, 256);
  if (perWarp * roundUp(warps, subPartitions) > sm.registers)
    return 0;
  int64_t warpsByRegs =
      (sm.registers / subPartitions / perWarp) * subPartitions;
  fit = std::min(fit, warpsByRegs / warps);
  // Shared memory: in units of 128 bytes, plus the driver's reserve.
  int64_t shared = roundUp(sharedBytes + sm.reservedShared, 128);
  if (shared > sm.sharedPerBlock + sm.reservedShared)
    return 0;
  fit = std::min(fit, sm.sharedBytes / shared);
  return int(std::max<int64_t>(fit, 0));
}

//===----------------------------------------------------------------------===//
// Tools
//===----------------------------------------------------------------------===//

namespace {
/// `name` in $KILN_SASS_TOOLS, then in `configured`, then on PATH.
std::optional<std::string> findTool(StringRef name, StringRef configured,
                                    std::string &looked) {
  llvm::SmallVector<std::string> dirs;
  if (const char *env = std::getenv("KILN_SASS_TOOLS"); env && *env)
    dirs.push_back(env);
  if (!configured.empty())
    dirs.push_back(configured.str());
  for (const std::string &dir : dirs) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    if (llvm::sys::fs::can_execute(path))
      return std::string(path);
  }
  if (auto onPath = llvm::sys::findProgramByName(name))
    return *onPath;
  looked = "$KILN_SASS_TOOLS, " +
           (configured.empty() ? "" : configured.str() + ", ") + "PATH";
  return std::nullopt;
}

/// Runs `program` with `args` (NVDISASM_PATH set to `nvdisasmDir` when
/// not empty) and returns what it printed on stdout, or stderr's first
/// line on failure.
absl::StatusOr<std::string> run(const std::string &program,
                                std::vector<std::string> args,
                                StringRef nvdisasmDir = "") {
  llvm::SmallString<128> out, err;
  if (llvm::sys::fs::createTemporaryFile("kiln-sass", "out", out) ||
      llvm::sys::fs::createTemporaryFile("kiln-sass", "err", err))
    return absl::InternalError("cannot make a temporary file");
  args.insert(args.begin(), program);
  llvm::SmallVector<StringRef> argv(args.begin(), args.end());
  std::optional<llvm::SmallVector<StringRef>> env;
  std::string nvdisasmPath = ("NVDISASM_PATH=" + nvdisasmDir).str();
  if (!nvdisasmDir.empty()) {
    env.emplace();
    for (char **e = environ; *e; ++e)
      if (!StringRef(*e).starts_with("NVDISASM_PATH="))
        env->push_back(*e);
    env->push_back(nvdisasmPath);
  }
  std::optional<StringRef> redirects[] = {StringRef(""), StringRef(out),
                                          StringRef(err)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(
      program, argv,
      env ? std::optional<llvm::ArrayRef<StringRef>>(*env) : std::nullopt,
      redirects, 0, 0, &message);
  auto readAndRemove = [](StringRef path) {
    auto buffer = llvm::MemoryBuffer::getFile(path);
    std::string text = buffer ? (*buffer)->getBuffer().str() : "";
    llvm::sys::fs::remove(path);
    return text;
  };
  std::string stdoutText = readAndRemove(out), stderrText = readAndRemove(err);
  if (rc != 0) {
    StringRef first = StringRef(stderrText).trim().split('\n').first;
    return absl::InternalError(
        llvm::formatv("{0} failed: {1}", llvm::sys::path::filename(program),
                      !first.empty() ? first : StringRef(message))
            .str());
  }
  return stdoutText + stderrText;
}

/// Writes `bytes` to a new temporary file with `suffix`; returns its path.
absl::StatusOr<std::string> writeTemporary(StringRef suffix, StringRef bytes) {
  llvm::SmallString<128> path;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("kiln-sass", suffix, fd, path))
    return absl::InternalError("cannot make a temporary file");
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << bytes;
  os.close();
  if (os.has_error())
    return absl::InternalError("cannot write " + std::string(path));
  return std::string(path);
}
} // namespace

absl::StatusOr<Tools> findTools() {
  Tools tools;
  std::string looked;
  struct Wanted {
    const char *name;
    StringRef configured;
    std::string *into;
  } wanted[] = {{"cuobjdump", KILN_SASS_TOOLS_DIR, &tools.cuobjdump},
                {"nvdisasm", KILN_SASS_TOOLS_DIR, &tools.nvdisasm},
                {"ptxas", KILN_CUDA_BIN_DIR, &tools.ptxas}};
  for (Wanted &w : wanted) {
    auto found = findTool(w.name, w.configured, looked);
    if (!found)
      return absl::NotFoundError(
          llvm::formatv("{0} not found (looked in {1}); "
                        "scripts/install-sass-tools.sh installs cuobjdump "
                        "and nvdisasm, the CUDA toolkit has ptxas",
                        w.name, looked)
              .str());
    *w.into = *found;
  }
  return tools;
}

absl::StatusOr<std::string> disassemble(const Tools &tools, StringRef cubin,
                                        bool resources) {
  auto cubinPath = writeTemporary("cubin", cubin);
  if (!cubinPath.ok())
    return cubinPath.status();
  auto listing =
      run(tools.cuobjdump, {resources ? "-res-usage" : "-sass", *cubinPath},
          llvm::sys::path::parent_path(tools.nvdisasm));
  llvm::sys::fs::remove(*cubinPath);
  return listing;
}

//===----------------------------------------------------------------------===//
// The audit
//===----------------------------------------------------------------------===//

namespace {
/// The largest launch of kernel `index` in any plan (most blocks, then most
/// threads); none when no plan launches it.
std::optional<Launch> largestLaunch(const Program &p, int index) {
  std::optional<Launch> best;
  auto size = [](const Launch &l) {
    return std::make_pair(l.grid[0] * l.grid[1] * l.grid[2], l.blockThreads);
  };
  auto consider = [&](const std::vector<Launch> &launches) {
    for (const Launch &l : launches)
      if (l.kernel == index && (!best || size(l) > size(*best)))
        best = l;
  };
  consider(p.decode);
  for (const StepPlan &plan : p.prefill)
    consider(plan.launches);
  for (const StepPlan &plan : p.batches)
    consider(plan.launches);
  return best;
}

absl::StatusOr<KernelAudit> auditKernel(const Bundle &bundle, int index,
                                        const std::string &target,
                                        const std::string &cubin,
                                        const Tools &tools) {
  const KernelCode &k = bundle.program.kernels[index];
  KernelAudit a;
  a.kernel = k.name;
  a.target = target;
  auto fail = [&](const absl::Status &s) {
    return absl::Status(s.code(), k.name + " (" + target +
                                      "): " + std::string(s.message()));
  };

  auto usage = disassemble(tools, cubin, /*resources=*/true);
  auto listing = disassemble(tools, cubin);
  if (!usage.ok())
    return fail(usage.status());
  if (!listing.ok())
    return fail(listing.status());

  // ptxas -v on the same compile's PTX: spills and static shared memory,
  // which the CUBIN does not record (NVRTC ran the same ptxas, -O3).
  auto ptx = bundle.ptx.find(k.name);
  if (ptx == bundle.ptx.end() || !ptx->second.count(target))
    return fail(absl::InvalidArgumentError("the bundle has no PTX for it"));
  std::string ptxText = ptx->second.at(target);
  ptxText.erase(std::find(ptxText.begin(), ptxText.end(), '\0'),
                ptxText.end()); // NVRTC's PTX ends with a NUL
  auto ptxPath = writeTemporary("ptx", ptxText);
  if (!ptxPath.ok())
    return ptxPath.status();
  std::string ptxasCubin = *ptxPath + ".cubin";
  auto info =
      run(tools.ptxas, {"-v", "-arch=" + target, *ptxPath, "-o", ptxasCubin});
  llvm::sys::fs::remove(*ptxPath);
  llvm::sys::fs::remove(ptxasCubin);
  if (!info.ok())
    return fail(info.status());

  auto fromCubin = parseResUsage(*usage);
  auto fromPtxas = parsePtxasInfo(*info);
  if (!fromCubin.count(k.entry) || !fromPtxas.count(k.entry))
    return fail(absl::InvalidArgumentError("no resource report for its entry " +
                                           k.entry));
  const Resources &c = fromCubin[k.entry], &p = fromPtxas[k.entry];
  if (c.registers != p.registers)
    return fail(absl::FailedPreconditionError(
        llvm::formatv(
            "ptxas at {0} gives {1} registers where the CUBIN has {2}: not the "
            "ptxas of the bundle's NVRTC, its spill figures would not apply",
            tools.ptxas, p.registers, c.registers)
            .str()));
  a.resources = p;
  a.resources.stackBytes = c.stackBytes;

  auto functions = parseSass(*listing);
  if (!functions.ok())
    return fail(functions.status());
  a.mix = instructionMix(*functions);
  a.ldl = a.mix["LDL"];
  a.stl = a.mix["STL"];
  a.loop = steadyState(*functions);
  if (std::optional<Loop> compute = computeLoop(*functions)) {
    a.computeWork =
        pipeWork((*functions)[compute->function], compute->begin, compute->end);
    a.computeInLoop = true;
    a.computeLoopFunction = compute->function;
    a.computeLoopBegin = compute->begin;
  } else {
    for (const Function &f : *functions) {
      PipeWork w = pipeWork(f, 0, std::numeric_limits<int64_t>::max());
      a.computeWork.instructions += w.instructions;
      a.computeWork.fma += w.fma;
      a.computeWork.fmaFlopsPerLane += w.fmaFlopsPerLane;
      a.computeWork.mufu += w.mufu;
      a.computeWork.sharedCycles += w.sharedCycles;
      a.computeWork.hmma += w.hmma;
      a.computeWork.hgmma += w.hgmma;
      a.computeWork.mmaFlops += w.mmaFlops;
      a.computeWork.wgmmaFlops += w.wgmmaFlops;
    }
  }

  std::optional<SmLimits> sm = smLimitsFor(target);
  std::optional<Launch> launch = largestLaunch(bundle.program, index);
  if (sm && launch) {
    a.launched = true;
    a.threads = launch->blockThreads;
    a.gridBlocks = launch->grid[0] * launch->grid[1] * launch->grid[2];
    a.dynamicSharedBytes = k.dynamicSharedBytes;
    a.blocksPerSmLimit =
        blocksPerSm(*sm, a.threads, a.resources.registers,
                    a.resources.sharedBytes + a.dynamicSharedBytes);
    a.warpsPerSm = a.blocksPerSmLimit * int((a.threads + 31) / 32);
    a.residentBlocksPerSm = std::min<double>(
        a.blocksPerSmLimit, double(a.gridBlocks) / double(sm->sms));
    // Parameters that are weights, and the host's step inputs (copied
    // before a step's kernels: nothing in the step writes them).
    uint64_t weights = 0, inputs = 0;
    for (size_t i = 0; i < launch->args.size() && i < 64; ++i) {
      Region r = launch->args[i].region;
      if (r == Region::Weight)
        weights |= uint64_t(1) << i;
      if (r == Region::Tokens || r == Region::Positions ||
          r == Region::BlockTable || r == Region::RowSequence ||
          r == Region::Count || r == Region::Sampling)
        inputs |= uint64_t(1) << i;
    }
    for (const Function &f : *functions)
      if (f.name == k.entry) {
        a.gridWait =
            gridWait(f, addressOrigins(f, sm->paramBase), weights, inputs);
        break;
      }
    if (a.loop) {
      const Function &f = (*functions)[a.loop->function];
      std::vector<uint64_t> origins = addressOrigins(f, sm->paramBase);
      for (int i : a.loop->inFlight)
        if (origins[i] & weights)
          a.weightBytesInFlight += f.code[i].accessBytes();
      double threads = double(a.threads) * a.residentBlocksPerSm;
      a.inFlightBytesPerSm = double(a.loop->bytesInFlight) * threads;
      a.weightInFlightBytesPerSm = double(a.weightBytesInFlight) * threads;
      a.loopBytesPerSm = double(a.loop->globalLoadBytes) * threads;
    }
  }
  return a;
}
} // namespace

absl::StatusOr<std::vector<KernelAudit>> auditBundle(const Bundle &bundle,
                                                     const Tools &tools) {
  struct Job {
    int kernel;
    const std::string *target, *cubin;
  };
  std::vector<Job> jobs;
  const auto &kernels = bundle.program.kernels;
  for (int i = 0, e = int(kernels.size()); i < e; ++i)
    if (auto cubins = bundle.cubin.find(kernels[i].name);
        cubins != bundle.cubin.end())
      for (const auto &[target, bytes] : cubins->second)
        jobs.push_back({i, &target, &bytes});
  // The tools take most of the time, each kernel apart: run them at once.
  std::vector<absl::StatusOr<KernelAudit>> results(
      jobs.size(), absl::UnknownError("not run"));
  llvm::DefaultThreadPool pool;
  for (size_t j = 0; j < jobs.size(); ++j)
    pool.async([&, j] {
      results[j] = auditKernel(bundle, jobs[j].kernel, *jobs[j].target,
                               *jobs[j].cubin, tools);
    });
  pool.wait();
  std::vector<KernelAudit> audits;
  for (auto &result : results) {
    if (!result.ok())
      return result.status();
    audits.push_back(std::move(*result));
  }
  return audits;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

static double instructionsPerLoad(const KernelAudit &a) {
  if (!a.computeInLoop || !a.loop || a.loop->globalLoadBytes <= 0 ||
      a.computeLoopFunction != a.loop->function ||
      a.computeLoopBegin != a.loop->begin)
    return std::numeric_limits<double>::infinity();
  return double(a.computeWork.instructions) * 16 / a.loop->globalLoadBytes;
}

std::optional<double> metric(const KernelAudit &a, StringRef name) {
  const Resources &r = a.resources;
  const Loop none;
  const Loop &loop = a.loop ? *a.loop : none;
  if (auto it = a.mix.find(name.str()); it != a.mix.end())
    return it->second;
  std::pair<const char *, double> figures[] = {
      {"regs", r.registers},
      {"spill_bytes", double(r.spillStoreBytes + r.spillLoadBytes)},
      {"stack_bytes", double(r.stackBytes)},
      {"shared_bytes", double(r.sharedBytes)},
      {"dynamic_shared_bytes", double(a.dynamicSharedBytes)},
      {"threads", double(a.threads)},
      {"grid_blocks", double(a.gridBlocks)},
      {"blocks_per_sm", a.blocksPerSmLimit},
      {"warps_per_sm", a.warpsPerSm},
      {"resident_blocks_per_sm", a.residentBlocksPerSm},
      {"loop_loads", loop.globalLoads},
      {"loop_bytes", double(loop.globalLoadBytes)},
      {"loads_in_flight", loop.loadsInFlight},
      // The loop's loads issued after it used one: each costs every
      // iteration a round trip (a group's scales loaded as it ends).
      {"loop_loads_waited", loop.globalLoads - loop.loadsInFlight},
      {"bytes_in_flight", double(loop.bytesInFlight)},
      {"weight_bytes_in_flight", double(a.weightBytesInFlight)},
      {"kb_in_flight", a.inFlightBytesPerSm / 1024},
      {"weight_kb_in_flight", a.weightInFlightBytesPerSm / 1024},
      {"kb_loop_bound", a.loopBytesPerSm / 1024},
      {"weight_loads_before_wait", a.gridWait.weightLoads},
      {"input_loads_before_wait", a.gridWait.inputLoads},
      {"unwaited_loads", a.gridWait.unwaitedLoads},
      {"unwaited_stores", a.gridWait.unwaitedStores},
      // The compute loop's instructions a pass (the JSON's
      // compute.instructions): what a loop bound by issue spends.
      {"compute_instructions", double(a.computeWork.instructions)},
      // The same per 16-byte load of the loop's (a GEMV's cost a byte of
      // weights, however many passes the loop holds); infinite where the
      // compute loop is not the steady state's or loads nothing.
      {"instructions_per_load", instructionsPerLoad(a)},
  };
  for (auto [key, value] : figures)
    if (name == key)
      return value;
  return std::nullopt;
}

std::string formatTable(const std::vector<KernelAudit> &audits) {
  std::string text;
  llvm::raw_string_ostream os(text);
  size_t width = 6;
  for (const KernelAudit &a : audits)
    width = std::max(width, a.kernel.size());
  auto kb = [](const KernelAudit &a, double bytes) {
    return a.launched ? llvm::formatv("{0:f1}", bytes / 1024).str() : "-";
  };
  // warps/SM: what fits, (what the launch's grid fills on average).
  // loop: global loads per thread and iteration, those in flight at once
  // (their bytes), and per SM the KB in flight (of weights) and the bound.
  os << llvm::formatv("{0} target regs spill stack LDL/STL     warps/SM  "
                      "HMMA LDGSTS  LDSM LDG.128  FFMA  BAR | loop: loads "
                      "in-flight  KB/SM (weights) bound\n",
                      llvm::fmt_align("kernel", llvm::AlignStyle::Left, width));
  for (const KernelAudit &a : audits) {
    auto m = [&](const char *k) { return a.mix.at(k); };
    std::string warps =
        a.launched
            ? llvm::formatv("{0} ({1:f1})", a.warpsPerSm,
                            a.residentBlocksPerSm * ((a.threads + 31) / 32))
                  .str()
            : "-";
    os << llvm::formatv(
        "{0} {1,-6} {2,4} {3,5} {4,5} {5,7} {6,12} {7,5} {8,6} {9,5} {10,7} "
        "{11,5} {12,4} |",
        llvm::fmt_align(a.kernel, llvm::AlignStyle::Left, width), a.target,
        a.resources.registers,
        a.resources.spillStoreBytes + a.resources.spillLoadBytes,
        a.resources.stackBytes, llvm::formatv("{0}/{1}", a.ldl, a.stl).str(),
        warps, m("HMMA"), m("LDGSTS"), m("LDSM"), m("LDG.128"), m("FFMA"),
        m("BAR"));
    if (a.loop)
      os << llvm::formatv(" {0,11} {1,10} {2,6} {3,9} {4,5}",
                          a.loop->globalLoads,
                          llvm::formatv("{0} ({1} B)", a.loop->loadsInFlight,
                                        a.loop->bytesInFlight)
                              .str(),
                          kb(a, a.inFlightBytesPerSm),
                          "(" + kb(a, a.weightInFlightBytesPerSm) + ")",
                          kb(a, a.loopBytesPerSm));
    else
      os << "           -          -      -         -     -";
    os << "\n";
  }
  return text;
}

std::string formatJson(const std::vector<KernelAudit> &audits) {
  llvm::json::Array kernels;
  for (const KernelAudit &a : audits) {
    llvm::json::Object mix;
    for (const auto &[k, v] : a.mix)
      mix[k] = v;
    llvm::json::Object o{
        {"kernel", a.kernel},
        {"target", a.target},
        {"mix", std::move(mix)},
        {"launched", a.launched},
    };
    for (const char *k :
         {"regs", "spill_bytes", "stack_bytes", "shared_bytes",
          "dynamic_shared_bytes", "threads", "grid_blocks", "blocks_per_sm",
          "warps_per_sm", "resident_blocks_per_sm", "weight_bytes_in_flight",
          "kb_in_flight", "weight_kb_in_flight", "kb_loop_bound",
          "weight_loads_before_wait", "input_loads_before_wait",
          "unwaited_loads", "unwaited_stores"})
      o[k] = *metric(a, k);
    o["LDL"] = a.ldl;
    o["STL"] = a.stl;
    if (a.loop)
      o["loop"] =
          llvm::json::Object{{"begin", a.loop->begin},
                             {"end", a.loop->end},
                             {"loads", a.loop->globalLoads},
                             {"bytes", a.loop->globalLoadBytes},
                             {"loads_in_flight", a.loop->loadsInFlight},
                             {"bytes_in_flight", a.loop->bytesInFlight}};
    else
      o["loop"] = nullptr;
    const PipeWork &w = a.computeWork;
    o["compute"] = llvm::json::Object{{"in_loop", a.computeInLoop},
                                      {"instructions", w.instructions},
                                      {"fma", w.fma},
                                      {"fma_flops_per_lane", w.fmaFlopsPerLane},
                                      {"mufu", w.mufu},
                                      {"shared_cycles", w.sharedCycles},
                                      {"hmma", w.hmma},
                                      {"hgmma", w.hgmma},
                                      {"mma_flops", w.mmaFlops},
                                      {"wgmma_flops", w.wgmmaFlops}};
    // JSON has no infinity: null where the figure does not apply.
    const double perLoad = instructionsPerLoad(a);
    o["instructions_per_load"] =
        std::isinf(perLoad) ? llvm::json::Value(nullptr) : perLoad;
    kernels.push_back(std::move(o));
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(kernels))) << "\n";
  return text;
}

absl::StatusOr<std::vector<std::string>>
checkExpectation(const std::vector<KernelAudit> &audits,
                 StringRef expectation) {
  auto bad = [&](StringRef why) {
    return absl::InvalidArgumentError(
        ("--sass-expect '" + expectation + "': " + why).str());
  };
  auto [selector, condition] = expectation.split(':');
  if (condition.empty())
    return bad("expected KERNELS[@TARGET]: METRIC[+METRIC...] OP NUMBER");
  auto [glob, target] = selector.trim().split('@');
  auto pattern = llvm::GlobPattern::create(glob.trim(), /*MaxSubPatterns=*/64);
  if (!pattern)
    return bad(llvm::toString(pattern.takeError()));
  StringRef ops[] = {">=", "<=", "==", "!=", ">", "<"};
  StringRef op;
  size_t at = StringRef::npos;
  for (StringRef o : ops)
    if ((at = condition.find(o)) != StringRef::npos) {
      op = o;
      break;
    }
  if (op.empty())
    return bad("no comparison (>=, <=, ==, !=, >, <)");
  StringRef lhs = condition.take_front(at).trim();
  StringRef rhs = condition.drop_front(at + op.size()).trim();
  double bound = 0;
  if (rhs.getAsDouble(bound))
    return bad("'" + rhs.str() + "' is not a number");
  llvm::SmallVector<StringRef> terms;
  lhs.split(terms, '+');
  KernelAudit blank;
  blank.mix = instructionMix({});
  for (StringRef term : terms)
    if (!metric(blank, term.trim()))
      return bad("no metric '" + term.trim().str() + "'");
  std::vector<std::string> broken;
  int matched = 0;
  for (const KernelAudit &a : audits) {
    if (!pattern->match(a.kernel) ||
        (!target.empty() && a.target != target.trim()))
      continue;
    ++matched;
    double value = 0;
    for (StringRef term : terms)
      value += metric(a, term.trim()).value_or(0);
    bool holds = op == ">="   ? value >= bound
                 : op == "<=" ? value <= bound
                 : op == "==" ? value == bound
                 : op == "!=" ? value != bound
                 : op == ">"  ? value > bound
                              : value < bound;
    std::string shown = value == std::floor(value)
                            ? std::to_string(int64_t(value))
                            : llvm::formatv("{0:f1}", value).str();
    if (!holds)
      broken.push_back(llvm::formatv("{0} ({1}): {2} is {3}, expected {4} {5}",
                                     a.kernel, a.target, lhs, shown, op, rhs)
                           .str());
  }
  if (matched == 0 && !audits.empty())
    return bad("no kernel matches");
  return broken;
}

} // namespace kiln::sass
