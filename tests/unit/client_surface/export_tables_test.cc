#include "export_tables.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "fake_driver.h"

namespace {

// Parses "6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9": the bytes in the order the string shows them.
CUuuid parseGuid(const std::string& text) {
  CUuuid id{};
  int n = 0;
  for (std::size_t i = 0; i + 1 < text.size() && n < 16;) {
    if (text[i] == '-') {
      ++i;
      continue;
    }
    id.bytes[n++] = static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
    i += 2;
  }
  return id;
}

const void* const* getTable(const std::string& guid) {
  const CUuuid id = parseGuid(guid);
  const void* table = reinterpret_cast<const void*>(1);
  if (cuGetExportTable(&table, &id) != CUDA_SUCCESS) return nullptr;
  return static_cast<const void* const*>(table);
}

template <typename F>
F slot(const void* const* table, int index) {
  return reinterpret_cast<F>(table[index]);
}

std::size_t sizeSlot(const void* const* table) { return reinterpret_cast<std::size_t>(table[0]); }

constexpr const char* kCudartInterface = "6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9";
constexpr const char* kCallbackHooks = "A094798C-2E74-2E74-93F2-0800200C0A66";
constexpr const char* kToolsTls = "42D85A81-23F6-CB47-8298-F6E78A3AECDC";
constexpr const char* kContextLocalStorage = "C693336E-1121-DF11-A8C3-68F355D89593";
constexpr const char* kContextChecks = "263E8860-7CD2-6143-92F6-BBD5006DFA7E";
constexpr const char* kIntegrityCheck = "D4082055-BDE6-704B-8D34-BA123C66E1F2";
constexpr const char* kToolsContext = "21318C60-9714-3248-8CA6-41FF7324C8F2";

TEST(ExportTables, KnownTablesHaveTheirSizes) {
  EXPECT_EQ(sizeSlot(getTable(kCudartInterface)), 13 * 8u);
  EXPECT_EQ(sizeSlot(getTable(kCallbackHooks)), 7 * 8u);
  EXPECT_EQ(sizeSlot(getTable(kToolsTls)), 4 * 8u);
  EXPECT_EQ(sizeSlot(getTable(kContextChecks)), 4 * 8u);
  EXPECT_EQ(sizeSlot(getTable(kIntegrityCheck)), 3 * 8u);
  EXPECT_EQ(sizeSlot(getTable(kToolsContext)), 95 * 8u);
  const auto* cls = getTable(kContextLocalStorage);
  ASSERT_NE(cls, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_NE(cls[i], nullptr);
}

TEST(ExportTables, HeaderIdsAgreeWithGuidStrings) {
  using namespace gpupool::client;
  for (const auto& [id, guid] : {std::pair{kCudartInterfaceId, kCudartInterface},
                                 {kToolsRuntimeCallbackHooksId, kCallbackHooks},
                                 {kToolsTlsId, kToolsTls},
                                 {kContextLocalStorageId, kContextLocalStorage},
                                 {kContextChecksId, kContextChecks},
                                 {kIntegrityCheckId, kIntegrityCheck},
                                 {kToolsContextId, kToolsContext}}) {
    EXPECT_EQ(findExportTable(id), getTable(guid)) << guid;
  }
}

TEST(ExportTables, UnknownAndRefusedIdsAreInvalidValue) {
  for (const char* guid :
       {"F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9", "00112233-4455-6677-8899-AABBCCDDEEFF"}) {
    const CUuuid id = parseGuid(guid);
    const void* table = reinterpret_cast<const void*>(1);
    EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_INVALID_VALUE) << guid;
    EXPECT_EQ(table, nullptr);
  }
  const CUuuid id = parseGuid(kCudartInterface);
  EXPECT_EQ(cuGetExportTable(nullptr, &id), CUDA_ERROR_INVALID_VALUE);
  const void* table = nullptr;
  EXPECT_EQ(cuGetExportTable(&table, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(ExportTables, UnknownIdIsLoggedOnce) {
  const CUuuid id = parseGuid("0BADF00D-0000-1111-2222-333344445555");
  const void* table = nullptr;
  ::testing::internal::CaptureStderr();
  cuGetExportTable(&table, &id);
  cuGetExportTable(&table, &id);
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string needle = "0BADF00D-0000-1111-2222-333344445555";
  const auto first = log.find(needle);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(needle, first + 1), std::string::npos) << log;
}

TEST(CudartInterface, Slot2ReturnsThePrimaryContextHandle) {
  fake_driver::state().primaryContext = reinterpret_cast<CUcontext>(0x1230);
  CUcontext context = nullptr;
  const auto slot2 = slot<CUresult (*)(CUcontext*, CUdevice)>(getTable(kCudartInterface), 2);
  ASSERT_EQ(slot2(&context, 3), CUDA_SUCCESS);
  EXPECT_EQ(context, reinterpret_cast<CUcontext>(0x1230));
  EXPECT_EQ(fake_driver::state().lastPrimaryContextDevice, 3);
}

struct Wrapper {
  std::int32_t magic;
  std::int32_t version;
  const void* fatbin;
  void* filenameOrFatbins;
};

TEST(CudartInterface, ModuleSlotsLoadTheWrappedFatbin) {
  const auto* table = getTable(kCudartInterface);
  static const std::uint64_t fatbin[4] = {0xBA55ED50, 0, 0, 0};
  const Wrapper wrapper{0x466243B1, 1, fatbin, nullptr};
  fake_driver::state().moduleToReturn = reinterpret_cast<CUmodule>(0x4560);

  CUmodule module = nullptr;
  slot<void (*)(CUmodule*, const Wrapper*)>(table, 1)(&module, &wrapper);
  EXPECT_EQ(module, reinterpret_cast<CUmodule>(0x4560));
  EXPECT_EQ(fake_driver::state().lastFatbinLoaded, fatbin);

  using Ext1 = CUresult (*)(CUmodule*, const Wrapper*, void*, void*, std::uint32_t);
  fake_driver::state().lastFatbinLoaded = nullptr;
  EXPECT_EQ(slot<Ext1>(table, 6)(&module, &wrapper, nullptr, nullptr, 0), CUDA_SUCCESS);
  EXPECT_EQ(fake_driver::state().lastFatbinLoaded, fatbin);
  const Wrapper corrupt{0x12345678, 1, fatbin, nullptr};
  EXPECT_EQ(slot<Ext1>(table, 6)(&module, &corrupt, nullptr, nullptr, 0), CUDA_ERROR_INVALID_IMAGE);

  using Ext2 = CUresult (*)(const void*, CUmodule*, void*, void*, std::uint32_t);
  fake_driver::state().lastFatbinLoaded = nullptr;
  EXPECT_EQ(slot<Ext2>(table, 8)(fatbin, &module, nullptr, nullptr, 0), CUDA_SUCCESS);
  EXPECT_EQ(fake_driver::state().lastFatbinLoaded, fatbin);
}

TEST(CudartInterface, LoadCompilersSucceedsAndUnknownSlotsAreCallable) {
  const auto* table = getTable(kCudartInterface);
  EXPECT_EQ(slot<CUresult (*)()>(table, 12)(), CUDA_SUCCESS);
  for (int i : {3, 4, 5, 9, 10, 11}) {
    EXPECT_EQ(slot<CUresult (*)()>(table, i)(), CUDA_ERROR_NOT_SUPPORTED) << i;
  }
}

TEST(CallbackHooks, Slots2And6HandOutZeroedBuffers) {
  const auto* table = getTable(kCallbackHooks);
  for (const auto& [index, entries] : {std::pair{2, 1024u}, {6, 14u}}) {
    void* buffer = nullptr;
    std::size_t count = 0;
    slot<void (*)(void**, std::size_t*)>(table, index)(&buffer, &count);
    ASSERT_NE(buffer, nullptr);
    EXPECT_EQ(count, entries);
    const auto* words = static_cast<const std::uint64_t*>(buffer);
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(words[i], 0u) << index << ":" << i;
  }
}

TEST(ToolsTls, SlotsAreCallableAndSucceed) {
  const auto* table = getTable(kToolsTls);
  int out = 7;
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(slot<CUresult (*)(void*, int)>(table, i)(&out, 0xa), CUDA_SUCCESS);
  }
}

TEST(ContextChecks, Slot2WritesZerosAndSlot3Succeeds) {
  const auto* table = getTable(kContextChecks);
  std::uint32_t flags = 7;
  void* extra = &flags;
  EXPECT_EQ(
      slot<CUresult (*)(CUcontext, std::uint32_t*, void**)>(table, 2)(nullptr, &flags, &extra),
      CUDA_SUCCESS);
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(extra, nullptr);
  EXPECT_EQ(slot<CUresult (*)()>(table, 3)(), CUDA_SUCCESS);
}

TEST(ToolsContext, AllSlotsAreNoOpsReturningSuccess) {
  const auto* table = getTable(kToolsContext);
  std::uint64_t out = 0;
  for (int i = 1; i < 95; ++i) {
    EXPECT_EQ(slot<CUresult (*)(int, void*, void*)>(table, i)(0, &out, &out), CUDA_SUCCESS) << i;
  }
}

}  // namespace
