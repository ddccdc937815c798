// The waits of a BackendContext (streamSynchronize, eventSynchronize, synchronize) on threads of
// their own while the session's thread keeps using the context (server/backend.h).
// - On the emu backend through the BackendContext interface: a kernel spins until a flag in device
//   memory is set, so the waits are certainly under way while the main thread creates and destroys
//   streams and events, allocates, copies and launches; then the flag is set and every wait must
//   end.
// - The cuda backend's table of driver streams and events: a handle destroyed during a wait goes
//   back to the driver only when the wait ends.
//
// Labelled `tsan`: ThreadSanitizer checks that nothing here races.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/backend.h"
#include "server/backends/cuda/driver_handle_table.h"
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

  // Runs `wait` on a thread of its own; returns once that thread is most likely inside the wait
  // (the tests allow for either).
  static std::future<Status> startWait(std::function<Status()> wait) {
    std::promise<void> started;
    std::future<void> running = started.get_future();
    // The thread owns the promise: it may still be inside set_value when we return.
    auto result = std::async(std::launch::async,
                             [started = std::move(started), wait = std::move(wait)]() mutable {
                               started.set_value();
                               return wait();
                             });
    running.wait();
    std::this_thread::sleep_for(50ms);
    return result;
  }

  // The wait's result once it has ended; a hung wait fails the test and is cut short by cancel().
  Status finished(std::future<Status>& wait) {
    if (wait.wait_for(kWaitLimit) != std::future_status::ready) {
      ADD_FAILURE() << "a wait did not end within " << kWaitLimit.count() << " s";
      context_->cancel();
    }
    return wait.get();
  }

  // What a wait on a handle destroyed meanwhile may return.
  static void expectEndedOrGone(const Status& result) {
    EXPECT_TRUE(result.code == CUDA_SUCCESS || result.code == CUDA_ERROR_INVALID_HANDLE)
        << result.code << " " << result.message;
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
  // And waits that keep ending, so that their lookups overlap the loop's changes to the tables.
  // Looking up an id above every handle walks past the newest entries, where the loop inserts and
  // erases.
  uint64_t marker = 0;
  ASSERT_TRUE(context_->eventCreate(0, &marker).ok());
  const uint64_t unknown = ~uint64_t{0};
  std::atomic<bool> loopDone{false};
  auto busyWaits = std::async(std::launch::async, [&] {
    while (!loopDone) {
      if (Status s = context_->streamSynchronize(other_); !s.ok()) return s;
      if (Status s = context_->eventSynchronize(marker); !s.ok()) return s;
      if (context_->streamSynchronize(unknown).code != CUDA_ERROR_INVALID_HANDLE ||
          context_->eventSynchronize(unknown).code != CUDA_ERROR_INVALID_HANDLE) {
        return Status::error(CUDA_ERROR_UNKNOWN, "a wait on an unknown handle did not fail");
      }
    }
    return Status::success();
  });
  CancelAtExit cancelAtExit{*context_};

  // The session's thread meanwhile: nothing here waits for the spinning stream (no legacy-stream
  // work, no synchronous copy, no free: those would wait for the kernel).
  const std::vector<uint8_t> pattern(256, 0x5a);
  std::vector<uint64_t> allocations;
  for (int round = 0; round < 50; ++round) {
    uint64_t stream = 0, event = 0, memory = 0;
    ASSERT_TRUE(context_->streamCreate(CU_STREAM_NON_BLOCKING, 0, &stream).ok());
    ASSERT_TRUE(context_->eventCreate(0, &event).ok());
    ASSERT_TRUE(context_->memAlloc(pattern.size(), &memory).ok());
    allocations.push_back(memory);
    ASSERT_TRUE(
        context_->copyHostToDevice(memory, pattern.data(), pattern.size(), other_, true).ok());
    ASSERT_TRUE(context_->eventRecord(event, stream).ok());
    ASSERT_TRUE(context_->streamWaitEvent(other_, event).ok());
    ASSERT_TRUE(context_->eventRecord(marker, other_).ok());
    ASSERT_TRUE(context_->eventDestroy(event).ok());
    ASSERT_TRUE(context_->streamDestroy(stream).ok());
    EXPECT_EQ(context_->takeDeviceOutput(), "");
  }
  // Nothing has released the kernel yet, so no wait can have ended. (Asked only now: the stream's
  // lock, which streamQuery takes, would order the loop's calls after the waits' lookups and hide
  // a race between them from ThreadSanitizer.)
  EXPECT_EQ(context_->streamQuery(spinning_).code, CUDA_ERROR_NOT_READY);
  loopDone = true;
  Status busyResult = finished(busyWaits);
  EXPECT_TRUE(busyResult.ok()) << busyResult.message;
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
  auto eventWait = startWait([&] { return context_->eventSynchronize(event); });
  CancelAtExit cancelAtExit{*context_};
  ASSERT_TRUE(context_->eventDestroy(event).ok());
  EXPECT_EQ(context_->eventQuery(event).code, CUDA_ERROR_INVALID_HANDLE);

  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  expectEndedOrGone(finished(eventWait));
  EXPECT_TRUE(context_->synchronize().ok());
}

TEST_F(EmuBackendWaitTest, StreamDestroyedWhileAThreadWaitsOnIt) {
  ASSERT_TRUE(launchWithFlag(spin_, spinning_).ok());
  auto streamWait = startWait([&] { return context_->streamSynchronize(spinning_); });
  CancelAtExit cancelAtExit{*context_};
  // streamDestroy lets the stream's work finish first, so the kernel is released before.
  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  ASSERT_TRUE(context_->streamDestroy(spinning_).ok());
  EXPECT_EQ(context_->streamQuery(spinning_).code, CUDA_ERROR_INVALID_HANDLE);

  expectEndedOrGone(finished(streamWait));
  EXPECT_EQ(context_->streamSynchronize(spinning_).code, CUDA_ERROR_INVALID_HANDLE);
}

// A stream-ordered free gives the block back to its pool only when the stream gets there (the
// stream's worker does it, beside the session's thread): while a kernel holds the stream, other
// allocations get other memory; once it is reached the block is idle and reused, without
// opportunistic reuse only on the stream that freed it.
TEST_F(EmuBackendWaitTest, PoolFreeTakesEffectWhenTheStreamReachesIt) {
  constexpr uint64_t kBlock = 4096;
  ASSERT_TRUE(context_->memPoolSetAttribute(0, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, UINT64_MAX).ok());
  uint64_t block = 0, elsewhere = 0;
  ASSERT_TRUE(context_->memAllocAsync(0, kBlock, spinning_, &block).ok());
  ASSERT_TRUE(launchWithFlag(spin_, spinning_).ok());
  CancelAtExit cancelAtExit{*context_};
  ASSERT_TRUE(context_->memFreeAsync(block, spinning_).ok());
  ASSERT_TRUE(context_->memAllocAsync(0, kBlock, other_, &elsewhere).ok());
  EXPECT_NE(elsewhere, block);
  EXPECT_EQ(context_->memPoolIdleBytes(), 0u);

  ASSERT_TRUE(launchWithFlag(release_, other_).ok());
  ASSERT_TRUE(context_->streamSynchronize(spinning_).ok());
  EXPECT_EQ(context_->memPoolIdleBytes(), kBlock);
  ASSERT_TRUE(context_->memPoolSetAttribute(0, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 0).ok());
  uint64_t onOther = 0, onSame = 0;
  ASSERT_TRUE(context_->memAllocAsync(0, kBlock, other_, &onOther).ok());
  EXPECT_NE(onOther, block);
  ASSERT_TRUE(context_->memAllocAsync(0, kBlock, spinning_, &onSame).ok());
  EXPECT_EQ(onSame, block);

  uint64_t used = 0, reserved = 0;
  ASSERT_TRUE(context_->memPoolGetAttribute(0, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used).ok());
  ASSERT_TRUE(
      context_->memPoolGetAttribute(0, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved).ok());
  EXPECT_EQ(used, 3 * kBlock);
  EXPECT_EQ(reserved, 3 * kBlock);
}

// A driver handle as the table sees it, and a record of what it gave back to the "driver".
using FakeHandle = int;
struct DestroyLog {
  std::mutex mutex;
  std::vector<FakeHandle> destroyed;
  std::vector<std::thread::id> threads;  // where each was destroyed
  CUresult answer = CUDA_SUCCESS;        // what the driver says to a destroy
};

DriverHandleTable<FakeHandle> tableLoggingTo(DestroyLog& log) {
  return DriverHandleTable<FakeHandle>([&log](FakeHandle handle) {
    std::lock_guard lock(log.mutex);
    if (log.answer != CUDA_SUCCESS) return Status::error(log.answer, "refused");
    log.destroyed.push_back(handle);
    log.threads.push_back(std::this_thread::get_id());
    return Status::success();
  });
}

TEST(DriverHandleTableTest, HandleRemovedDuringAWaitIsDestroyedWhenTheWaitEnds) {
  DestroyLog log;
  auto table = tableLoggingTo(log);
  table.add(1, 100);
  std::promise<FakeHandle> waitedOn;
  std::promise<void> finishWait;
  std::shared_future<void> finish = finishWait.get_future().share();
  std::thread::id waiterThread;
  auto wait = std::async(std::launch::async, [&] {
    waiterThread = std::this_thread::get_id();
    return table.wait(1, [&](FakeHandle handle) {
      waitedOn.set_value(handle);
      finish.wait();  // the "driver" is still waiting
      return Status::success();
    });
  });
  EXPECT_EQ(waitedOn.get_future().get(), 100);

  std::optional<Status> removed = table.remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE(removed->ok());
  EXPECT_FALSE(table.find(1).has_value());  // gone for everyone at once...
  EXPECT_FALSE(table.wait(1, [](FakeHandle) { return Status::success(); }).has_value());
  {
    std::lock_guard lock(log.mutex);
    EXPECT_TRUE(log.destroyed.empty());  // ...but not destroyed under the wait
  }

  finishWait.set_value();
  std::optional<Status> waited = wait.get();
  ASSERT_TRUE(waited.has_value());
  EXPECT_TRUE(waited->ok());
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.destroyed, std::vector<FakeHandle>{100});
  EXPECT_EQ(log.threads, std::vector<std::thread::id>{waiterThread});
}

TEST(DriverHandleTableTest, HandleWithoutWaitsIsDestroyedByRemove) {
  DestroyLog log;
  auto table = tableLoggingTo(log);
  table.add(1, 100);
  table.add(2, 200);
  std::optional<Status> waited = table.wait(1, [](FakeHandle handle) {
    return handle == 100 ? Status::success() : Status::error(CUDA_ERROR_UNKNOWN, "wrong handle");
  });
  ASSERT_TRUE(waited.has_value());
  EXPECT_TRUE(waited->ok());
  std::optional<Status> removed = table.remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE(removed->ok());
  EXPECT_FALSE(table.remove(1).has_value());
  {
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(log.destroyed, std::vector<FakeHandle>{100});
    EXPECT_EQ(log.threads, std::vector<std::thread::id>{std::this_thread::get_id()});
  }
  EXPECT_EQ(table.takeAll(), std::vector<FakeHandle>{200});
  EXPECT_FALSE(table.find(2).has_value());
}

TEST(DriverHandleTableTest, HandleTheDriverRefusesToDestroyStays) {
  DestroyLog log;
  auto table = tableLoggingTo(log);
  table.add(1, 100);
  log.answer = CUDA_ERROR_INVALID_CONTEXT;
  std::optional<Status> removed = table.remove(1);
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->code, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(table.find(1), std::optional<FakeHandle>(100));
}

}  // namespace
}  // namespace gpupool::server
