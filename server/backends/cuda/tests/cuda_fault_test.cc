// Which driver errors are fatal for the whole process, and the fault state's record and refusals.
#include "server/backends/cuda/cuda_fault.h"

#include <gtest/gtest.h>

namespace gpupool::server {
namespace {

TEST(CudaFault, FatalErrorsAreThoseThatLoseTheProcesssState) {
  for (CUresult fatal :
       {CUDA_ERROR_ASSERT, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_INVALID_PC,
        CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_HARDWARE_STACK_ERROR, CUDA_ERROR_ECC_UNCORRECTABLE,
        CUDA_ERROR_LAUNCH_TIMEOUT, CUDA_ERROR_TENSOR_MEMORY_LEAK, CUDA_ERROR_CONTAINED,
        CUDA_ERROR_MPS_CLIENT_TERMINATED, CUDA_ERROR_EXTERNAL_DEVICE}) {
    EXPECT_TRUE(isFatalDriverError(fatal)) << fatal;
  }
  // A client's mistakes and the pool's own refusals are not.
  for (CUresult ordinary :
       {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_READY,
        CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_SUPPORTED,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NOT_FOUND,
        CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, CUDA_ERROR_UNKNOWN}) {
    EXPECT_FALSE(isFatalDriverError(ordinary)) << ordinary;
  }
}

TEST(CudaFault, TheFirstFaultIsRecordedOnceAndNamedInRefusals) {
  CudaFaultState state;
  int handled = 0;
  CudaFault told;
  state.setPolicy("gpupoold is restarting", [&](const CudaFault& fault) {
    ++handled;
    told = fault;
  });
  EXPECT_FALSE(state.faulted());
  auto alice = std::make_shared<const std::string>("session 3 (tenant alice)");
  auto bob = std::make_shared<const std::string>("session 4 (tenant bob)");
  state.record(CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "cuCtxSynchronize",
               "CUDA_ERROR_ASSERT (device-side assert triggered)", alice);
  state.record(CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "cuMemAlloc", "?", bob);
  EXPECT_TRUE(state.faulted());
  EXPECT_EQ(state.code(), CUDA_ERROR_ASSERT);
  EXPECT_EQ(handled, 1);
  EXPECT_EQ(told.caller, "session 3 (tenant alice)");
  EXPECT_EQ(told.call, "cuCtxSynchronize");

  Status other = state.refusal("cuMemAlloc", bob);
  EXPECT_EQ(other.code, CUDA_ERROR_ASSERT);
  EXPECT_EQ(other.message,
            "cuMemAlloc refused: the GPU's CUDA state in this gpupoold was lost to a fatal fault "
            "(CUDA_ERROR_ASSERT at cuCtxSynchronize) in another session; gpupoold is restarting");
  EXPECT_NE(state.refusal("cuMemAlloc", alice).message.find("in this session"), std::string::npos);
  EXPECT_NE(state.refusal("cuCtxCreate", nullptr).message.find("in another session"),
            std::string::npos);
}

}  // namespace
}  // namespace gpupool::server
