// The emu's stream queue (server/backends/emu/stream_queue.h): operations run in order on the
// queue's thread, and an operation queued with a skip flag does not run once the flag is set, even
// when it was queued before (a context broken by an earlier kernel runs nothing more).
//
// Labelled `tsan`: the flag is set on the queue's thread and read there, queued from this one.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "server/backends/emu/stream_queue.h"

namespace gpupool::server::emu {
namespace {

TEST(EmuStreamQueue, RunsOperationsInTheirOrder) {
  std::mutex mutex;
  std::vector<int> ran;
  StreamQueue queue;
  for (int i = 0; i < 1000; ++i) {
    queue.enqueue([&, i] {
      std::lock_guard lock(mutex);
      ran.push_back(i);
    });
  }
  queue.drain();
  ASSERT_EQ(ran.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_TRUE(queue.idle());
}

TEST(EmuStreamQueue, AnOperationSkipsOnceItsFlagIsSetByAnEarlierOne) {
  std::atomic<bool> broken{false};
  std::mutex mutex;
  std::vector<int> ran;
  auto record = [&](int i) {
    std::lock_guard lock(mutex);
    ran.push_back(i);
  };
  StreamQueue queue;
  // All queued before the second operation "faults": the third and fourth are skipped when their
  // turn comes; the fifth, queued without the flag (host work that must be released), runs.
  queue.enqueue([&] { record(1); }, &broken);
  queue.enqueue(
      [&] {
        record(2);
        broken.store(true, std::memory_order_release);
      },
      &broken);
  queue.enqueue([&] { record(3); }, &broken);
  queue.enqueue([&] { record(4); }, &broken);
  queue.enqueue([&] { record(5); });
  queue.drain();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 5}));
  // Later ones skip as well, and the queue still drains.
  queue.enqueue([&] { record(6); }, &broken);
  queue.drain();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 5}));
}

TEST(EmuStreamQueue, ASkippedOperationStillReleasesWhatItHolds) {
  std::atomic<bool> broken{true};
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  StreamQueue queue;
  queue.enqueue([held = std::move(held)] { FAIL() << "a skipped operation ran"; }, &broken);
  queue.drain();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace gpupool::server::emu
