// A session's host-function gates (server/host_gates.h): the stream's host work stops at its gate
// until the release, the wait ends once the gate is reached, and teardown (a context destroyed, the
// session ending) lets every stopped stream and every wait go on; a gate that the session's own
// serving thread waits behind is broken rather than left to hang that thread.
#include "server/host_gates.h"

#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

namespace gpupool::server {
namespace {

using namespace std::chrono_literals;

// Runs a gate's host work on a thread of its own, as a stream's worker would.
struct StreamThread {
  explicit StreamThread(std::function<void()> work)
      : thread([this, work = std::move(work)] {
          work();
          passed = true;
        }) {}
  ~StreamThread() {
    if (thread.joinable()) thread.join();
  }
  std::atomic<bool> passed{false};
  std::thread thread;
};

// Gate 7 of context 1, its stream started and stopped there.
struct ReachedGate {
  ReachedGate() {
    EXPECT_TRUE(gates.open(1, 7, &work).ok());
    stream.emplace(work);
    EXPECT_TRUE(gates.wait(1, 7).ok());
  }
  HostGates gates;
  std::function<void()> work;
  std::optional<StreamThread> stream;  // declared last: joined before the gates go
};

TEST(HostGates, TheStreamWaitsAtTheGateUntilReleased) {
  HostGates gates;
  std::function<void()> work;
  ASSERT_TRUE(gates.open(1, 7, &work).ok());
  EXPECT_EQ(gates.reached(1, 7).code, CUDA_ERROR_NOT_READY);
  StreamThread stream(work);
  EXPECT_TRUE(gates.wait(1, 7).ok());
  EXPECT_TRUE(gates.reached(1, 7).ok());
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(stream.passed) << "the stream went past a gate not yet released";
  EXPECT_TRUE(gates.release(1, 7).ok());
  stream.thread.join();
  EXPECT_TRUE(stream.passed);
  EXPECT_EQ(gates.openCount(), 0u);
}

TEST(HostGates, UnknownGatesAndOtherContextsAreRefused) {
  HostGates gates;
  std::function<void()> work;
  ASSERT_TRUE(gates.open(1, 7, &work).ok());
  EXPECT_EQ(gates.open(1, 7, &work).code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(gates.reached(2, 7).code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(gates.release(2, 7).code, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(gates.wait(1, 8).code, CUDA_ERROR_INVALID_HANDLE);
  gates.abandon(7);
  EXPECT_EQ(gates.openCount(), 0u);
}

TEST(HostGates, TeardownReleasesStoppedStreamsAndWaits) {
  HostGates gates;
  std::function<void()> a, b, c;
  ASSERT_TRUE(gates.open(1, 1, &a).ok());
  ASSERT_TRUE(gates.open(1, 2, &b).ok());
  ASSERT_TRUE(gates.open(2, 3, &c).ok());
  StreamThread streamA(a);
  // A wait for a gate the stream has not reached yet ends when teardown releases it.
  // (A wait that comes after the release finds no gate: either way it must not hang.)
  std::thread waiter([&] {
    Status st = gates.wait(1, 2);
    EXPECT_TRUE(st.ok() || st.code == CUDA_ERROR_INVALID_HANDLE);
  });
  ASSERT_TRUE(gates.wait(1, 1).ok());
  std::this_thread::sleep_for(50ms);
  gates.releaseContext(1);
  waiter.join();
  streamA.thread.join();
  EXPECT_TRUE(streamA.passed) << "releasing the context left its stream stopped";
  EXPECT_EQ(gates.openCount(), 1u);
  // Work reaching a gate already released passes at once.
  b();
  StreamThread streamC(c);
  ASSERT_TRUE(gates.wait(2, 3).ok());
  gates.releaseAll();
  EXPECT_EQ(gates.openCount(), 0u);
}

// The session's serving thread waits for the stream stopped at the gate (as cuMemFree drains it):
// only that thread could read the release, so the gate breaks, the stream goes on, and the
// client's wait hears that its function was not run.
TEST(HostGates, AGateTheServingThreadWaitsBehindIsBroken) {
  ReachedGate reached;
  HostGates& gates = reached.gates;
  StreamThread& stream = *reached.stream;
  const auto started = std::chrono::steady_clock::now();
  {
    HostGates::ServingRequest serving(gates);
    stream.thread.join();  // the drain
  }
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(stream.passed);
  EXPECT_GE(waited, HostGates::kSelfDeadlockAfter);
  EXPECT_LT(waited, HostGates::kSelfDeadlockAfter + 2s);
  EXPECT_EQ(gates.brokenCount(), 1u);
  EXPECT_EQ(gates.reached(1, 7).code, CUDA_ERROR_ILLEGAL_STATE);
  EXPECT_TRUE(gates.wait(1, 7).ok()) << "a wait for a broken gate must end";
  EXPECT_TRUE(gates.release(1, 7).ok());
  EXPECT_EQ(gates.openCount(), 0u);
}

// A request that named another context waits for that context's work, which this gate does not
// hold: the gate holds until its release. Naming the gate's context too makes it the old case.
TEST(HostGates, AGateHoldsWhileTheServingThreadWaitsForAnotherContext) {
  ReachedGate reached;
  HostGates& gates = reached.gates;
  StreamThread& stream = *reached.stream;
  {
    HostGates::ServingRequest serving(gates);
    gates.servingFor(2);
    std::this_thread::sleep_for(HostGates::kSelfDeadlockAfter + 500ms);  // context 2's drain
  }
  EXPECT_FALSE(stream.passed) << "the gate broke while the serving thread waited for context 2";
  EXPECT_EQ(gates.brokenCount(), 0u);
  {
    HostGates::ServingRequest serving(gates);
    gates.servingFor(2);
    gates.servingFor(1);  // a request of both contexts may wait behind the gate
    stream.thread.join();
  }
  EXPECT_TRUE(stream.passed);
  EXPECT_EQ(gates.brokenCount(), 1u);
  EXPECT_TRUE(gates.release(1, 7).ok());
}

// A serving thread that works (compiles a module, say) for longer than the limit, or one that
// serves nothing, is not waiting behind the gate: the gate holds until its release.
TEST(HostGates, AGateHoldsWhileTheServingThreadWorksOrIsIdle) {
  ReachedGate reached;
  HostGates& gates = reached.gates;
  StreamThread& stream = *reached.stream;
  {
    HostGates::ServingRequest serving(gates);
    const auto until = std::chrono::steady_clock::now() + HostGates::kSelfDeadlockAfter + 500ms;
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  }
  std::this_thread::sleep_for(HostGates::kSelfDeadlockAfter + 300ms);
  EXPECT_FALSE(stream.passed) << "the gate broke while the serving thread was busy or idle";
  EXPECT_EQ(gates.brokenCount(), 0u);
  EXPECT_TRUE(gates.reached(1, 7).ok());
  EXPECT_TRUE(gates.release(1, 7).ok());
  stream.thread.join();
  EXPECT_TRUE(stream.passed);
}

TEST(HostGates, WorkQueuedOutlivesTheGates) {
  std::function<void()> work;
  {
    HostGates gates;
    ASSERT_TRUE(gates.open(1, 1, &work).ok());
  }
  work();  // released by the destructor: returns at once
}

}  // namespace
}  // namespace gpupool::server
