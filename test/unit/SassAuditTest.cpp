//===- SassAuditTest.cpp - the SASS audit on hand-written SASS ------------===//
//
// The parsing, the register dataflow, the loops and their loads in flight,
// the instruction mix and the resource reports of inspect/SassAudit.h, on
// small listings in cuobjdump -sass's format; the occupancy against the
// CUDA occupancy calculator's own header.
//
//===----------------------------------------------------------------------===//
#include "inspect/SassAudit.h"

#include <cuda_occupancy.h>
#include <gtest/gtest.h>

#include <cmath>

namespace kiln::sass {
namespace {

std::vector<Function> parse(const std::string &text) {
  auto functions = parseSass(text);
  EXPECT_TRUE(functions.ok()) << functions.status();
  return functions.ok() ? *functions : std::vector<Function>{};
}

Instruction one(const std::string &line) {
  auto functions = parse("Function : f\n" + line + "\n");
  EXPECT_EQ(functions.size(), 1u);
  EXPECT_EQ(functions[0].code.size(), 1u);
  return functions[0].code.at(0);
}

TEST(SassAudit, ParsesCuobjdumpListings) {
  auto functions = parse(R"sass(
	code for sm_90
		Function : kiln_decode
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;          /* 0x00000a00ff017b82 */
                                                                   /* 0x000fe20000000800 */
        /*0120*/              @!P0 LDG.E.128.CONSTANT R8, desc[UR4][R8.64] ;  /* 0x0000000408087981 */
        /*0130*/                   EXIT ;                          /* 0x000000000000794d */
		Function : helper
        /*0000*/                   RET.REL.NODEC R20 0x0 ;         /* 0x0000000014007950 */
)sass");
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0].name, "kiln_decode");
  ASSERT_EQ(functions[0].code.size(), 3u);
  const Instruction &ldg = functions[0].code[1];
  EXPECT_EQ(ldg.address, 0x120);
  EXPECT_EQ(ldg.predicate, "@!P0");
  EXPECT_EQ(ldg.opcode, "LDG.E.128.CONSTANT");
  EXPECT_EQ(ldg.base(), "LDG");
  EXPECT_EQ(ldg.operands, (std::vector<std::string>{"R8", "desc[UR4][R8.64]"}));
  EXPECT_EQ(ldg.accessBytes(), 16);
  EXPECT_TRUE(ldg.isGlobalLoad());
  EXPECT_TRUE(functions[0].code[2].operands.empty());
  EXPECT_EQ(functions[1].name, "helper");

  auto broken = parseSass("Function : f\n /*0010*/ FFMA R1, R2, R3, R4\n");
  EXPECT_FALSE(broken.ok());
}

TEST(SassAudit, RegistersReadAndWritten) {
  using V = std::vector<int>;
  Instruction ldg = one("/*0010*/ LDG.E.128 R8, desc[UR4][R20.64+-0x200] ;");
  EXPECT_EQ(ldg.writes(), (V{8, 9, 10, 11}));
  EXPECT_EQ(ldg.reads(), (V{20, 21}));
  Instruction stg = one("/*0010*/ STG.E.64 desc[UR4][R2.64], R6 ;");
  EXPECT_EQ(stg.writes(), V{});
  EXPECT_EQ(stg.reads(), (V{2, 3, 6, 7}));
  Instruction hadd = one("/*0010*/ HADD2.F32 R0, -RZ, R8.reuse.H0_H0 ;");
  EXPECT_EQ(hadd.writes(), V{0});
  EXPECT_EQ(hadd.reads(), V{8});
  // Uniform and special registers are not R registers; a predicate result.
  Instruction isetp = one("/*0010*/ ISETP.GT.AND P0, PT, R2, UR4, PT ;");
  EXPECT_EQ(isetp.writes(), V{});
  EXPECT_EQ(isetp.reads(), V{2});
  EXPECT_EQ(one("/*0010*/ S2R R3, SR_TID.X ;").reads(), V{});
  Instruction shfl = one("/*0010*/ SHFL.BFLY PT, R5, R4, 0x10, 0x1f ;");
  EXPECT_EQ(shfl.writes(), V{5});
  EXPECT_EQ(shfl.reads(), V{4});
  // CS2R moves a 64-bit special register: both halves are written.
  EXPECT_EQ(one("/*0010*/ CS2R R2, SRZ ;").writes(), (V{2, 3}));
  EXPECT_EQ(one("/*0010*/ CS2R.32 R2, SR_CLOCKLO ;").writes(), V{2});
  Instruction wide = one("/*0010*/ IMAD.WIDE R4, R17, 0x2, R14 ;");
  EXPECT_EQ(wide.writes(), (V{4, 5}));
  EXPECT_EQ(wide.reads(), (V{17, 14, 15}));
  Instruction ldsm = one("/*0010*/ LDSM.16.M88.2 R12, [R3+0x200] ;");
  EXPECT_EQ(ldsm.writes(), (V{12, 13}));
  EXPECT_EQ(ldsm.reads(), V{3});
}

// Four 16-byte weight loads, all issued before the FFMAs that use them:
// four loads (64 bytes) in flight per thread and iteration.
const char *kLoadsFirst = R"sass(
		Function : gemv
        /*0000*/                   MOV R2, RZ ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R20.64] ;
        /*0020*/                   LDG.E.128 R8, desc[UR4][R20.64+0x200] ;
        /*0030*/                   LDG.E.128 R12, desc[UR4][R20.64+0x400] ;
        /*0040*/                   LDG.E.128 R16, desc[UR4][R20.64+0x600] ;
        /*0050*/                   IADD3 R20, P1, R20, 0x800, RZ ;
        /*0060*/                   FFMA R2, R4, R5, R2 ;
        /*0070*/                   FFMA R2, R8, R9, R2 ;
        /*0080*/                   FFMA R2, R12, R13, R2 ;
        /*0090*/                   FFMA R2, R16, R17, R2 ;
        /*00a0*/                   ISETP.GE.U32.AND P0, PT, R20, R24, PT ;
        /*00b0*/              @!P0 BRA 0x10 ;
        /*00c0*/                   STG.E desc[UR4][R22.64], R2 ;
        /*00d0*/                   EXIT ;
        /*00e0*/                   BRA 0xe0;
)sass";

TEST(SassAudit, LoadsIssuedBeforeTheirFirstUseAreInFlight) {
  auto functions = parse(kLoadsFirst);
  std::vector<Loop> loops = findLoops(functions[0]);
  ASSERT_EQ(loops.size(), 1u); // the branch to itself is no loop
  EXPECT_EQ(loops[0].begin, 0x10);
  EXPECT_EQ(loops[0].end, 0xb0);
  EXPECT_EQ(loops[0].globalLoads, 4);
  EXPECT_EQ(loops[0].globalLoadBytes, 64);
  EXPECT_EQ(loops[0].loadsInFlight, 4);
  EXPECT_EQ(loops[0].bytesInFlight, 64);
}

// The same loads, each consumed at once: one in flight at a time.
const char *kEachUsedAtOnce = R"sass(
		Function : gemv
        /*0000*/                   MOV R2, RZ ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R20.64] ;
        /*0020*/                   FFMA R2, R4, R5, R2 ;
        /*0030*/                   LDG.E.128 R8, desc[UR4][R20.64+0x200] ;
        /*0040*/                   FFMA R2, R8, R9, R2 ;
        /*0050*/                   LDG.E.128 R12, desc[UR4][R20.64+0x400] ;
        /*0060*/                   FFMA R2, R12, R13, R2 ;
        /*0070*/                   LDG.E.128 R16, desc[UR4][R20.64+0x600] ;
        /*0080*/                   FFMA R2, R16, R17, R2 ;
        /*0090*/                   IADD3 R20, P1, R20, 0x800, RZ ;
        /*00a0*/                   ISETP.GE.U32.AND P0, PT, R20, R24, PT ;
        /*00b0*/              @!P0 BRA 0x10 ;
        /*00c0*/                   EXIT ;
)sass";

TEST(SassAudit, LoadsConsumedAtOnceAreOneInFlight) {
  auto functions = parse(kEachUsedAtOnce);
  std::vector<Loop> loops = findLoops(functions[0]);
  ASSERT_EQ(loops.size(), 1u);
  EXPECT_EQ(loops[0].globalLoads, 4);
  EXPECT_EQ(loops[0].globalLoadBytes, 64);
  EXPECT_EQ(loops[0].loadsInFlight, 1);
  EXPECT_EQ(loops[0].bytesInFlight, 16);
}

TEST(SassAudit, OverwritingALoadedRegisterEndsTheWindow) {
  auto functions = parse(R"sass(
		Function : f
        /*0000*/                   LDG.E.64 R4, desc[UR4][R20.64] ;
        /*0010*/                   LDG.E R6, desc[UR4][R20.64+0x8] ;
        /*0020*/                   MOV R5, RZ ;
        /*0030*/                   LDG.E R7, desc[UR4][R20.64+0xc] ;
        /*0040*/                   BRA 0x0 ;
)sass");
  Loop loop = findLoops(functions[0]).at(0);
  EXPECT_EQ(loop.loadsInFlight, 2);
  EXPECT_EQ(loop.bytesInFlight, 12);
  EXPECT_EQ(loop.globalLoadBytes, 16);
}

TEST(SassAudit, CopiesStayInFlightUntilAWaitForAllOfThem) {
  // cp.async double buffering: the next tile's copies, then a wait for the
  // previous group only (SB0, 0x1), then compute: all copies in flight.
  auto pipelined = parse(R"sass(
		Function : attention
        /*0000*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R8.64] ;
        /*0010*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3+0x800], desc[UR4][R8.64+0x80] ;
        /*0020*/                   LDGDEPBAR ;
        /*0030*/                   DEPBAR.LE SB0, 0x1 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/                   LDSM.16.M88.4 R12, [R2] ;
        /*0060*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0070*/                   BRA 0x0 ;
)sass");
  Loop loop = findLoops(pipelined[0]).at(0);
  EXPECT_EQ(loop.loadsInFlight, 2);
  EXPECT_EQ(loop.bytesInFlight, 32);

  // Waiting for every group (wait_group 0) after each copy: one at a time.
  auto serial = parse(R"sass(
		Function : attention
        /*0000*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R8.64] ;
        /*0010*/                   LDGDEPBAR ;
        /*0020*/                   DEPBAR.LE SB0, 0x0 ;
        /*0030*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3+0x800], desc[UR4][R8.64+0x80] ;
        /*0040*/                   BRA 0x0 ;
)sass");
  loop = findLoops(serial[0]).at(0);
  EXPECT_EQ(loop.globalLoads, 2);
  EXPECT_EQ(loop.loadsInFlight, 1);
  EXPECT_EQ(loop.bytesInFlight, 16);
}

TEST(SassAudit, AnMmaReadsItsFragmentsByItsShape) {
  // The decode GEMVs' refill: each load's registers are loaded again once
  // used. m16n8k16's B is two registers (R10, R11), its f32 C four: the
  // loads into R12 and R16 stay in flight past both mmas. An f16
  // accumulator is two registers; m16n8k8's A two and B one.
  auto refill = parse(R"sass(
		Function : gemv
        /*0000*/                   LDG.E.128 R12, desc[UR4][R2.64] ;
        /*0010*/                   LDG.E.128 R16, desc[UR4][R2.64+0x200] ;
        /*0020*/                   HMMA.16816.F32 R24, R4, R10, R24 ;
        /*0030*/                   HMMA.16816.F16 R8, R4, R10, R8 ;
        /*0040*/                   HMMA.1688.F32 R28, R20, R11, R28 ;
        /*0050*/                   LDG.E.128 R20, desc[UR4][R2.64+0x400] ;
        /*0060*/                   BRA 0x0 ;
)sass");
  Loop loop = findLoops(refill[0]).at(0);
  EXPECT_EQ(loop.loadsInFlight, 3);
  EXPECT_EQ(loop.bytesInFlight, 48);

  // A B fragment in a loaded register waits for it.
  auto waits = parse(R"sass(
		Function : gemv
        /*0000*/                   LDG.E.128 R12, desc[UR4][R2.64] ;
        /*0010*/                   HMMA.16816.F32 R24, R4, R12, R24 ;
        /*0020*/                   LDG.E.128 R16, desc[UR4][R2.64+0x200] ;
        /*0030*/                   BRA 0x0 ;
)sass");
  EXPECT_EQ(findLoops(waits[0]).at(0).loadsInFlight, 1);
}

TEST(SassAudit, SteadyStateIsTheInnermostLoopWithTheMostLoadBytes) {
  auto functions = parse(R"sass(
		Function : f
        /*0000*/                   LDG.E R2, desc[UR4][R20.64] ;
        /*0010*/                   LDG.E.64 R4, desc[UR4][R22.64] ;
        /*0020*/                   FADD R3, R4, R2 ;
        /*0030*/               @P0 BRA 0x10 ;
        /*0040*/                   LDG.E.128 R8, desc[UR4][R22.64] ;
        /*0050*/               @P1 BRA 0x0 ;
        /*0060*/                   LDG.E R12, desc[UR4][R22.64] ;
        /*0070*/               @P2 BRA 0x60 ;
        /*0080*/                   EXIT ;
)sass");
  // Loops: [0x0, 0x50] holds [0x10, 0x30] (not innermost); [0x10, 0x30]
  // loads 8 bytes, [0x60, 0x70] 4.
  EXPECT_EQ(findLoops(functions[0]).size(), 3u);
  std::optional<Loop> steady = steadyState(functions);
  ASSERT_TRUE(steady);
  EXPECT_EQ(steady->begin, 0x10);
  EXPECT_EQ(steady->globalLoadBytes, 8);

  EXPECT_FALSE(steadyState(parse("Function : f\n /*0000*/ BRA 0x0 ;\n")));
}

TEST(SassAudit, InstructionMix) {
  auto mix = instructionMix(parse(R"sass(
		Function : f
        /*0000*/                   LDG.E.128.CONSTANT R8, desc[UR4][R8.64] ;
        /*0010*/                   LDG.E.64 R4, desc[UR4][R2.64] ;
        /*0020*/                   LDG.E.U16 R6, desc[UR4][R2.64] ;
        /*0030*/                   LDS.U16 R7, [R3] ;
        /*0040*/                   LDS.128 R12, [R3] ;
        /*0050*/                   HMMA.16816.F32 R16, R12, R20, R16 ;
        /*0060*/                   FFMA R2, R4, R5, R2 ;
        /*0070*/                   HFMA2.MMA R0, -RZ, RZ, 0, 0 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0090*/                   STL [R1], R2 ;
        /*00a0*/                   LDL R2, [R1] ;
        /*00b0*/                   SHFL.BFLY PT, R5, R4, 0x10, 0x1f ;
        /*00c0*/                   PREEXIT ;
        /*00d0*/                   ACQBULK ;
)sass"));
  EXPECT_EQ(mix["LDG.128"], 1);
  EXPECT_EQ(mix["LDG.64"], 1);
  EXPECT_EQ(mix["LDG.16"], 1);
  EXPECT_EQ(mix["LDG.32"], 0);
  EXPECT_EQ(mix["LDS.16"], 1);
  EXPECT_EQ(mix["LDS.128"], 1);
  EXPECT_EQ(mix["HMMA"], 1);
  EXPECT_EQ(mix["FFMA"], 1);
  EXPECT_EQ(mix["HFMA2"], 1);
  EXPECT_EQ(mix["BAR"], 1);
  EXPECT_EQ(mix["STL"], 1);
  EXPECT_EQ(mix["LDL"], 1);
  EXPECT_EQ(mix["SHFL"], 1);
  EXPECT_EQ(mix["PREEXIT"], 1);
  EXPECT_EQ(mix["ACQBULK"], 1);
  EXPECT_EQ(mix["total"], 14);
}

// Programmatic dependent launch: what a kernel reads and writes on a path
// that has not passed its wait for the previous grid (ACQBULK). Parameters
// (sm_90, from c[0x0][0x210]): 0 x (an activation), 1 w (a weight), 2
// positions (the host's), 3 out.
TEST(SassAudit, WhatRunsBeforeTheWaitForThePreviousGrid) {
  auto kernel = [](const std::string &skip, const std::string &wait) {
    return parse(R"sass(
		Function : k
        /*0000*/                   PREEXIT ;
        /*0010*/                   LDC.64 R2, c[0x0][0x218] ;
        /*0020*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0030*/                   LDC.64 R8, c[0x0][0x220] ;
        /*0040*/                   LDG.E R10, desc[UR4][R8.64] ;
        /*0050*/                   ISETP.GE.AND P0, PT, R10, 0x10, PT ;
        /*0060*/               )sass" +
                 skip + R"sass( ;
        /*0070*/               )sass" +
                 wait + R"sass( ;
        /*0080*/                   LDC.64 R12, c[0x0][0x210] ;
        /*0090*/                   LDG.E R14, desc[UR4][R12.64] ;
        /*00a0*/                   LDC.64 R16, c[0x0][0x228] ;
        /*00b0*/                   STG.E desc[UR4][R16.64], R14 ;
        /*00c0*/                   EXIT ;
        /*00d0*/                   BRA 0xd0 ;
)sass")[0];
  };
  const uint64_t weights = 1 << 1, inputs = 1 << 2;
  auto wait = [&](const Function &f) {
    return gridWait(f, addressOrigins(f, 0x210), weights, inputs);
  };
  // The weight and the position ahead of the wait, x and the store after.
  GridWait g = wait(kernel("@P0 EXIT", "ACQBULK"));
  EXPECT_EQ(g.weightLoads, 1);
  EXPECT_EQ(g.inputLoads, 1);
  EXPECT_EQ(g.unwaitedLoads, 0);
  EXPECT_EQ(g.unwaitedStores, 0);
  // A branch around the wait reaches the store unwaited (but not x).
  g = wait(kernel("@P0 BRA 0xa0", "ACQBULK"));
  EXPECT_EQ(g.unwaitedLoads, 0);
  EXPECT_EQ(g.unwaitedStores, 1);
  // A predicated wait is no wait; no wait at all (sm_80's code) neither.
  for (const char *none : {"@P1 ACQBULK", "NOP"}) {
    g = wait(kernel("@P0 EXIT", none));
    EXPECT_EQ(g.weightLoads, 1) << none;
    EXPECT_EQ(g.inputLoads, 1) << none;
    EXPECT_EQ(g.unwaitedLoads, 1) << none;
    EXPECT_EQ(g.unwaitedStores, 1) << none;
  }
  // The wait counts once passed on every path into a loop: a load of x in
  // a loop after it is waited for, one in a loop that the entry reaches
  // first is not.
  Function loop = parse(R"sass(
		Function : k
        /*0000*/                   LDC.64 R12, c[0x0][0x210] ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x10, PT ;
        /*0020*/                   LDG.E R14, desc[UR4][R12.64] ;
        /*0030*/               @P0 BRA 0x20 ;
        /*0040*/                   ACQBULK ;
        /*0050*/                   LDG.E R15, desc[UR4][R12.64] ;
        /*0060*/               @P0 BRA 0x50 ;
        /*0070*/                   EXIT ;
)sass")[0];
  g = wait(loop);
  EXPECT_EQ(g.unwaitedLoads, 1);
  // A register that holds a weight's address under a predicate before the
  // wait and x's after it: the load ahead of the wait is the weight's (x's
  // address does not flow back into code before it, only around a loop:
  // the loop's top sees what its bottom loads).
  Function reused = parse(R"sass(
		Function : k
        /*0000*/               @!P1 LDC.64 R30, c[0x0][0x218] ;
        /*0010*/               @!P1 LDG.E R6, desc[UR4][R30.64+-0x800] ;
        /*0020*/                   ACQBULK ;
        /*0030*/                   LDC.64 R30, c[0x0][0x210] ;
        /*0040*/                   LDG.E R7, desc[UR4][R30.64] ;
        /*0050*/                   MOV R2, RZ ;
        /*0060*/                   LDG.E R8, desc[UR4][R2.64] ;
        /*0070*/                   LDC.64 R2, c[0x0][0x220] ;
        /*0080*/               @P0 BRA 0x60 ;
        /*0090*/                   EXIT ;
)sass")[0];
  g = wait(reused);
  EXPECT_EQ(g.weightLoads, 1);
  EXPECT_EQ(g.unwaitedLoads, 0);
  std::vector<uint64_t> origins = addressOrigins(reused, 0x210);
  EXPECT_EQ(origins[1], weights);
  EXPECT_EQ(origins[4], 1u);
  EXPECT_EQ(origins[6], inputs);
  // An address that comes from memory is not known to be a weight's.
  Function chased = parse(R"sass(
		Function : k
        /*0000*/                   LDC.64 R2, c[0x0][0x218] ;
        /*0010*/                   LDG.E.64 R4, desc[UR4][R2.64] ;
        /*0020*/                   LDG.E R6, desc[UR4][R4.64] ;
        /*0030*/                   ACQBULK ;
        /*0040*/                   EXIT ;
)sass")[0];
  g = wait(chased);
  EXPECT_EQ(g.weightLoads, 1);
  EXPECT_EQ(g.unwaitedLoads, 1);
  // cp.async of a weight ahead of the wait, with and without the predicate
  // that makes it copy zeros: its address is the bracketed operand.
  Function copies = parse(R"sass(
		Function : k
        /*0000*/                   LDC.64 R12, c[0x0][0x218] ;
        /*0010*/                   LDGSTS.E.BYPASS.128 [R7], desc[UR8][R12.64], !P0 ;
        /*0020*/                   LDGSTS.E.BYPASS.128 [R7+0x10], desc[UR8][R12.64+0x10] ;
        /*0030*/                   ACQBULK ;
        /*0040*/                   EXIT ;
)sass")[0];
  g = wait(copies);
  EXPECT_EQ(g.weightLoads, 2);
  EXPECT_EQ(g.unwaitedLoads, 0);
}

// What a warp's pass asks of each pipe (the cost model's compute roofs):
// HMMA by its shape, HGMMA as a warp's quarter of its warpgroup's, the
// shared-memory pipe at 128 bytes a cycle, the FMA pipe's FLOPs per lane;
// HFMA2.MMA (ptxas' constant move) is no arithmetic. The compute loop is
// the innermost one with the most tensor FLOPs, then FMA FLOPs.
TEST(SassAudit, PipeWorkAndTheComputeLoop) {
  auto functions = parse(R"sass(
		Function : f
        /*0000*/                   LDG.E.128 R8, desc[UR4][R22.64] ;
        /*0010*/                   FFMA R2, R4, R5, R2 ;
        /*0020*/                   FFMA R3, R4, R5, R3 ;
        /*0030*/               @P0 BRA 0x0 ;
        /*0040*/                   LDSM.16.M88.4 R12, [R3] ;
        /*0050*/                   LDSM.16.MT88.2 R16, [R3+0x200] ;
        /*0060*/                   LDS.128 R24, [R3] ;
        /*0070*/                   LDS.U16 R7, [R3] ;
        /*0080*/                   HMMA.16816.F32 R28, R12, R16, R28 ;
        /*0090*/                   HMMA.1688.F32 R32, R12, R18, R32 ;
        /*00a0*/                   HGMMA.64x128x16.F32 R40, gdesc[UR4], R40 ;
        /*00b0*/                   MUFU.EX2 R5, R4 ;
        /*00c0*/                   HFMA2 R6, R4, R5, R6 ;
        /*00d0*/                   HFMA2.MMA R0, -RZ, RZ, 0, 0 ;
        /*00e0*/                   FADD R1, R1, R2 ;
        /*00f0*/               @P1 BRA 0x40 ;
        /*0100*/                   EXIT ;
)sass");
  PipeWork w = pipeWork(functions[0], 0x40, 0xf0);
  EXPECT_EQ(w.instructions, 12);
  EXPECT_EQ(w.hmma, 2);
  EXPECT_EQ(w.mmaFlops, 2 * 16 * 8 * 16 + 2 * 16 * 8 * 8);
  EXPECT_EQ(w.hgmma, 1);
  EXPECT_EQ(w.wgmmaFlops, 2 * 64 * 128 * 16 / 4);
  EXPECT_EQ(w.sharedCycles, 4 + 2 + 4 + 1);
  EXPECT_EQ(w.mufu, 1);
  EXPECT_EQ(w.fma, 2); // HFMA2 and FADD
  EXPECT_EQ(w.fmaFlopsPerLane, 4 + 1);

  std::optional<Loop> compute = computeLoop(functions);
  ASSERT_TRUE(compute);
  EXPECT_EQ(compute->begin, 0x40);
  // Without tensor cores, the loop with the most FMA FLOPs; none computes.
  auto cuda = parse(R"sass(
		Function : f
        /*0000*/                   FFMA R2, R4, R5, R2 ;
        /*0010*/               @P0 BRA 0x0 ;
        /*0020*/                   FFMA R2, R4, R5, R2 ;
        /*0030*/                   FFMA R3, R4, R5, R3 ;
        /*0040*/               @P1 BRA 0x20 ;
        /*0050*/                   LDG.E R2, desc[UR4][R20.64] ;
        /*0060*/               @P2 BRA 0x50 ;
)sass");
  ASSERT_TRUE(computeLoop(cuda));
  EXPECT_EQ(computeLoop(cuda)->begin, 0x20);
  EXPECT_FALSE(computeLoop(parse(R"sass(
		Function : f
        /*0000*/                   LDG.E R2, desc[UR4][R20.64] ;
        /*0010*/               @P2 BRA 0x0 ;
)sass")));
}

TEST(SassAudit, ResourceReports) {
  auto usage = parseResUsage(R"sass(
Resource usage:
 Common:
  GLOBAL:62 CONSTANT[3]:256
 Function kiln_decode_attn:
  REG:32 STACK:32 SHARED:3105 LOCAL:0 CONSTANT[0]:608 TEXTURE:0
 Function kiln_gemv:
  REG:56 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:552 TEXTURE:0
)sass");
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage["kiln_decode_attn"].registers, 32);
  EXPECT_EQ(usage["kiln_decode_attn"].stackBytes, 32);
  EXPECT_EQ(usage["kiln_decode_attn"].sharedBytes, 3105);
  EXPECT_EQ(usage["kiln_gemv"].registers, 56);

  auto ptxas = parsePtxasInfo(R"sass(
ptxas info    : 62 bytes gmem
ptxas info    : Compiling entry function 'kiln_decode_attn' for 'sm_90'
ptxas info    : Function properties for kiln_decode_attn
    32 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 32 bytes cumulative stack size, 2081 bytes smem
ptxas info    : Compile time = 117.189 ms
)sass");
  ASSERT_EQ(ptxas.size(), 1u);
  const Resources &r = ptxas["kiln_decode_attn"];
  EXPECT_EQ(r.registers, 32);
  EXPECT_EQ(r.stackBytes, 32);
  EXPECT_EQ(r.spillStoreBytes, 8);
  EXPECT_EQ(r.spillLoadBytes, 4);
  EXPECT_EQ(r.sharedBytes, 2081);
}

// blocksPerSm against cudaOccMaxActiveBlocksPerMultiprocessor, NVIDIA's
// occupancy calculator, given the same limits, over block sizes, register
// counts and shared memory (past 48 KiB dynamic, the kernel opted in to
// the target's most).
TEST(SassAudit, OccupancyMatchesTheCudaOccupancyCalculator) {
  for (const char *target : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    SmLimits sm = *smLimitsFor(target);
    cudaOccDeviceProp props;
    props.computeMajor = target[3] - '0';
    props.computeMinor = target[4] - '0';
    props.maxThreadsPerBlock = 1024;
    props.maxThreadsPerMultiprocessor = sm.maxThreads;
    props.regsPerBlock = sm.registers;
    props.regsPerMultiprocessor = sm.registers;
    props.warpSize = 32;
    props.sharedMemPerBlock = 48 * 1024; // without opting in
    props.sharedMemPerMultiprocessor = size_t(sm.sharedBytes);
    props.numSms = sm.sms;
    props.sharedMemPerBlockOptin = size_t(sm.sharedPerBlock);
    EXPECT_EQ(sm.sharedPerBlock, sm.sharedBytes - 1024) << target;
    props.reservedSharedMemPerBlock = size_t(sm.reservedShared);
    cudaOccDeviceState state;
    for (int threads : {32, 64, 96, 128, 192, 256, 384, 512, 1024})
      for (int regs :
           {16, 24, 25, 32, 40, 42, 48, 56, 64, 72, 96, 128, 168, 255})
        for (int shared : {0, 128, 1152, 2081, 24708, 40000, 49152, 59904,
                           76800, 101376, 166912, 232448}) {
          const bool dynamic = shared > 48 * 1024;
          if (shared > sm.sharedPerBlock)
            continue;
          cudaOccFuncAttributes attr;
          attr.maxThreadsPerBlock = 1024;
          attr.numRegs = regs;
          attr.sharedSizeBytes = dynamic ? 0 : size_t(shared);
          attr.maxDynamicSharedSizeBytes = dynamic ? shared : 0;
          attr.shmemLimitConfig =
              dynamic ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
          cudaOccResult result;
          ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(
                        &result, &props, &attr, &state, threads,
                        dynamic ? shared : 0),
                    CUDA_OCC_SUCCESS);
          EXPECT_EQ(blocksPerSm(sm, threads, regs, shared),
                    result.activeBlocksPerMultiprocessor)
              << target << " " << threads << " threads, " << regs
              << " registers, " << shared << " bytes of shared memory";
        }
  }
  EXPECT_FALSE(smLimitsFor("sm_75"));
}

KernelAudit sampleAudit(const std::string &kernel, int hmma, double kb) {
  KernelAudit a;
  a.kernel = kernel;
  a.target = "sm_90";
  a.mix = instructionMix({});
  a.mix["HMMA"] = hmma;
  a.mix["LDL"] = 1;
  a.mix["STL"] = 2;
  a.launched = true;
  a.inFlightBytesPerSm = kb * 1024;
  return a;
}

TEST(SassAudit, Expectations) {
  std::vector<KernelAudit> audits = {
      sampleAudit("prefill.attn.attention_rope", 0, 12),
      sampleAudit("decode.mlp.down_proj_residual", 0, 31.5),
      sampleAudit("decode.mlp.norm_gate_up_swiglu", 0, 40)};
  auto ok = checkExpectation(audits, "decode.*: kb_in_flight >= 30");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->empty());
  auto broken =
      checkExpectation(audits, "decode.mlp.*@sm_90: kb_in_flight >= 32");
  ASSERT_TRUE(broken.ok());
  ASSERT_EQ(broken->size(), 1u);
  EXPECT_EQ(broken->front(), "decode.mlp.down_proj_residual (sm_90): "
                             "kb_in_flight is 31.5, expected >= 32");
  auto sum = checkExpectation(audits, "*: LDL + STL == 0");
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->size(), 3u);
  auto hmma = checkExpectation(audits, "prefill.attn.attention*: HMMA > 0");
  ASSERT_TRUE(hmma.ok());
  EXPECT_EQ(hmma->size(), 1u);

  EXPECT_FALSE(checkExpectation(audits, "decode.*: nonsense > 0").ok());
  EXPECT_FALSE(checkExpectation(audits, "decode.* HMMA > 0").ok());
  EXPECT_FALSE(checkExpectation(audits, "decode.*: HMMA > many").ok());
  EXPECT_FALSE(checkExpectation(audits, "nothing.*: HMMA > 0").ok());
  EXPECT_FALSE(checkExpectation(audits, "decode.*@sm_80: HMMA > 0").ok());
  // A loop's instructions per 16-byte load: 640 over 16 loads of 16 bytes
  // (a SwiGLU GEMV's two passes); none where the compute loop is not the
  // loading one.
  KernelAudit gemv = sampleAudit("decode.mlp.norm_gate_up_swiglu", 64, 64);
  gemv.loop = Loop();
  gemv.loop->begin = 0x100;
  gemv.loop->end = 0x2000;
  gemv.loop->globalLoads = 16;
  gemv.loop->globalLoadBytes = 256;
  gemv.computeInLoop = true;
  gemv.computeLoopBegin = 0x100;
  gemv.computeWork.instructions = 640;
  EXPECT_EQ(metric(gemv, "instructions_per_load"), 40.0);
  gemv.computeLoopBegin = 0x2100;
  EXPECT_TRUE(std::isinf(*metric(gemv, "instructions_per_load")));
  // With no audits, only the form is checked.
  EXPECT_TRUE(checkExpectation({}, "nothing.*: HMMA > 0").ok());
  EXPECT_FALSE(checkExpectation({}, "nothing.*: speed > 0").ok());
}

} // namespace
} // namespace kiln::sass
