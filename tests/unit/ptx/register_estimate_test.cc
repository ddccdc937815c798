// The register estimate (register_estimate.h): live 32-bit units counted exactly on small
// kernels, and what a kernel reports.
#include "register_estimate.h"

#include <gtest/gtest.h>

#include <string>

#include "ptx_snippet.h"

namespace gpupool::ptx {
namespace {

using testing::loadOrFail;

const char kHeader[] = ".version 8.0\n.target sm_90\n.address_size 64\n";

// maxLiveRegisterUnits of the module's only kernel.
uint32_t liveUnits(const Module& m) {
  const ModuleImage& image = m.image();
  return maxLiveRegisterUnits(image, image.kernelFunction.at(0));
}

// 20 64-bit values loaded, then summed: all 20 and the base pointer are live at once (42 units).
TEST(RegisterEstimate, CountsSimultaneouslyLive64BitValuesTwice) {
  std::string body;
  for (int i = 1; i <= 20; ++i) {
    body += "  ld.global.u64 %rd" + std::to_string(i) + ", [%rd0+" + std::to_string(8 * i) + "];\n";
  }
  body += "  mov.u64 %rd21, 0;\n";
  for (int i = 1; i <= 20; ++i) body += "  add.s64 %rd21, %rd21, %rd" + std::to_string(i) + ";\n";
  auto m = loadOrFail(std::string(kHeader) +
                      ".visible .entry sum(.param .u64 p)\n{\n  .reg .b64 %rd<22>;\n"
                      "  ld.param.u64 %rd0, [p];\n" +
                      body + "  st.global.u64 [%rd0], %rd21;\n  ret;\n}\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(liveUnits(*m), 42u + 2u);  // the 20 values, the base and the running sum
  EXPECT_EQ(m->kernels()[0].numRegs, 22u);
  EXPECT_EQ(m->kernels()[0].allocatedRegs, 48u);  // 44 rounded up to 8
}

// A chain of 100 virtual registers, each dead once the next is computed: few live at once.
TEST(RegisterEstimate, ShortLivedVirtualRegistersDoNotAddUp) {
  std::string body = "  mov.u32 %r0, %tid.x;\n";
  for (int i = 1; i < 100; ++i) {
    body += "  add.u32 %r" + std::to_string(i) + ", %r" + std::to_string(i - 1) + ", 3;\n";
  }
  auto m = loadOrFail(std::string(kHeader) +
                      ".visible .entry chain(.param .u64 p)\n{\n  .reg .b32 %r<100>;\n"
                      "  .reg .b64 %rd<2>;\n  ld.param.u64 %rd1, [p];\n" +
                      body + "  st.global.u32 [%rd1], %r99;\n  ret;\n}\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(liveUnits(*m), 3u);  // the pointer (2) and one value: each add reuses its input
  EXPECT_EQ(m->kernels()[0].numRegs, 102u);
  EXPECT_EQ(m->kernels()[0].allocatedRegs, kMinEstimatedRegisters);
}

// %rd2 is last read at the top of the loop body, but the back edge keeps it live to the end of
// the body, where %r2 is live too.
TEST(RegisterEstimate, LoopsKeepValuesLiveAcrossTheBackEdge) {
  auto m = loadOrFail(std::string(kHeader) + R"(
.visible .entry loop(.param .u64 out, .param .u64 in)
{
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [in];
  mov.u32 %r1, 0;
LOOP:
  ld.global.u32 %r2, [%rd2];
  add.u32 %r1, %r1, %r2;
  setp.lt.u32 %p1, %r1, 100;
  @%p1 bra LOOP;
  st.global.u32 [%rd1], %r1;
  ret;
}
)");
  ASSERT_TRUE(m);
  EXPECT_EQ(liveUnits(*m), 6u);  // %rd1, %rd2, %r1 and the loaded %r2; predicates do not count
}

TEST(RegisterEstimate, RoundsToTheGranularityWithinTheBounds) {
  EXPECT_EQ(estimatedRegisters(0), kMinEstimatedRegisters);
  EXPECT_EQ(estimatedRegisters(17), 24u);
  EXPECT_EQ(estimatedRegisters(24), 24u);
  EXPECT_EQ(estimatedRegisters(250), kMaxRegistersPerThread);
  EXPECT_EQ(estimatedRegisters(100000), kMaxRegistersPerThread);
}

}  // namespace
}  // namespace gpupool::ptx
