//===- TestPasses.h - passes that print analyses for FileCheck --*- C++ -*-===//
#ifndef KILN_TEST_LIB_TESTPASSES_H
#define KILN_TEST_LIB_TESTPASSES_H

namespace kiln::test {
void registerTestPrintKVPlan();
void registerTestPrintBufferPlan();

inline void registerTestPasses() {
  registerTestPrintKVPlan();
  registerTestPrintBufferPlan();
}
} // namespace kiln::test

#endif // KILN_TEST_LIB_TESTPASSES_H
