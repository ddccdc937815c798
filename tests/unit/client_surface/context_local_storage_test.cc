#include "context_local_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "export_tables.h"
#include "fake_driver.h"

namespace {

using namespace gpupool::client;

CUcontext ctx(std::uintptr_t n) { return reinterpret_cast<CUcontext>(n * 0x100); }
void* ptr(std::uintptr_t n) { return reinterpret_cast<void*>(n * 0x10); }

struct DestructorCall {
  CUcontext ctx;
  void* key;
  void* value;
};
std::vector<DestructorCall> destructorCalls;
void recordDestructor(CUcontext c, void* key, void* value) {
  destructorCalls.push_back({c, key, value});
}

class ContextLocalStorage : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_driver::state() = {};
    destructorCalls.clear();
  }
  void TearDown() override {
    for (std::uintptr_t i = 1; i < 10; ++i) destroyContextLocalStorage(ctx(i));
  }
};

TEST_F(ContextLocalStorage, PutGetDelete) {
  void* value = nullptr;
  EXPECT_EQ(clsGet(&value, ctx(1), ptr(1)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(clsPut(ctx(1), ptr(1), ptr(42), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(clsGet(&value, ctx(1), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(42));
  // Keys are per context.
  EXPECT_EQ(clsGet(&value, ctx(2), ptr(1)), CUDA_ERROR_INVALID_HANDLE);
  // Put replaces.
  ASSERT_EQ(clsPut(ctx(1), ptr(1), ptr(43), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(clsGet(&value, ctx(1), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(43));
  ASSERT_EQ(clsDelete(ctx(1), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(clsGet(&value, ctx(1), ptr(1)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(clsGet(nullptr, ctx(1), ptr(1)), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ContextLocalStorage, NullContextMeansCurrentContext) {
  void* value = nullptr;
  EXPECT_EQ(clsPut(nullptr, ptr(1), ptr(5), nullptr), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(clsGet(&value, nullptr, ptr(1)), CUDA_ERROR_INVALID_CONTEXT);
  fake_driver::state().currentContext = ctx(3);
  ASSERT_EQ(clsPut(nullptr, ptr(1), ptr(5), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(clsGet(&value, ctx(3), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(5));
  ASSERT_EQ(clsDelete(nullptr, ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(clsGet(&value, ctx(3), ptr(1)), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(ContextLocalStorage, DestroyRunsEachDestructorOfThatContextOnce) {
  ASSERT_EQ(clsPut(ctx(1), ptr(1), ptr(11), recordDestructor), CUDA_SUCCESS);
  ASSERT_EQ(clsPut(ctx(1), ptr(2), ptr(12), recordDestructor), CUDA_SUCCESS);
  ASSERT_EQ(clsPut(ctx(1), ptr(3), ptr(13), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(clsPut(ctx(2), ptr(1), ptr(21), recordDestructor), CUDA_SUCCESS);
  ASSERT_EQ(clsPut(ctx(1), ptr(4), ptr(14), recordDestructor), CUDA_SUCCESS);
  ASSERT_EQ(clsDelete(ctx(1), ptr(4)), CUDA_SUCCESS);  // deleted: no destructor

  destroyContextLocalStorage(ctx(1));
  ASSERT_EQ(destructorCalls.size(), 2u);
  for (const auto& call : destructorCalls) {
    EXPECT_EQ(call.ctx, ctx(1));
    EXPECT_TRUE((call.key == ptr(1) && call.value == ptr(11)) ||
                (call.key == ptr(2) && call.value == ptr(12)));
  }
  EXPECT_NE(destructorCalls[0].key, destructorCalls[1].key);
  void* value = nullptr;
  EXPECT_EQ(clsGet(&value, ctx(1), ptr(3)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(clsGet(&value, ctx(2), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(21));
  destroyContextLocalStorage(ctx(1));
  EXPECT_EQ(destructorCalls.size(), 2u);
}

void reenteringDestructor(CUcontext c, void* key, void*) {
  // cudart's destructors may touch CLS again; this must not deadlock.
  clsDelete(c, key);
  clsPut(ctx(9), key, ptr(99), nullptr);
}

TEST_F(ContextLocalStorage, DestructorsMayCallBackIntoStorage) {
  ASSERT_EQ(clsPut(ctx(1), ptr(1), ptr(11), reenteringDestructor), CUDA_SUCCESS);
  destroyContextLocalStorage(ctx(1));
  void* value = nullptr;
  ASSERT_EQ(clsGet(&value, ctx(9), ptr(1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(99));
}

TEST_F(ContextLocalStorage, ConcurrentThreadsKeepTheirOwnKeys) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 500;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      for (int k = 1; k <= kKeys; ++k) {
        const auto key = ptr(t * 1000 + k);
        if (clsPut(ctx(1 + t % 2), key, ptr(k), nullptr) != CUDA_SUCCESS) ++failures[t];
        void* value = nullptr;
        if (clsGet(&value, ctx(1 + t % 2), key) != CUDA_SUCCESS || value != ptr(k)) ++failures[t];
        if (k % 2 == 0 && clsDelete(ctx(1 + t % 2), key) != CUDA_SUCCESS) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
  void* value = nullptr;
  EXPECT_EQ(clsGet(&value, ctx(1), ptr(2)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(clsGet(&value, ctx(2), ptr(1000 + 1)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(1));
}

TEST_F(ContextLocalStorage, ServedThroughTheExportTable) {
  CUuuid id;
  std::memcpy(id.bytes, kContextLocalStorageId.data(), 16);
  const void* raw = nullptr;
  ASSERT_EQ(cuGetExportTable(&raw, &id), CUDA_SUCCESS);
  const auto* table = static_cast<const void* const*>(raw);
  const auto put = reinterpret_cast<CUresult (*)(CUcontext, void*, void*, ClsDestructor)>(table[0]);
  const auto del = reinterpret_cast<CUresult (*)(CUcontext, void*)>(table[1]);
  const auto get = reinterpret_cast<CUresult (*)(void**, CUcontext, void*)>(table[2]);

  void* value = nullptr;
  EXPECT_EQ(get(&value, ctx(4), ptr(7)), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_EQ(put(ctx(4), ptr(7), ptr(70), recordDestructor), CUDA_SUCCESS);
  ASSERT_EQ(get(&value, ctx(4), ptr(7)), CUDA_SUCCESS);
  EXPECT_EQ(value, ptr(70));
  ASSERT_EQ(del(ctx(4), ptr(7)), CUDA_SUCCESS);
  EXPECT_EQ(get(&value, ctx(4), ptr(7)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(destructorCalls.empty());
}

}  // namespace
