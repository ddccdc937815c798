// The waits of a BackendContext (streamSynchronize, eventSynchronize, synchronize) on threads of
// their own while the session's thread keeps using the context (server/backend.h), on the emu
// backend through the BackendContext interface. A kernel spins until a flag in device memory is
// set, so the waits are certainly under way while the main thread creates and destroys streams and
// events, allocates, copies and launches; then the flag is set and every wait must end.
//
// Labelled `tsan`: ThreadSanitizer checks that nothing here races.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "server/backend.h"
#include "server/backends/emu/emu_backend.h"

namespace gpupool::server {
namespace {

using namespace std::chrono_literals;

// spin(flag): waits until *flag != 0. release(flag): sets *flag = 1. The flag is read and written
// with atomics only (the interpreter runs atom.* as host atomics), so the spinning kernel and the
// one that releases it do not race under ThreadSanitizer.
constexpr char kSpinModule[] = R"(.version 7.0
.target sm_75
.address_size 64

.visible .entry spin(.param .u64 flag)
{
  .reg .pred %p;
  .reg .b32 %seen;
  .reg .b64 %address;
  ld.param.u64 %address, [flag];
  cvta.to.global.u64 %address, %address;
$again:
  atom.global.or.b32 %seen, [%address], 0;
  setp.eq.u32 %p, %seen, 0;
  @%p bra $again;
  ret;
}

.visible .entry release(.param .u64 flag)
{
  .reg .b32 %old;
  .reg .b64 %address;
  ld.param.u64 %address, [flag];
  cvta.to.global.u64 %address, %address;
  atom.global.exch.b32 %old, [%address], 1;
  ret;
}
)";

// How long a wait may take once its kernel has been released (or the test is hung).
constexpr auto kWaitLimit = 60s;

// Cancels the context's kernels when a test body ends, declared after the waits' futures so that
// it runs before their destructors, which wait: a test that stops early (a failed ASSERT) would
// otherwise hang there on the kernel it never released.
struct CancelAtExit {
  BackendContext& context;
  ~CancelAtExit() { context.cancel(); }
};

class EmuBackendWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    emu::EmuBackendOptions options;
    options.workerThreads = 1;
    backend_ = emu::makeEmuBackend(options);
    ASSERT_TRUE(backend_->createContext(0, 0, &context_).ok());
    uint64_t module = 0;
    std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(kSpinModule),
                                   sizeof kSpinModule);  // with its NUL, as PTX comes
    Status loaded = context_->moduleLoad(image, &module);
    ASSERT_TRUE(loaded.ok()) << loaded.message;
    FunctionDescription function;
    ASSERT_TRUE(context_->moduleGetFunction(module, "spin", &function).ok());
    spin_ = function.handle;
    ASSERT_TRUE(context_->moduleGetFunction(module, "release", &function).ok());
    release_ = function.handle;
    ASSERT_TRUE(context_->memAlloc(sizeof(uint32_t), &flag_).ok());
    const uint32_t zero = 0;
    ASSERT_TRUE(context_->copyHostToDevice(flag_, &zero, sizeof zero, 0, false).ok());
    ASSERT_TRUE(context_->streamCreate(0, 0, &spinning_).ok());
    ASSERT_TRUE(context_->streamCreate(0, 0, &other_).ok());
  }

  Status launchWithFlag(uint64_t function, uint64_t stream) {
    std::vector<uint8_t> params(sizeof flag_);
    std::memcpy(params.data(), &flag_, sizeof flag_);
    return context_->launch(function, LaunchShape{}, stream, params);
  }

  // The wait's result once it has ended; a hung wait fails the test and is cut short by cancel().
  Status finished(std::future<Status>& wait) {
    if (wait.wait_for(kWaitLimit) != std::future_status::ready) {
      ADD_FAILURE() << "a wait did not end within " << kWaitLimit.count() << " s";
      context_->cancel();
    }
    return wait.get();
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<BackendContext> context_;
  uint64_t spin_ = 0, release_ = 0;
  uint64_t flag_ = 0;
  uint64_t spinning_ = 0;  // the stream the spinning kernel is on
  uint64_t other_ = 0;     // the stream that releases it
};

TEST_F(EmuBackendWaitTest, WaitsRunWhileTheSessionThreadUsesTheContext) {
  ASSERT_TRUE(launchWithFlag(spin_, spinning_).ok());
  auto streamWait =
      std::async(std::launch::async, [&] { return context_->streamSynchronize(spinning_); });
  auto contextWait = std::async(std::launch::async, [&] { return context_->synchronize(); });
  // The legacy stream waits for the blocking streams, the spinning one included.
  auto legacyWait = std::async(std::launch::async, [&] { return context_->streamSynchronize(0); });
  CancelAtExit cancelAtExit{*context_};

  // The session's thread meanwhile: nothing here waits for the spinning stream (no legacy-stream
  // work, no synchronous copy, no free: those would wait for the kernel).
  const std::vector<uint8_t> pattern(256, 0x5a);
  std::vector<uint64_t> allocations;
  for (int round = 0; round < 20; ++round) {
    uint64_t stream = 0, event = 0, memory = 0;
    ASSERT_TRUE(context_->streamCreate(CU_STREAM_NON_BLOCKING, 0, &stream).ok());
    ASSERT_TRUE(context_->eventCreate(0, &event).ok());
    ASSERT_TRUE(context_->memAlloc(pattern.size(), &memory).ok());
    allocations.push_back(memory);
    ASSERT_TRUE(
        context_->copyHostToDevice(memory, pattern.data(), pattern.size(), other_, true).ok());
    ASSERT_TRUE(context_->eventRecord(event, stream).ok());
    ASSERT_TRUE(context_->streamWaitEvent(other_, event).ok());
    EXPECT_EQ(context_->streamQuery(spinning_).code, CUDA_ERROR_NOT_READY);
    ASSERT_TRUE(context_->eventDestroy(event).ok());
    ASSERT_TRUE(context_->streamDestroy(stream).ok());
    EXPECT_EQ(context_->takeDeviceOutput(), "");
  }
  // Nothing has released the kernel yet, so no wait can have ended.
  EXPECT_EQ(streamWait.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(contextWait.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(legacyWait.wait_for(0s), std::future_status::timeout);

  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  Status streamResult = finished(streamWait);
  Status contextResult = finished(contextWait);
  Status legacyResult = finished(legacyWait);
  EXPECT_TRUE(streamResult.ok()) << streamResult.message;
  EXPECT_TRUE(contextResult.ok()) << contextResult.message;
  EXPECT_TRUE(legacyResult.ok()) << legacyResult.message;

  // The copies on the other stream ran too.
  std::vector<uint8_t> copied(pattern.size());
  ASSERT_TRUE(
      context_->copyDeviceToHost(copied.data(), allocations.back(), copied.size(), other_).ok());
  EXPECT_EQ(copied, pattern);
  for (uint64_t memory : allocations) EXPECT_TRUE(context_->memFree(memory).ok());
}

TEST_F(EmuBackendWaitTest, EventDestroyedWhileAThreadWaitsOnIt) {
  ASSERT_TRUE(launchWithFlag(spin_, spinning_).ok());
  uint64_t event = 0;
  ASSERT_TRUE(context_->eventCreate(0, &event).ok());
  ASSERT_TRUE(context_->eventRecord(event, spinning_).ok());
  std::promise<void> waiting;
  auto eventWait = std::async(std::launch::async, [&] {
    waiting.set_value();
    return context_->eventSynchronize(event);
  });
  CancelAtExit cancelAtExit{*context_};
  waiting.get_future().wait();
  std::this_thread::sleep_for(50ms);  // most likely inside the wait by now; either way is allowed
  ASSERT_TRUE(context_->eventDestroy(event).ok());
  EXPECT_EQ(context_->eventQuery(event).code, CUDA_ERROR_INVALID_HANDLE);

  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  Status result = finished(eventWait);
  EXPECT_TRUE(result.code == CUDA_SUCCESS || result.code == CUDA_ERROR_INVALID_HANDLE)
      << result.code << " " << result.message;
  EXPECT_TRUE(context_->synchronize().ok());
}

TEST_F(EmuBackendWaitTest, StreamDestroyedWhileAThreadWaitsOnIt) {
  ASSERT_TRUE(launchWithFlag(spin_, spinning_).ok());
  std::promise<void> waiting;
  auto streamWait = std::async(std::launch::async, [&] {
    waiting.set_value();
    return context_->streamSynchronize(spinning_);
  });
  CancelAtExit cancelAtExit{*context_};
  waiting.get_future().wait();
  std::this_thread::sleep_for(50ms);
  // streamDestroy lets the stream's work finish first, so the kernel is released before.
  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  ASSERT_TRUE(context_->streamDestroy(spinning_).ok());
  EXPECT_EQ(context_->streamQuery(spinning_).code, CUDA_ERROR_INVALID_HANDLE);

  Status result = finished(streamWait);
  EXPECT_TRUE(result.code == CUDA_SUCCESS || result.code == CUDA_ERROR_INVALID_HANDLE)
      << result.code << " " << result.message;
  EXPECT_EQ(context_->streamSynchronize(spinning_).code, CUDA_ERROR_INVALID_HANDLE);
}

}  // namespace
}  // namespace gpupool::server
