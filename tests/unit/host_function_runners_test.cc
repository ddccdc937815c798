// Our libcuda's host-function threads (client/host_function_runners.h): one per stream with
// functions pending, running that stream's functions in the order they were queued, never a
// dropped one, and never holding another stream's functions behind a waiting one.
#include "client/host_function_runners.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace gpupool::client {
namespace {

using namespace std::chrono_literals;
using Key = HostFunctionRunners::StreamKey;

// What the functions did: the order they ran in and the threads they ran on.
struct Log {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<int> ran;
  std::set<std::thread::id> threads;

  void add(int value) {
    // Notified under the lock: the test may end, and the log go, as soon as the lock is free.
    std::lock_guard lock(mutex);
    ran.push_back(value);
    threads.insert(std::this_thread::get_id());
    changed.notify_all();
  }
  bool awaitCount(size_t n) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, 20s, [&] { return ran.size() >= n; });
  }
};

// A key no other test uses: the runners are the process's.
Key freshKey(uint64_t stream) {
  static int server;
  static std::atomic<uint64_t> nextContext{1};
  return {&server, nextContext++, stream};
}

// Places `count` functions on `key`, each once the one before has run and `gap` has passed.
void placeOneByOne(Log& log, const Key& key, int count, std::chrono::milliseconds gap) {
  for (int i = 0; i < count; ++i) {
    HostFunctionRunners::get().queue(key, [&log, i] { log.add(i); })->keep();
    if (!log.awaitCount(i + 1)) {
      ADD_FAILURE() << "function " << i << " never ran";
      return;
    }
    std::this_thread::sleep_for(gap);
  }
}

TEST(HostFunctionRunners, OneStreamsFunctionsRunInOrderOnOneThread) {
  Log log;
  const Key key = freshKey(7);
  constexpr int kCount = 200;
  // Held back until all are queued, so the burst queues behind a running function.
  std::atomic<bool> release{false};
  for (int i = 0; i < kCount; ++i) {
    HostFunctionRunners::get()
        .queue(key,
               [&log, &release, i] {
                 while (i == 0 && !release.load()) std::this_thread::sleep_for(1ms);
                 log.add(i);
               })
        ->keep();
  }
  release = true;
  ASSERT_TRUE(log.awaitCount(kCount));
  std::vector<int> expected(kCount);
  for (int i = 0; i < kCount; ++i) expected[i] = i;
  EXPECT_EQ(log.ran, expected);
  EXPECT_EQ(log.threads.size(), 1u) << "a burst on one stream should run on one thread";
  EXPECT_EQ(log.threads.count(std::this_thread::get_id()), 0u);
}

TEST(HostFunctionRunners, ADroppedPlacementNeverRunsAndTheOnesBehindItDo) {
  Log log;
  const Key key = freshKey(8);
  // The first placement of the key (the one that starts its thread) is dropped.
  {
    auto dropped = HostFunctionRunners::get().queue(key, [&log] { log.add(-1); });
  }
  HostFunctionRunners::get().queue(key, [&log] { log.add(1); })->keep();
  {
    auto dropped = HostFunctionRunners::get().queue(key, [&log] { log.add(-2); });
  }
  HostFunctionRunners::get().queue(key, [&log] { log.add(2); })->keep();
  ASSERT_TRUE(log.awaitCount(2));
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.ran, (std::vector<int>{1, 2}));
}

TEST(HostFunctionRunners, AFunctionWaitsUntilItsPlacementIsKept) {
  Log log;
  const Key key = freshKey(9);
  auto first = HostFunctionRunners::get().queue(key, [&log] { log.add(1); });
  // Queued behind a placement still being posted: neither may run yet.
  HostFunctionRunners::get().queue(key, [&log] { log.add(2); })->keep();
  std::this_thread::sleep_for(100ms);
  {
    std::lock_guard lock(log.mutex);
    EXPECT_TRUE(log.ran.empty());
  }
  first->keep();
  ASSERT_TRUE(log.awaitCount(2));
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.ran, (std::vector<int>{1, 2}));
}

TEST(HostFunctionRunners, AWaitingFunctionDoesNotHoldAnotherStreams) {
  Log log;
  const Key blocked = freshKey(10);
  const Key other = freshKey(11);
  std::atomic<bool> release{false};
  HostFunctionRunners::get()
      .queue(blocked,
             [&] {
               while (!release.load()) std::this_thread::sleep_for(1ms);
               log.add(1);
             })
      ->keep();
  HostFunctionRunners::get().queue(other, [&log] { log.add(2); })->keep();
  ASSERT_TRUE(log.awaitCount(1));
  {
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(log.ran, (std::vector<int>{2}));
  }
  release = true;
  ASSERT_TRUE(log.awaitCount(2));
}

TEST(HostFunctionRunners, AStreamsThreadWaitsForItsNextFunctionAWhile) {
  // One function a step, as a program placing a function between launches and synchronizes: the
  // stream's thread, idle between them, runs them all.
  Log log;
  const Key key = freshKey(12);
  placeOneByOne(log, key, 20, 1ms);
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.ran.size(), 20u);
  EXPECT_EQ(log.threads.size(), 1u);
}

TEST(HostFunctionRunners, AStreamWhoseThreadWentGetsOneAgain) {
  Log log;
  const Key key = freshKey(13);
  placeOneByOne(log, key, 3, 250ms);  // past the thread's wait for a next function
  std::lock_guard lock(log.mutex);
  EXPECT_EQ(log.ran, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace gpupool::client
