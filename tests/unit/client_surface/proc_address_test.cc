#include "proc_address.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "fake_driver.h"

namespace {

using gpupool::client::lookupProcAddress;
using gpupool::client::procAddressTable;

constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_DEFAULT;
constexpr cuuint64_t kLegacyStream = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

// The exported symbol as the dynamic linker sees it (the test executable exports its symbols).
void* exported(const char* symbol) { return dlsym(RTLD_DEFAULT, symbol); }

struct Case {
  const char* name;
  int version;
  cuuint64_t flags;
  const char* symbol;
};

class ProcAddressCase : public ::testing::TestWithParam<Case> {};

TEST_P(ProcAddressCase, ResolvesToTheExportedAbi) {
  const Case& c = GetParam();
  void* pfn = nullptr;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  ASSERT_EQ(cuGetProcAddress_v2(c.name, &pfn, c.version, c.flags, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  ASSERT_NE(exported(c.symbol), nullptr) << c.symbol;
  const auto found = lookupProcAddress(c.name, c.version, c.flags);
  EXPECT_EQ(pfn, exported(c.symbol)) << "got " << (found.entry ? found.entry->symbol : "none");
}

INSTANTIATE_TEST_SUITE_P(
    KnownCases, ProcAddressCase,
    ::testing::Values(
        Case{"cuCtxGetDevice", 2000, kLegacy, "cuCtxGetDevice"},
        Case{"cuCtxGetDevice", 12080, kLegacy, "cuCtxGetDevice"},
        Case{"cuCtxGetDevice", 13000, kLegacy, "cuCtxGetDevice_v2"},
        Case{"cuCtxSynchronize", 13000, kLegacy, "cuCtxSynchronize_v2"},
        Case{"cuMemAlloc", 2000, kLegacy, "cuMemAlloc"},
        Case{"cuMemAlloc", 3020, kLegacy, "cuMemAlloc_v2"},
        Case{"cuMemAlloc", 13000, kLegacy, "cuMemAlloc_v2"},
        Case{"cuStreamGetCaptureInfo", 10010, kLegacy, "cuStreamGetCaptureInfo"},
        Case{"cuStreamGetCaptureInfo", 11030, kLegacy, "cuStreamGetCaptureInfo_v2"},
        Case{"cuStreamGetCaptureInfo", 12030, kLegacy, "cuStreamGetCaptureInfo_v3"},
        Case{"cuStreamGetCaptureInfo", 10010, kPerThread, "cuStreamGetCaptureInfo_ptsz"},
        Case{"cuStreamGetCaptureInfo", 11030, kPerThread, "cuStreamGetCaptureInfo_v2_ptsz"},
        Case{"cuStreamGetCaptureInfo", 12030, kPerThread, "cuStreamGetCaptureInfo_v3_ptsz"},
        Case{"cuEventElapsedTime", 2000, kLegacy, "cuEventElapsedTime"},
        Case{"cuEventElapsedTime", 12080, kLegacy, "cuEventElapsedTime_v2"},
        Case{"cuLaunchKernel", 4000, kLegacy, "cuLaunchKernel"},
        Case{"cuLaunchKernel", 7000, kPerThread, "cuLaunchKernel_ptsz"},
        Case{"cuLaunchKernel", 12000, kLegacyStream, "cuLaunchKernel"},
        Case{"cuMemcpyHtoD", 2000, kLegacy, "cuMemcpyHtoD"},
        Case{"cuMemcpyHtoD", 3020, kLegacy, "cuMemcpyHtoD_v2"},
        Case{"cuMemcpyHtoD", 3020, kPerThread, "cuMemcpyHtoD_v2_ptds"},
        Case{"cuMemcpyBatchAsync", 12080, kLegacy, "cuMemcpyBatchAsync"},
        Case{"cuMemcpyBatchAsync", 13000, kLegacy, "cuMemcpyBatchAsync_v2"},
        Case{"cuGraphInstantiate", 10000, kLegacy, "cuGraphInstantiate"},
        Case{"cuGraphInstantiate", 11000, kLegacy, "cuGraphInstantiate_v2"},
        Case{"cuDeviceGetUuid", 11040, kLegacy, "cuDeviceGetUuid_v2"},
        Case{"cuGetProcAddress", 11030, kLegacy, "cuGetProcAddress"},
        Case{"cuGetProcAddress", 12000, kLegacy, "cuGetProcAddress_v2"},
        Case{"cuGetExportTable", 3000, kLegacy, "cuGetExportTable"},
        Case{"cuProfilerStart", 4000, kLegacy, "cuProfilerStart"}));

TEST(ProcAddress, UnknownAndEmptyNamesAreNotFound) {
  for (const char* name : {"cuNoSuchFunction", "", "cuMemAlloc_v2", "cuda"}) {
    void* pfn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    EXPECT_EQ(cuGetProcAddress_v2(name, &pfn, 13000, kLegacy, &status), CUDA_ERROR_NOT_FOUND)
        << name;
    EXPECT_EQ(pfn, nullptr);
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
}

TEST(ProcAddress, TooOldVersionIsNotSufficient) {
  void* pfn = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(cuGetProcAddress_v2("cuCtxGetDevice", &pfn, 1000, kLegacy, &status),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(pfn, nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(cuGetProcAddress_v2("cuLibraryLoadData", &pfn, 0, kLegacy, &status),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST(ProcAddress, NullArgumentsAreInvalid) {
  void* pfn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2(nullptr, &pfn, 13000, kLegacy, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", nullptr, 13000, kLegacy, nullptr),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(ProcAddress, LegacyFourArgumentEntryPointResolvesToo) {
  using LegacyGetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t);
  const auto legacy = reinterpret_cast<LegacyGetProcAddress>(exported("cuGetProcAddress"));
  ASSERT_NE(legacy, nullptr);
  void* pfn = nullptr;
  ASSERT_EQ(legacy("cuMemAlloc", &pfn, 3020, kLegacy), CUDA_SUCCESS);
  EXPECT_EQ(pfn, exported("cuMemAlloc_v2"));
  EXPECT_EQ(legacy("cuNoSuchFunction", &pfn, 3020, kLegacy), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(pfn, nullptr);
}

TEST(ProcAddress, ReturnsStrongDefinitionsOverStubs) {
  // cuDriverGetVersion is defined strongly by the test's fake driver.
  fake_driver::state().driverVersion = 12345;
  void* pfn = nullptr;
  ASSERT_EQ(cuGetProcAddress_v2("cuDriverGetVersion", &pfn, 13000, kLegacy, nullptr), CUDA_SUCCESS);
  int version = 0;
  EXPECT_EQ(reinterpret_cast<CUresult (*)(int*)>(pfn)(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 12345);
  // A name without a strong definition resolves to its stub, which answers NOT_SUPPORTED.
  ASSERT_EQ(cuGetProcAddress_v2("cuCtxGetFlags", &pfn, 13000, kLegacy, nullptr), CUDA_SUCCESS);
  unsigned int flags = 0;
  EXPECT_EQ(reinterpret_cast<CUresult (*)(unsigned int*)>(pfn)(&flags), CUDA_ERROR_NOT_SUPPORTED);
}

TEST(ProcAddressTable, EveryRowNamesItsExportedSymbol) {
  const auto table = procAddressTable();
  ASSERT_GT(table.size(), 900u);
  for (const auto& entry : table) {
    EXPECT_EQ(entry.function, exported(entry.symbol)) << entry.name << "@" << entry.version;
    EXPECT_TRUE(std::string(entry.symbol).starts_with(entry.name)) << entry.symbol;
  }
}

TEST(ProcAddressTable, PerThreadRowsOnlySwapInThePerThreadVariant) {
  for (const auto& entry : procAddressTable()) {
    if (!entry.perThreadStream) continue;
    const auto legacy = lookupProcAddress(entry.name, entry.version, kLegacy);
    ASSERT_EQ(legacy.result, CUDA_SUCCESS) << entry.name;
    const std::string base = legacy.entry->symbol;
    const std::string symbol = entry.symbol;
    EXPECT_TRUE(symbol == base || symbol == base + "_ptds" || symbol == base + "_ptsz")
        << entry.name << "@" << entry.version << ": " << symbol << " vs " << base;
  }
}

}  // namespace
