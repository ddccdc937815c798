// Many calls in flight on one session (issue 22), at the wire: a synchronize that waits for a
// kernel does not hold up the session's other calls, whose replies come back first, each naming
// its call; and a client that leaves while its waits still block harms nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "gpupool_server.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

// wait_for_flag(flag, out): spins until *flag is nonzero, then *out = *flag.
constexpr const char* kWaitForFlagPtx = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry wait_for_flag(.param .u64 flag, .param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [flag];
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
$spin:
  ld.volatile.global.u32 %r1, [%rd1];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra $spin;
  st.global.u32 [%rd2], %r1;
  ret;
}
)";

// A context with a launched wait_for_flag kernel on the legacy stream, and a non-blocking stream
// to set the flag from.
struct SpinningKernel {
  explicit SpinningKernel(WireClient& client) {
    context = client.createContext().handle;
    EXPECT_NE(context, 0u);
    flag = client.alloc(context, 4).handle;
    out = client.alloc(context, 4).handle;
    EXPECT_EQ(client.memset(context, flag, 0, 4).result, CUDA_SUCCESS);
    EXPECT_EQ(client.memset(context, out, 0, 4).result, CUDA_SUCCESS);
    auto module = client.loadPtx(context, kWaitForFlagPtx);
    EXPECT_EQ(module.result, CUDA_SUCCESS) << module.message;
    auto function = client.function(context, module.handle, "wait_for_flag");
    EXPECT_EQ(function.result, CUDA_SUCCESS) << function.message;
    auto stream = client.call([&](wire::Request::Builder r) {
      auto s = r.initStreamCreate();
      s.setContext(context);
      s.setFlags(CU_STREAM_NON_BLOCKING);
    });
    EXPECT_EQ(stream.result, CUDA_SUCCESS) << stream.message;
    setter = stream.handle;
    auto launched = client.launch(context, function.handle, twoPointers(flag, out));
    EXPECT_EQ(launched.result, CUDA_SUCCESS) << launched.message;
  }
  // Sets the flag to `value` with an asynchronous copy on the setter stream, as call `callId`,
  // without waiting for its reply.
  void release(WireClient& client, uint32_t value, uint64_t callId) const {
    std::vector<uint8_t> bytes(4);
    std::memcpy(bytes.data(), &value, 4);
    client.send(
        [&](wire::Request::Builder r) {
          auto m = r.initMemcpyHtoD();
          m.setContext(context);
          m.setDst(flag);
          m.setBytes(4);
          m.setStream(setter);
          m.setAsync(true);
          r.setCallId(callId);
        },
        bytes);
  }
  uint64_t context = 0, flag = 0, out = 0, setter = 0;
};

// The next `n` replies, by the call they answer (they may come in any order).
std::map<uint64_t, Reply> receiveReplies(WireClient& client, int n) {
  std::map<uint64_t, Reply> replies;
  for (int i = 0; i < n; ++i) {
    Reply r = client.receive();
    replies[r.callId] = r;
  }
  return replies;
}

TEST(CallsInFlight, OtherCallsAreAnsweredWhileASynchronizeWaits) {
  e2e::GpupoolServer server;
  WireClient client(server.endpoint());
  SpinningKernel kernel(client);

  client.send([&](wire::Request::Builder r) {
    r.setCtxSynchronize(kernel.context);
    r.setCallId(1);
  });
  // The session serves these while the synchronize waits for the kernel, which waits for them.
  client.send([&](wire::Request::Builder r) {
    auto m = r.initMemAlloc();
    m.setContext(kernel.context);
    m.setBytes(256);
    r.setCallId(2);
  });
  Reply alloc = client.receive();
  EXPECT_EQ(alloc.callId, 2u) << "the allocation must not wait for the synchronize";
  EXPECT_EQ(alloc.result, CUDA_SUCCESS) << alloc.message;
  kernel.release(client, 7, 3);
  // Replies 1 and 3 may come in either order now: the kernel ends once the flag is set.
  std::map<uint64_t, Reply> replies = receiveReplies(client, 2);
  ASSERT_EQ(replies.count(1), 1u);
  ASSERT_EQ(replies.count(3), 1u);
  EXPECT_EQ(replies[3].result, CUDA_SUCCESS) << replies[3].message;
  EXPECT_EQ(replies[1].result, CUDA_SUCCESS) << replies[1].message;
  Reply out = client.read(kernel.context, kernel.out, 4);
  ASSERT_EQ(out.result, CUDA_SUCCESS) << out.message;
  uint32_t seen = 0;
  std::memcpy(&seen, out.bulk.data(), 4);
  EXPECT_EQ(seen, 7u) << "the synchronize returned before the kernel finished";
}

// The server's event loop runs calls on a bounded pool of workers; a synchronize waits on the
// session's waiter threads instead, so even the only worker is free for other sessions meanwhile.
TEST(CallsInFlight, ASynchronizeHoldsNoWorker) {
  e2e::ServerOptions options;
  options.extraArgs = {"--workers", "1"};
  e2e::GpupoolServer server(options);
  WireClient waiting(server.endpoint());
  SpinningKernel kernel(waiting);
  waiting.send([&](wire::Request::Builder r) {
    r.setCtxSynchronize(kernel.context);
    r.setCallId(1);
  });
  WireClient other(server.endpoint());
  uint64_t context = other.createContext().handle;
  for (int i = 0; i < 20; ++i) {
    Reply alloc = other.alloc(context, 4096);
    ASSERT_EQ(alloc.result, CUDA_SUCCESS) << alloc.message;
    EXPECT_EQ(other.free(context, alloc.handle).result, CUDA_SUCCESS);
  }
  kernel.release(waiting, 1, 2);
  std::map<uint64_t, Reply> replies = receiveReplies(waiting, 2);
  EXPECT_EQ(replies[1].result, CUDA_SUCCESS) << replies[1].message;
  EXPECT_EQ(replies[2].result, CUDA_SUCCESS) << replies[2].message;
}

TEST(CallsInFlight, AClientLeavingWhileItsWaitsBlockHarmsNothing) {
  e2e::GpupoolServer server;
  {
    WireClient client(server.endpoint());
    SpinningKernel kernel(client);
    for (uint64_t id = 1; id <= 3; ++id) {
      client.send([&](wire::Request::Builder r) {
        r.setCtxSynchronize(kernel.context);
        r.setCallId(id);
      });
    }
    // Gone with three waits blocked on a kernel that never ends.
  }
  WireClient observer(server.endpoint(), wire::Hello::Purpose::STATUS);
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = observer.serverMemoryUsed() == 0;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(released) << "the session's memory was not released: its waits still block";
  EXPECT_TRUE(server.running());
  WireClient next(server.endpoint());
  EXPECT_EQ(next.createContext().result, CUDA_SUCCESS);
}

}  // namespace
}  // namespace gpupool::hardening
