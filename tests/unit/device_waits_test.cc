// The threads a session's device waits run on: they run concurrently, at most as many as allowed,
// and leave when idle, so a session that is not waiting for its device holds none.
#include "server/device_waits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gpupool::server {
namespace {

using namespace std::chrono_literals;

// A latch the waits block on until the test opens it.
class Gate {
 public:
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

bool eventually(const std::function<bool()>& condition) {
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(5ms)) {
    if (condition()) return true;
  }
  return condition();
}

TEST(DeviceWaits, WaitsRunAtOnceUpToTheLimit) {
  DeviceWaits waits(3);
  Gate gate;
  std::atomic<int> entered{0}, finished{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(waits.start([&] {
      ++entered;
      gate.pass();
      ++finished;
    }));
  }
  // All three block at once: each has a thread of its own.
  EXPECT_TRUE(eventually([&] { return entered == 3; }));
  EXPECT_EQ(waits.busy(), 3u);
  EXPECT_FALSE(waits.start([] {})) << "a fourth wait must be refused, not queued behind the others";
  gate.open();
  waits.finishAll();
  EXPECT_EQ(finished, 3);
  EXPECT_EQ(waits.busy(), 0u);
  EXPECT_TRUE(waits.start([&] { ++finished; }));
  waits.finishAll();
  EXPECT_EQ(finished, 4);
}

TEST(DeviceWaits, IdleThreadsAreReusedAndThenLeave) {
  DeviceWaits waits(8, 200ms);
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(waits.start([&] { ++ran; }));
    waits.finishAll();
  }
  EXPECT_EQ(ran, 20);
  EXPECT_LE(waits.threads(), 1u) << "one wait at a time needs one thread";
  EXPECT_TRUE(eventually([&] { return waits.threads() == 0; })) << "idle threads must leave";
  ASSERT_TRUE(waits.start([&] { ++ran; }));
  waits.finishAll();
  EXPECT_EQ(ran, 21);
}

// A client waiting on one stream after another sends its next wait as soon as the answer reaches
// it, often before the thread that answered is idle again: that thread takes it, no new one starts.
TEST(DeviceWaits, AWaitStartedWhileAnotherIsAnsweredReusesItsThread) {
  DeviceWaits waits(8);
  std::atomic<int> ran{0};
  std::function<void(int)> chain = [&](int left) {
    ASSERT_TRUE(waits.start([&] { ++ran; },
                            [&, left] {
                              // Still answering: the next wait comes in now.
                              if (left > 0) chain(left - 1);
                            }));
  };
  chain(20);
  EXPECT_TRUE(eventually([&] { return ran == 21; }));
  waits.finishAll();
  EXPECT_EQ(waits.threads(), 1u) << "each wait came in while the previous one was answered";
}

TEST(DeviceWaits, DestructionWaitsForRunningWaits) {
  std::atomic<bool> done{false};
  {
    DeviceWaits waits(2);
    ASSERT_TRUE(waits.start([&] {
      std::this_thread::sleep_for(100ms);
      done = true;
    }));
  }
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace gpupool::server
