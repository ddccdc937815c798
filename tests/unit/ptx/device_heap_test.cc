// Device-side malloc() heaps belong to one context: a pointer one context's kernel malloc'ed is an
// illegal address in another context's kernel (tenant isolation), and stays valid across launches
// of its own context.
#include <gtest/gtest.h>

#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

// keep(out): p = malloc(16); *p = 1234; *out = p.   peek(out, p): *out = *p.
constexpr const char* kHeapModule = R"(.version 9.0
.target sm_90
.address_size 64
.extern .func (.param .b64 func_retval0) malloc
(
	.param .b64 malloc_param_0
)
;
.visible .entry keep(.param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	{
	.param .b64 param0;
	st.param.b64 [param0], 16;
	.param .b64 retval0;
	call.uni (retval0), malloc, (param0);
	ld.param.b64 %rd3, [retval0];
	}
	mov.u32 %r1, 1234;
	st.u32 [%rd3], %r1;
	st.global.u64 [%rd2], %rd3;
	ret;
}
.visible .entry peek(.param .u64 out, .param .u64 p)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	ld.param.u64 %rd2, [p];
	cvta.to.global.u64 %rd3, %rd1;
	ld.u32 %r1, [%rd2];
	st.global.u32 [%rd3], %r1;
	ret;
}
)";

class DeviceHeapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = loadOrFail(kHeapModule);
    ASSERT_TRUE(module_);
  }
  const KernelInfo& kernel(const std::string& name) {
    for (const KernelInfo& k : module_->kernels())
      if (k.name == name) return k;
    throw std::runtime_error("no kernel " + name);
  }
  LaunchResult run(const std::string& name, const ParamBlock& params, DeviceHeap* heap) {
    LaunchServices services;
    services.workerThreads = 1;
    services.heap = heap;
    return launch(*module_, kernel(name), LaunchConfig{}, params.data(), memory_, services);
  }
  // Runs keep() on `heap` and returns the pointer it malloc'ed.
  uint64_t keep(DeviceHeap* heap) {
    uint64_t out = memory_.allocate(8);
    LaunchResult r = run("keep", ParamBlock(kernel("keep")).set(0, out), heap);
    EXPECT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
    return memory_.download<uint64_t>(out, 1)[0];
  }
  LaunchResult peek(uint64_t pointer, DeviceHeap* heap, uint32_t* value) {
    uint64_t out = memory_.allocate(4);
    LaunchResult r = run("peek", ParamBlock(kernel("peek")).set(0, out).set(1, pointer), heap);
    *value = memory_.download<uint32_t>(out, 1)[0];
    return r;
  }

  HostDeviceMemory memory_;
  std::unique_ptr<Module> module_;
};

TEST_F(DeviceHeapTest, PointerStaysValidInItsOwnContext) {
  DeviceHeap heap;
  uint64_t p = keep(&heap);
  ASSERT_GE(p, kHeapWindow);
  uint32_t value = 0;
  LaunchResult r = peek(p, &heap, &value);
  EXPECT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  EXPECT_EQ(value, 1234u);
}

TEST_F(DeviceHeapTest, AnotherContextsPointerIsAnIllegalAddress) {
  DeviceHeap alice, bob;
  uint64_t p = keep(&alice);
  ASSERT_GE(p, kHeapWindow);
  // Bob's heap has a block at the same offset, so only the owner check can stop the read.
  ASSERT_EQ(keep(&bob), p);
  uint32_t value = 0;
  LaunchResult own = peek(p, &bob, &value);
  EXPECT_EQ(own.status.code, CUDA_SUCCESS) << own.status.message;
  bob.release(p);
  LaunchResult foreign = peek(p, &bob, &value);
  EXPECT_EQ(foreign.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << foreign.status.message;
  // Alice's block is untouched.
  LaunchResult mine = peek(p, &alice, &value);
  EXPECT_EQ(mine.status.code, CUDA_SUCCESS) << mine.status.message;
  EXPECT_EQ(value, 1234u);
}

TEST_F(DeviceHeapTest, NoHeapMeansMallocReturnsNull) {
  uint64_t out = memory_.allocate(8);
  LaunchResult r = run("keep", ParamBlock(kernel("keep")).set(0, out), nullptr);
  // keep() stores through the NULL malloc returned, as a kernel on a full heap would.
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;
}

TEST(DeviceHeap, ExhaustionReturnsZeroAndFreeMakesRoom) {
  DeviceHeap heap;
  EXPECT_EQ(heap.allocate(DeviceHeap::kCapacity + 1), 0u);
  uint64_t big = heap.allocate(DeviceHeap::kCapacity - 64);
  ASSERT_NE(big, 0u);
  EXPECT_EQ(heap.allocate(1024), 0u);
  EXPECT_NE(heap.translate(big, 16), nullptr);
  EXPECT_EQ(heap.translate(big, DeviceHeap::kCapacity), nullptr);
  heap.release(big);
  EXPECT_EQ(heap.translate(big, 16), nullptr);
  EXPECT_NE(heap.allocate(1024), 0u);
}

}  // namespace
}  // namespace gpupool::ptx::testing
