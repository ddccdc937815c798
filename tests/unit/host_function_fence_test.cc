// The host-function fence of our libcuda (client/host_function_fence.h): what waits for a pending
// host function, and for which context's.
#include "client/host_function_fence.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace gpupool::client {
namespace {

using namespace std::chrono_literals;
using Work = HostFunctionFence::Work;

int serverA, serverB;  // two servers' addresses, as scopes name them
const FenceScope kContextA{&serverA, 1};
const FenceScope kContextB{&serverA, 2};
const FenceScope kContextAOfB{&serverB, 1};  // the same id on another server

// Runs `wait` on a thread of its own: it must still be waiting after a while, and end once
// `release` has run.
void expectHeldUntil(const std::function<void()>& wait, const std::function<void()>& release) {
  auto waiting = std::async(std::launch::async, wait);
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout) << "it did not wait";
  release();
  EXPECT_EQ(waiting.wait_for(10s), std::future_status::ready) << "it was not let go";
}

TEST(HostFunctionFence, ACallWaitsOnlyForItsOwnContextsFunctions) {
  HostFunctionFence::opened(false, kContextA);
  // Other contexts, of this server or another, go at once.
  HostFunctionFence::await(Work::kCall, kContextB);
  HostFunctionFence::await(Work::kCall, kContextAOfB);
  expectHeldUntil([] { HostFunctionFence::await(Work::kCall, kContextA); },
                  [] { HostFunctionFence::closed(false, kContextA); });
}

TEST(HostFunctionFence, EveryContextWaitsForAll) {
  HostFunctionFence::opened(false, kContextB);
  expectHeldUntil([] { HostFunctionFence::await(Work::kCall, FenceScope::any()); },
                  [] { HostFunctionFence::closed(false, kContextB); });
}

TEST(HostFunctionFence, BlockingStreamsWaitOnlyForTheLegacyStreamsFunctions) {
  HostFunctionFence::opened(false, kContextA);  // on a stream of its own
  HostFunctionFence::await(Work::kBlockingStream, kContextA);
  HostFunctionFence::await(Work::kNonBlockingStream, kContextA);
  HostFunctionFence::opened(true, kContextA);  // on the legacy stream
  HostFunctionFence::await(Work::kBlockingStream, kContextB);
  HostFunctionFence::await(Work::kNonBlockingStream, kContextA);
  expectHeldUntil([] { HostFunctionFence::await(Work::kBlockingStream, kContextA); },
                  [] { HostFunctionFence::closed(true, kContextA); });
  HostFunctionFence::closed(false, kContextA);
}

// A ticket's wait is checked again where the request is framed: a function placed on its context
// after the wait stops the send; one placed on another context does not.
TEST(HostFunctionFence, ATicketIsCheckedAgainForItsContext) {
  {
    auto ticket = HostFunctionFence::hold(Work::kCall, kContextA);
    EXPECT_TRUE(HostFunctionFence::clearToSend());
    HostFunctionFence::opened(false, kContextB);
    EXPECT_TRUE(HostFunctionFence::clearToSend());
    HostFunctionFence::opened(false, kContextA);
    EXPECT_FALSE(HostFunctionFence::clearToSend());
    HostFunctionFence::closed(false, kContextA);
    EXPECT_TRUE(HostFunctionFence::clearToSend());
    {
      // Nested for another context: both together wait for every context.
      auto inner = HostFunctionFence::hold(Work::kCall, kContextAOfB);
      EXPECT_FALSE(HostFunctionFence::clearToSend());
    }
    EXPECT_TRUE(HostFunctionFence::clearToSend());
  }
  HostFunctionFence::opened(false, kContextA);
  EXPECT_TRUE(HostFunctionFence::clearToSend()) << "no ticket held: nothing to check";
  HostFunctionFence::closed(false, kContextA);
  HostFunctionFence::closed(false, kContextB);
}

// A call whose request does not say its context is for the thread's current one, as the driver
// state reports it; every context when there is no source.
TEST(HostFunctionFence, ACallWithoutAContextIsForTheThreadsCurrentOne) {
  {
    auto ticket = HostFunctionFence::holdForThread(Work::kCall);  // no source: every context
    HostFunctionFence::opened(false, kContextB);
    EXPECT_FALSE(HostFunctionFence::clearToSend());
    HostFunctionFence::closed(false, kContextB);
  }
  HostFunctionFence::setThreadScopeSource([] { return kContextA; });
  HostFunctionFence::opened(false, kContextB);
  {
    auto ticket = HostFunctionFence::holdForThread(Work::kCall);  // B's function does not hold it
    EXPECT_TRUE(HostFunctionFence::clearToSend());
    HostFunctionFence::opened(false, kContextA);
    EXPECT_FALSE(HostFunctionFence::clearToSend());
    HostFunctionFence::closed(false, kContextA);
  }
  HostFunctionFence::setThreadScopeSource(nullptr);
  HostFunctionFence::closed(false, kContextB);
}

TEST(HostFunctionFence, HostFunctionThreadsPassFreely) {
  HostFunctionFence::opened(true, kContextA);
  std::thread([] {
    HostFunctionFence::enterHostFunctionThread();
    HostFunctionFence::await(Work::kCall, kContextA);
    HostFunctionFence::await(Work::kLegacyStream, FenceScope::any());
    auto ticket = HostFunctionFence::hold(Work::kCall, kContextA);
    EXPECT_TRUE(HostFunctionFence::clearToSend());
    auto forThread = HostFunctionFence::holdForThread(Work::kCall);
    EXPECT_TRUE(HostFunctionFence::clearToSend());
  }).join();
  HostFunctionFence::closed(true, kContextA);
}

}  // namespace
}  // namespace gpupool::client
