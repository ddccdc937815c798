// The emu's linker (server/backends/emu/emu_link.h): PTX units merged into one module, externs
// resolved across units, internal names kept apart, and the errors nvlink reports.
#include "server/backends/emu/emu_link.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/backends/emu/ptx/ptx_module.h"

namespace gpupool::server {
namespace {

constexpr const char* kCaller = R"(
.version 8.0
.target sm_75
.address_size 64
.extern .func (.param .b32 r) twice(.param .b32 x);
.extern .global .align 4 .u32 bias;
.global .align 4 .u32 counter;  // internal: the callee has one of its own
.visible .entry caller(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.global.u32 %r1, [bias];
  { .param .b32 a; .param .b32 r;
    st.param.b32 [a], %r1;
    call.uni (r), twice, (a);
    ld.param.b32 %r2, [r]; }
  ld.global.u32 %r3, [counter];
  add.s32 %r2, %r2, %r3;
  st.global.u32 [%rd1], %r2;
  ret;
}
)";

constexpr const char* kCallee = R"(
.version 8.3
.target sm_75
.address_size 64
.visible .global .align 4 .u32 bias = 5;
.global .align 4 .u32 counter = 1;
.visible .func (.param .b32 r) twice(.param .b32 x)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [x];
  add.s32 %r2, %r1, %r1;
  st.param.b32 [r], %r2;
  ret;
}
.visible .entry callee() { ret; }
)";

LinkInput ptx(const char* text, const char* name) {
  return {CU_JIT_INPUT_PTX, name,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text), strlen(text) + 1)};
}

TEST(EmuLinkTest, MergesUnitsIntoOneLoadableModule) {
  std::vector<LinkInput> inputs = {ptx(kCaller, "caller.ptx"), ptx(kCallee, "callee.ptx")};
  LinkOutcome outcome;
  emuLink(inputs, 90, true, &outcome);
  ASSERT_EQ(outcome.result, CUDA_SUCCESS) << outcome.errorLog;
  ASSERT_FALSE(outcome.image.empty());
  EXPECT_EQ(outcome.image.back(), 0);
  std::string text(reinterpret_cast<const char*>(outcome.image.data()));
  EXPECT_NE(text.find(".version 8.3"), std::string::npos) << "the newest PTX version is kept";
  EXPECT_EQ(text.find(".extern .global"), std::string::npos) << "defined externs are dropped";
  auto module = ptx::Module::load(text);
  ASSERT_TRUE(module) << module.status().message;
  EXPECT_EQ((*module)->kernels().size(), 2u);
  EXPECT_EQ((*module)->globals().size(), 3u) << "both internal counters and bias";
  EXPECT_NE(outcome.infoLog.find("caller"), std::string::npos);
}

TEST(EmuLinkTest, UnresolvedExternIsReportedInTheErrorLog) {
  std::vector<LinkInput> inputs = {ptx(kCaller, "caller.ptx")};
  LinkOutcome outcome;
  emuLink(inputs, 90, false, &outcome);
  EXPECT_EQ(outcome.result, CUDA_ERROR_INVALID_PTX);
  EXPECT_TRUE(outcome.image.empty());
  EXPECT_NE(outcome.errorLog.find("Undefined reference to 'twice' in 'caller.ptx'"),
            std::string::npos)
      << outcome.errorLog;
}

TEST(EmuLinkTest, TwoDefinitionsOfOneSymbolAreAnError) {
  std::vector<LinkInput> inputs = {ptx(kCallee, "a.ptx"), ptx(kCallee, "b.ptx")};
  LinkOutcome outcome;
  emuLink(inputs, 90, false, &outcome);
  EXPECT_EQ(outcome.result, CUDA_ERROR_INVALID_PTX);
  EXPECT_NE(outcome.errorLog.find("Multiple definition of"), std::string::npos);
}

TEST(EmuLinkTest, AnInternalSymbolMayShareTheNameOfAnotherUnitsExport) {
  constexpr const char* kInternal = R"(
.version 8.0
.target sm_75
.address_size 64
.global .align 4 .u32 level = 1;
.visible .entry readsItsOwn(.param .u64 out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.global.u32 %r1, [level];
  st.global.u32 [%rd1], %r1;
  ret;
}
)";
  constexpr const char* kExported = R"(
.version 8.0
.target sm_75
.address_size 64
.visible .global .align 4 .u32 level = 2;
)";
  std::vector<LinkInput> inputs = {ptx(kInternal, "a.ptx"), ptx(kExported, "b.ptx")};
  LinkOutcome outcome;
  emuLink(inputs, 90, false, &outcome);
  ASSERT_EQ(outcome.result, CUDA_SUCCESS) << outcome.errorLog;
  auto module = ptx::Module::load(reinterpret_cast<const char*>(outcome.image.data()));
  ASSERT_TRUE(module) << module.status().message;
  EXPECT_EQ((*module)->globals().size(), 2u);
}

TEST(EmuLinkTest, AnAddedUnitIsCheckedOnItsOwnWithItsExternsUndefined) {
  LinkOutcome outcome;
  emuCheckLinkInput(ptx(kCaller, "caller.ptx"), 90, &outcome);
  EXPECT_EQ(outcome.result, CUDA_SUCCESS) << outcome.errorLog;
  constexpr const char* kBroken =
      ".version 8.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry k() { frobnicate.u32 %r1; ret; }\n";
  emuCheckLinkInput(ptx(kBroken, "broken.ptx"), 90, &outcome);
  EXPECT_NE(outcome.result, CUDA_SUCCESS);
  EXPECT_NE(outcome.errorLog.find("broken.ptx"), std::string::npos) << outcome.errorLog;
}

TEST(EmuLinkTest, InputsWithoutPtxAreRefused) {
  const uint8_t elf[64] = {0x7f, 'E', 'L', 'F', 2};
  std::vector<LinkInput> cubin = {{CU_JIT_INPUT_CUBIN, "k.cubin", elf}};
  LinkOutcome outcome;
  emuLink(cubin, 90, false, &outcome);
  EXPECT_EQ(outcome.result, CUDA_ERROR_NO_BINARY_FOR_GPU) << outcome.errorLog;
  std::vector<LinkInput> lto = {{CU_JIT_INPUT_NVVM, "k.ltoir", elf}};
  emuLink(lto, 90, false, &outcome);
  EXPECT_EQ(outcome.result, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(outcome.errorLog.find("LTO"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::server
