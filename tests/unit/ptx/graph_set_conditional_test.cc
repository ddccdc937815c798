// cudaGraphSetConditional, the driver-provided function through which kernels set a conditional
// graph node's condition: the emu runs it as a builtin that hands (handle, value) to the launch's
// context (LaunchServices::setConditional); a handle the context does not know fails the launch.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

// setc(handle, value): cudaGraphSetConditional(handle, value), as nvcc emits the call.
constexpr const char* kModule = R"(.version 9.0
.target sm_80
.address_size 64
.extern .func cudaGraphSetConditional
(
	.param .b64 cudaGraphSetConditional_param_0,
	.param .b32 cudaGraphSetConditional_param_1
)
;
.visible .entry setc(.param .u64 h, .param .u32 v)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [h];
	ld.param.u32 %r1, [v];
	{
	.param .b64 param0;
	st.param.b64 [param0+0], %rd1;
	.param .b32 param1;
	st.param.b32 [param1+0], %r1;
	call.uni cudaGraphSetConditional, (param0, param1);
	}
	ret;
}
)";

class GraphSetConditionalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = loadOrFail(kModule);
    ASSERT_TRUE(module_);
  }
  LaunchResult run(uint64_t handle, uint32_t value, bool withService) {
    const KernelInfo& k = module_->kernels().at(0);
    LaunchServices services;
    services.workerThreads = 1;
    if (withService) {
      services.setConditional = [this](uint64_t h, uint32_t v) {
        if (!known_.count(h)) return false;
        known_[h] = v;
        return true;
      };
    }
    return launch(*module_, k, LaunchConfig{}, ParamBlock(k).set(0, handle).set(1, value).data(),
                  memory_, services);
  }

  HostDeviceMemory memory_;
  std::unique_ptr<Module> module_;
  std::map<uint64_t, uint32_t> known_{{0xc000000000000001ull, 0}};
};

TEST_F(GraphSetConditionalTest, SetsTheHandlesValue) {
  LaunchResult r = run(0xc000000000000001ull, 7, true);
  EXPECT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  EXPECT_EQ(known_.at(0xc000000000000001ull), 7u);
}

TEST_F(GraphSetConditionalTest, AnUnknownHandleFailsTheLaunch) {
  LaunchResult r = run(0xc000000000000002ull, 1, true);
  EXPECT_EQ(r.status.code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(r.status.message.find("cudaGraphSetConditional"), std::string::npos)
      << r.status.message;
  EXPECT_EQ(known_.at(0xc000000000000001ull), 0u);
}

TEST_F(GraphSetConditionalTest, WithoutAContextTheCallFails) {
  LaunchResult r = run(0xc000000000000001ull, 1, false);
  EXPECT_EQ(r.status.code, CUDA_ERROR_LAUNCH_FAILED);
}

}  // namespace
}  // namespace gpupool::ptx::testing
