// Tenant isolation: session B names what session A owns (device pointers, module, function,
// stream and event ids, its context id) and gets errors, never access to A's data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "gpupool_server.h"
#include "wire_client.h"

namespace gpupool::hardening {
namespace {

// copy_word(src, dst): *dst = *src, through global memory, so a launch touches exactly the
// pointers it is given.
constexpr const char* kCopyWordPtx = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry copy_word(.param .u64 src, .param .u64 dst)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [dst];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  ret;
}
)";

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<e2e::GpupoolServer>();
    a_ = std::make_unique<WireClient>(server_->endpoint());
    b_ = std::make_unique<WireClient>(server_->endpoint());
    auto ca = a_->createContext();
    auto cb = b_->createContext();
    ASSERT_EQ(ca.result, CUDA_SUCCESS) << ca.message;
    ASSERT_EQ(cb.result, CUDA_SUCCESS) << cb.message;
    ctxA_ = ca.handle;
    ctxB_ = cb.handle;
    auto alloc = a_->alloc(ctxA_, 4096);
    ASSERT_EQ(alloc.result, CUDA_SUCCESS) << alloc.message;
    memA_ = alloc.handle;
    secret_ = pattern(4096, 0x5a);
    ASSERT_EQ(a_->write(ctxA_, memA_, secret_).result, CUDA_SUCCESS);
  }

  // A's memory still holds exactly what A wrote.
  void expectAUntouched() {
    auto back = a_->read(ctxA_, memA_, secret_.size());
    ASSERT_EQ(back.result, CUDA_SUCCESS) << back.message;
    EXPECT_EQ(back.bulk, secret_);
  }

  std::unique_ptr<e2e::GpupoolServer> server_;
  std::unique_ptr<WireClient> a_, b_;
  uint64_t ctxA_ = 0, ctxB_ = 0, memA_ = 0;
  std::vector<uint8_t> secret_;
};

TEST_F(IsolationTest, ForeignPointerCannotBeReadWrittenSetOrFreed) {
  auto read = b_->read(ctxB_, memA_, 64);
  EXPECT_NE(read.result, CUDA_SUCCESS);
  EXPECT_TRUE(read.bulk.empty()) << "B received bytes of A's memory";
  auto inner = b_->read(ctxB_, memA_ + 128, 16);
  EXPECT_NE(inner.result, CUDA_SUCCESS);
  EXPECT_TRUE(inner.bulk.empty());

  EXPECT_NE(b_->write(ctxB_, memA_, pattern(64, 1)).result, CUDA_SUCCESS);
  EXPECT_NE(b_->memset(ctxB_, memA_, 0xff, 64).result, CUDA_SUCCESS);
  EXPECT_NE(b_->free(ctxB_, memA_).result, CUDA_SUCCESS);
  auto range = b_->call([&](wire::Request::Builder r) {
    auto m = r.initMemGetAddressRange();
    m.setContext(ctxB_);
    m.setAddress(memA_);
  });
  EXPECT_NE(range.result, CUDA_SUCCESS);
  auto dtod = b_->call([&](wire::Request::Builder r) {
    auto m = r.initMemcpyDtoD();
    m.setContext(ctxB_);
    m.setDst(memA_);
    m.setSrc(memA_ + 64);
    m.setBytes(64);
  });
  EXPECT_NE(dtod.result, CUDA_SUCCESS);
  // The session itself is still usable, and A's data is intact and still A's to free.
  EXPECT_EQ(b_->alloc(ctxB_, 64).result, CUDA_SUCCESS);
  expectAUntouched();
  EXPECT_EQ(a_->free(ctxA_, memA_).result, CUDA_SUCCESS);
}

// Stream memory operations name addresses too: B can neither write A's memory through one nor wait
// on it (which would tell B what A's memory holds); the server refuses what the client would.
TEST_F(IsolationTest, StreamMemoryOperationsOnForeignPointersAreRefused) {
  auto memOp = [&](uint32_t kind, uint64_t address, uint64_t value, uint32_t flags) {
    return b_->call([&](wire::Request::Builder r) {
      auto m = r.initStreamMemOps();
      m.setContext(ctxB_);
      auto op = m.initOps(1)[0];
      op.setKind(kind);
      op.setAddress(address);
      op.setValue(value);
      op.setFlags(flags);
    });
  };
  auto write = memOp(CU_STREAM_MEM_OP_WRITE_VALUE_32, memA_, 0xdeadbeef, 0);
  EXPECT_EQ(write.result, CUDA_ERROR_INVALID_VALUE) << write.message;
  auto wide = memOp(CU_STREAM_MEM_OP_WRITE_VALUE_64, memA_ + 8, ~0ull, 0);
  EXPECT_EQ(wide.result, CUDA_ERROR_INVALID_VALUE) << wide.message;
  auto wait = memOp(CU_STREAM_MEM_OP_WAIT_VALUE_32, memA_, 0, CU_STREAM_WAIT_VALUE_EQ);
  EXPECT_EQ(wait.result, CUDA_ERROR_INVALID_VALUE) << wait.message;
  // What the client library refuses, the server refuses too.
  auto own = b_->alloc(ctxB_, 64);
  ASSERT_EQ(own.result, CUDA_SUCCESS);
  EXPECT_EQ(memOp(99, own.handle, 0, 0).result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memOp(CU_STREAM_MEM_OP_WRITE_VALUE_32, own.handle + 2, 0, 0).result,
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memOp(CU_STREAM_MEM_OP_WAIT_VALUE_32, own.handle, 0, CU_STREAM_WAIT_VALUE_FLUSH).result,
            CUDA_ERROR_NOT_SUPPORTED);
  // B's own memory works, and B's session is still usable.
  EXPECT_EQ(memOp(CU_STREAM_MEM_OP_WRITE_VALUE_32, own.handle, 0x1234, 0).result, CUDA_SUCCESS);
  EXPECT_EQ(b_->synchronize(ctxB_).result, CUDA_SUCCESS);
  auto back = b_->read(ctxB_, own.handle, 4);
  ASSERT_EQ(back.result, CUDA_SUCCESS);
  uint32_t word = 0;
  std::memcpy(&word, back.bulk.data(), 4);
  EXPECT_EQ(word, 0x1234u);
  expectAUntouched();
}

TEST_F(IsolationTest, KernelGivenForeignPointerFaultsInsteadOfReading) {
  auto module = b_->loadPtx(ctxB_, kCopyWordPtx);
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto fn = b_->function(ctxB_, module.handle, "copy_word");
  ASSERT_EQ(fn.result, CUDA_SUCCESS) << fn.message;
  auto own = b_->alloc(ctxB_, 64);
  ASSERT_EQ(own.result, CUDA_SUCCESS);
  ASSERT_EQ(b_->memset(ctxB_, own.handle, 0, 64).result, CUDA_SUCCESS);

  // Read A's word into B's buffer.
  auto launch = b_->launch(ctxB_, fn.handle, twoPointers(memA_, own.handle));
  auto sync = b_->synchronize(ctxB_);
  CUresult seen = launch.result != CUDA_SUCCESS ? launch.result : sync.result;
  EXPECT_EQ(seen, CUDA_ERROR_ILLEGAL_ADDRESS) << launch.message << " / " << sync.message;
  // The fault may leave B's context sticky-failed; if B can still read its buffer, A's bytes
  // must not be in it.
  auto check = b_->read(ctxB_, own.handle, 4);
  if (check.result == CUDA_SUCCESS) {
    ASSERT_EQ(check.bulk.size(), 4u);
    EXPECT_NE(std::memcmp(check.bulk.data(), secret_.data(), 4), 0) << "kernel read A's data";
  }
  expectAUntouched();
}

TEST_F(IsolationTest, KernelCannotWriteForeignPointer) {
  auto module = b_->loadPtx(ctxB_, kCopyWordPtx);
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto fn = b_->function(ctxB_, module.handle, "copy_word");
  ASSERT_EQ(fn.result, CUDA_SUCCESS) << fn.message;
  auto own = b_->alloc(ctxB_, 64);
  ASSERT_EQ(b_->write(ctxB_, own.handle, pattern(64, 0x11)).result, CUDA_SUCCESS);
  auto launch = b_->launch(ctxB_, fn.handle, twoPointers(own.handle, memA_));
  auto sync = b_->synchronize(ctxB_);
  CUresult seen = launch.result != CUDA_SUCCESS ? launch.result : sync.result;
  EXPECT_EQ(seen, CUDA_ERROR_ILLEGAL_ADDRESS) << launch.message << " / " << sync.message;
  expectAUntouched();
}

// Executable graphs belong to the session that uploaded them, and every index and range in one is
// checked: on arrival (dependencies, element sizes) and when it runs (memory).
TEST_F(IsolationTest, GraphsAreCheckedAndStayWithTheirSession) {
  auto create = [](WireClient& c, uint64_t context,
                   const std::function<void(wire::Request::GraphNode::Builder)>& fill) {
    return c.call([&](wire::Request::Builder r) {
      auto g = r.initGraphCreate();
      g.setContext(context);
      fill(g.initNodes(1)[0]);
    });
  };
  auto launch = [](WireClient& c, uint64_t context, uint64_t graph) {
    return c.call([&](wire::Request::Builder r) {
      auto l = r.initGraphLaunch();
      l.setContext(context);
      l.setGraph(graph);
    });
  };
  auto memsetOf = [](uint64_t address, unsigned elementSize) {
    return [=](wire::Request::GraphNode::Builder n) {
      auto m = n.initMemset();
      m.setDst(address);
      m.setValue(0xff);
      m.setElementSize(elementSize);
      m.setWidth(64);
      m.setHeight(1);
      m.setPitch(64);
    };
  };
  auto own = a_->alloc(ctxA_, 256);
  ASSERT_EQ(own.result, CUDA_SUCCESS);
  auto graphA = create(*a_, ctxA_, memsetOf(own.handle, 1));
  ASSERT_EQ(graphA.result, CUDA_SUCCESS) << graphA.message;

  // B cannot launch or destroy A's graph, nor run a graph over A's memory.
  EXPECT_EQ(launch(*b_, ctxB_, graphA.handle).result, CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(b_->call([&](wire::Request::Builder r) {
                auto d = r.initGraphDestroy();
                d.setContext(ctxB_);
                d.setGraph(graphA.handle);
              }).result,
            CUDA_ERROR_INVALID_HANDLE);
  auto foreign = create(*b_, ctxB_, memsetOf(memA_, 1));
  ASSERT_EQ(foreign.result, CUDA_SUCCESS) << foreign.message;
  auto ran = launch(*b_, ctxB_, foreign.handle);
  EXPECT_EQ(ran.result, CUDA_ERROR_INVALID_VALUE) << ran.message;
  // Malformed graphs are refused on arrival.
  auto forward = create(*b_, ctxB_, [](wire::Request::GraphNode::Builder n) {
    n.initDependencies(1).set(0, 0);  // a node depending on itself
    n.setEmpty();
  });
  EXPECT_EQ(forward.result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(create(*b_, ctxB_, memsetOf(memA_, 3)).result, CUDA_ERROR_INVALID_VALUE);
  expectAUntouched();

  // A's graph works for A until A destroys it.
  EXPECT_EQ(launch(*a_, ctxA_, graphA.handle).result, CUDA_SUCCESS);
  auto set = a_->read(ctxA_, own.handle, 64);
  ASSERT_EQ(set.result, CUDA_SUCCESS);
  EXPECT_EQ(set.bulk, std::vector<uint8_t>(64, 0xff));
  EXPECT_EQ(a_->call([&](wire::Request::Builder r) {
                auto d = r.initGraphDestroy();
                d.setContext(ctxA_);
                d.setGraph(graphA.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_EQ(launch(*a_, ctxA_, graphA.handle).result, CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(IsolationTest, ConditionalHandlesStayWithTheirContextAndBadNodesAreRefused) {
  auto handleIn = [](WireClient& c, uint64_t context) {
    return c.call([&](wire::Request::Builder r) {
      auto h = r.initGraphConditionalHandle();
      h.setContext(context);
      h.setDefaultValue(1);
      h.setAssignDefault(true);
    });
  };
  // A graph of one conditional node of `type` with `bodies` bodies of one memset each, nested
  // `depth` times, over `handle`.
  auto create = [&](WireClient& c, uint64_t context, uint64_t handle, uint32_t type,
                    unsigned bodies, unsigned depth, uint64_t address) {
    return c.call([&](wire::Request::Builder r) {
      auto g = r.initGraphCreate();
      g.setContext(context);
      auto node = g.initNodes(1)[0];
      for (unsigned level = 0;; ++level) {
        auto cond = node.initConditional();
        cond.setHandle(handle);
        cond.setType(type);
        auto list = cond.initBodies(bodies);
        for (unsigned b = 1; b < bodies; ++b) list[b].initNodes(0);
        auto inner = list[0].initNodes(1)[0];
        if (level + 1 == depth) {
          auto m = inner.initMemset();
          m.setDst(address);
          m.setValue(0xab);
          m.setElementSize(1);
          m.setWidth(64);
          m.setHeight(1);
          m.setPitch(64);
          break;
        }
        node = inner;
      }
    });
  };
  auto launch = [](WireClient& c, uint64_t context, uint64_t graph) {
    return c.call([&](wire::Request::Builder r) {
      auto l = r.initGraphLaunch();
      l.setContext(context);
      l.setGraph(graph);
    });
  };
  auto own = a_->alloc(ctxA_, 256);
  ASSERT_EQ(own.result, CUDA_SUCCESS);
  auto handleA = handleIn(*a_, ctxA_);
  ASSERT_EQ(handleA.result, CUDA_SUCCESS) << handleA.message;

  // A's if node runs its body (the default, 1, applies at launch).
  auto graphA = create(*a_, ctxA_, handleA.handle, CU_GRAPH_COND_TYPE_IF, 1, 2, own.handle);
  ASSERT_EQ(graphA.result, CUDA_SUCCESS) << graphA.message;
  EXPECT_EQ(launch(*a_, ctxA_, graphA.handle).result, CUDA_SUCCESS);
  ASSERT_EQ(a_->synchronize(ctxA_).result, CUDA_SUCCESS);
  auto set = a_->read(ctxA_, own.handle, 64);
  ASSERT_EQ(set.result, CUDA_SUCCESS);
  EXPECT_EQ(set.bulk, std::vector<uint8_t>(64, 0xab));

  // B cannot use A's handle, and malformed conditional nodes are refused on arrival.
  auto ownB = b_->alloc(ctxB_, 256);
  ASSERT_EQ(ownB.result, CUDA_SUCCESS);
  auto foreign = create(*b_, ctxB_, handleA.handle, CU_GRAPH_COND_TYPE_IF, 1, 1, ownB.handle);
  EXPECT_EQ(foreign.result, CUDA_ERROR_INVALID_VALUE) << foreign.message;
  auto handleB = handleIn(*b_, ctxB_);
  ASSERT_EQ(handleB.result, CUDA_SUCCESS) << handleB.message;
  EXPECT_EQ(create(*b_, ctxB_, handleB.handle, CU_GRAPH_COND_TYPE_WHILE, 2, 1, ownB.handle).result,
            CUDA_ERROR_INVALID_VALUE);  // a while node has one body
  EXPECT_EQ(create(*b_, ctxB_, handleB.handle, CU_GRAPH_COND_TYPE_IF, 3, 1, ownB.handle).result,
            CUDA_ERROR_INVALID_VALUE);  // an if node one or two
  EXPECT_EQ(create(*b_, ctxB_, handleB.handle, 7, 1, 1, ownB.handle).result,
            CUDA_ERROR_INVALID_VALUE);  // no such kind
  auto deep = create(*b_, ctxB_, handleB.handle, CU_GRAPH_COND_TYPE_IF, 1, 40, ownB.handle);
  EXPECT_EQ(deep.result, CUDA_ERROR_INVALID_VALUE) << deep.message;
  EXPECT_NE(deep.message.find("nested"), std::string::npos) << deep.message;
  // A body over A's memory is refused when it would run.
  auto overA = create(*b_, ctxB_, handleB.handle, CU_GRAPH_COND_TYPE_IF, 1, 1, memA_);
  ASSERT_EQ(overA.result, CUDA_SUCCESS) << overA.message;
  EXPECT_EQ(launch(*b_, ctxB_, overA.handle).result, CUDA_ERROR_INVALID_VALUE);
  expectAUntouched();
}

// A while node whose condition nothing clears loops for ever, as on a GPU; it holds its own
// stream only, and ends with its session.
TEST_F(IsolationTest, EndlessWhileNodeHoldsOnlyItsSessionAndEndsWithIt) {
  auto handle = b_->call([&](wire::Request::Builder r) {
    auto h = r.initGraphConditionalHandle();
    h.setContext(ctxB_);
    h.setDefaultValue(1);
  });
  ASSERT_EQ(handle.result, CUDA_SUCCESS) << handle.message;
  auto graph = b_->call([&](wire::Request::Builder r) {
    auto g = r.initGraphCreate();
    g.setContext(ctxB_);
    auto cond = g.initNodes(1)[0].initConditional();
    cond.setHandle(handle.handle);
    cond.setType(CU_GRAPH_COND_TYPE_WHILE);
    cond.initBodies(1)[0].initNodes(1)[0].setEmpty();
  });
  ASSERT_EQ(graph.result, CUDA_SUCCESS) << graph.message;
  auto launched = b_->call([&](wire::Request::Builder r) {
    auto l = r.initGraphLaunch();
    l.setContext(ctxB_);
    l.setGraph(graph.handle);
  });
  ASSERT_EQ(launched.result, CUDA_SUCCESS) << launched.message;
  // A works meanwhile.
  ASSERT_EQ(a_->write(ctxA_, memA_, secret_).result, CUDA_SUCCESS);
  ASSERT_EQ(a_->synchronize(ctxA_).result, CUDA_SUCCESS);
  expectAUntouched();
  // B goes; its context, loop and all, goes with it, and the server serves a new session.
  b_.reset();
  WireClient c(server_->endpoint());
  auto ctxC = c.createContext();
  ASSERT_EQ(ctxC.result, CUDA_SUCCESS) << ctxC.message;
  EXPECT_EQ(c.synchronize(ctxC.handle).result, CUDA_SUCCESS);
  // The loop is gone: the server stops at once (SIGTERM), without the kill that follows 10 s.
  e2e::ProgramResult stopped = server_->stop();
  EXPECT_TRUE(stopped.exited && stopped.exitCode == 0) << server_->log();
}

TEST_F(IsolationTest, ForeignModuleFunctionStreamEventAndContextIdsAreRefused) {
  auto module = a_->loadPtx(ctxA_, kCopyWordPtx);
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto fn = a_->function(ctxA_, module.handle, "copy_word");
  ASSERT_EQ(fn.result, CUDA_SUCCESS);
  auto stream = a_->call([&](wire::Request::Builder r) { r.initStreamCreate().setContext(ctxA_); });
  ASSERT_EQ(stream.result, CUDA_SUCCESS);
  auto event = a_->call([&](wire::Request::Builder r) { r.initEventCreate().setContext(ctxA_); });
  ASSERT_EQ(event.result, CUDA_SUCCESS);

  // B uses A's ids in B's context. Ids are minted per context, so B's context must hold none of
  // them: B has created no module, stream or event.
  EXPECT_NE(b_->function(ctxB_, module.handle, "copy_word").result, CUDA_SUCCESS);
  EXPECT_NE(b_->launch(ctxB_, fn.handle, twoPointers(memA_, memA_)).result, CUDA_SUCCESS);
  EXPECT_NE(b_->call([&](wire::Request::Builder r) {
                auto m = r.initModuleUnload();
                m.setContext(ctxB_);
                m.setModule(module.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_NE(b_->call([&](wire::Request::Builder r) {
                auto s = r.initStreamSynchronize();
                s.setContext(ctxB_);
                s.setStream(stream.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_NE(b_->call([&](wire::Request::Builder r) {
                auto s = r.initStreamDestroy();
                s.setContext(ctxB_);
                s.setStream(stream.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_NE(b_->call([&](wire::Request::Builder r) {
                auto e = r.initEventRecord();
                e.setContext(ctxB_);
                e.setEvent(event.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_NE(b_->call([&](wire::Request::Builder r) {
                auto e = r.initEventDestroy();
                e.setContext(ctxB_);
                e.setEvent(event.handle);
              }).result,
            CUDA_SUCCESS);
  // Context ids are per session: B naming an id it never created is refused, and destroying
  // "A's" id from B cannot touch A's context.
  uint64_t unknownContext = ctxA_ + ctxB_ + 100;
  EXPECT_EQ(b_->alloc(unknownContext, 64).result, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(b_->call([&](wire::Request::Builder r) { r.setCtxDestroy(unknownContext); }).result,
            CUDA_ERROR_INVALID_CONTEXT);

  // Everything of A's still works for A.
  EXPECT_EQ(a_->call([&](wire::Request::Builder r) {
                auto e = r.initEventRecord();
                e.setContext(ctxA_);
                e.setEvent(event.handle);
                e.setStream(stream.handle);
              }).result,
            CUDA_SUCCESS);
  EXPECT_EQ(a_->function(ctxA_, module.handle, "copy_word").result, CUDA_SUCCESS);
  expectAUntouched();
}

// Virtual memory management: A's physical allocation, reservation and mapping are A's. B can
// neither reach the mapped bytes (copies, memsets, a kernel) nor map, unmap, change access to,
// retain, release or free any of them; A's data stays A's.
// CUDA arrays are named by handles of the session's context: B can neither copy into or out of
// A's array, nor take a level of it, nor destroy it; a region outside A's own array is refused.
TEST_F(IsolationTest, ArraysStayWithTheirSession) {
  auto create = a_->call([&](wire::Request::Builder r) {
    auto m = r.initArrayOp();
    m.setContext(ctxA_);
    m.setOp(wire::Request::ArrayOpKind::CREATE);
    m.setWidth(16);
    m.setHeight(4);
    m.setFormat(CU_AD_FORMAT_UNSIGNED_INT8);
    m.setChannels(4);
  });
  ASSERT_EQ(create.result, CUDA_SUCCESS) << create.message;
  uint64_t arrayA = create.handle;
  // Host -> array, packed rows of 64 bytes.
  auto copy = [](WireClient& c, uint64_t ctx, uint8_t srcKind, uint64_t src, uint8_t dstKind,
                 uint64_t dst, uint64_t y, std::span<const uint8_t> bulk) {
    return c.call(
        [&](wire::Request::Builder r) {
          auto m = r.initMemcpy3D();
          m.setContext(ctx);
          m.getSrc().setKind(srcKind);
          m.getSrc().setHandle(src);
          m.getDst().setKind(dstKind);
          m.getDst().setHandle(dst);
          m.getDst().setY(y);
          m.setWidthBytes(64);
          m.setHeight(2);
          m.setDepth(1);
        },
        bulk);
  };
  std::vector<uint8_t> rows = pattern(128, 7);
  ASSERT_EQ(copy(*a_, ctxA_, 0, 0, 2, arrayA, 1, rows).result, CUDA_SUCCESS);
  EXPECT_EQ(copy(*a_, ctxA_, 0, 0, 2, arrayA, 3, rows).result, CUDA_ERROR_INVALID_VALUE);
  auto readA = copy(*a_, ctxA_, 2, arrayA, 0, 0, 0, {});
  ASSERT_EQ(readA.result, CUDA_SUCCESS) << readA.message;
  EXPECT_TRUE(std::equal(rows.begin(), rows.begin() + 64, readA.bulk.begin() + 64));

  auto readB = copy(*b_, ctxB_, 2, arrayA, 0, 0, 0, {});
  EXPECT_NE(readB.result, CUDA_SUCCESS);
  EXPECT_TRUE(readB.bulk.empty()) << "B received bytes of A's array";
  EXPECT_NE(copy(*b_, ctxB_, 0, 0, 2, arrayA, 0, pattern(128, 9)).result, CUDA_SUCCESS);
  auto arrayOp = [](WireClient& c, uint64_t ctx, wire::Request::ArrayOpKind op, uint64_t array) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initArrayOp();
      m.setContext(ctx);
      m.setOp(op);
      m.setArray(array);
    });
  };
  EXPECT_NE(arrayOp(*b_, ctxB_, wire::Request::ArrayOpKind::LEVEL, arrayA).result, CUDA_SUCCESS);
  EXPECT_NE(arrayOp(*b_, ctxB_, wire::Request::ArrayOpKind::DESTROY, arrayA).result, CUDA_SUCCESS);
  auto again = copy(*a_, ctxA_, 2, arrayA, 0, 0, 0, {});
  ASSERT_EQ(again.result, CUDA_SUCCESS);
  EXPECT_EQ(again.bulk, readA.bulk);
  EXPECT_EQ(arrayOp(*a_, ctxA_, wire::Request::ArrayOpKind::DESTROY, arrayA).result, CUDA_SUCCESS);
  expectAUntouched();
}

TEST_F(IsolationTest, TexturesStayWithTheirSession) {
  auto createArray = a_->call([&](wire::Request::Builder r) {
    auto m = r.initArrayOp();
    m.setContext(ctxA_);
    m.setOp(wire::Request::ArrayOpKind::CREATE);
    m.setWidth(16);
    m.setFormat(CU_AD_FORMAT_FLOAT);
    m.setChannels(1);
    m.setFlags(CUDA_ARRAY3D_SURFACE_LDST);
  });
  ASSERT_EQ(createArray.result, CUDA_SUCCESS) << createArray.message;
  // A texture on an array or on linear memory, created in `ctx`.
  auto create = [](WireClient& c, uint64_t ctx, unsigned resourceType, uint64_t handle,
                   bool surface) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initTextureOp();
      m.setContext(ctx);
      m.setOp(wire::Request::TextureOpKind::CREATE);
      m.setSurface(surface);
      m.setResourceType(resourceType);
      m.setHandle(handle);
      m.setFormat(CU_AD_FORMAT_FLOAT);
      m.setChannels(1);
      m.setSizeBytes(4096);
    });
  };
  auto texA = create(*a_, ctxA_, CU_RESOURCE_TYPE_ARRAY, createArray.handle, false);
  ASSERT_EQ(texA.result, CUDA_SUCCESS) << texA.message;
  auto linearA = create(*a_, ctxA_, CU_RESOURCE_TYPE_LINEAR, memA_, false);
  ASSERT_EQ(linearA.result, CUDA_SUCCESS) << linearA.message;
  // B can name neither A's array nor A's memory, nor destroy A's objects.
  EXPECT_NE(create(*b_, ctxB_, CU_RESOURCE_TYPE_ARRAY, createArray.handle, false).result,
            CUDA_SUCCESS);
  EXPECT_NE(create(*b_, ctxB_, CU_RESOURCE_TYPE_ARRAY, createArray.handle, true).result,
            CUDA_SUCCESS);
  EXPECT_NE(create(*b_, ctxB_, CU_RESOURCE_TYPE_LINEAR, memA_, false).result, CUDA_SUCCESS);
  auto destroy = [](WireClient& c, uint64_t ctx, uint64_t handle) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initTextureOp();
      m.setContext(ctx);
      m.setOp(wire::Request::TextureOpKind::DESTROY);
      m.setHandle(handle);
    });
  };
  EXPECT_NE(destroy(*b_, ctxB_, texA.handle).result, CUDA_SUCCESS);
  EXPECT_NE(destroy(*b_, ctxB_, linearA.handle).result, CUDA_SUCCESS);
  EXPECT_EQ(destroy(*a_, ctxA_, texA.handle).result, CUDA_SUCCESS);
  EXPECT_EQ(destroy(*a_, ctxA_, linearA.handle).result, CUDA_SUCCESS);
  expectAUntouched();
}

TEST_F(IsolationTest, MappedVirtualMemoryStaysWithItsSession) {
  constexpr uint64_t kChunk = 2ull << 20;
  auto vmmHandle = [](WireClient& c, uint64_t ctx, wire::Request::VmmHandleOp op, uint64_t bytes,
                      uint64_t address, uint64_t handle) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initVmmHandle();
      m.setContext(ctx);
      m.setOp(op);
      m.setBytes(bytes);
      m.setAddress(address);
      m.setHandle(handle);
    });
  };
  auto vmmAddress = [](WireClient& c, uint64_t ctx, bool free, uint64_t address, uint64_t bytes) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initVmmAddress();
      m.setContext(ctx);
      m.setFree(free);
      m.setAddress(address);
      m.setBytes(bytes);
    });
  };
  auto vmmMap = [](WireClient& c, uint64_t ctx, wire::Request::VmmMapOp op, uint64_t address,
                   uint64_t bytes, uint64_t handle, bool readWrite) {
    return c.call([&](wire::Request::Builder r) {
      auto m = r.initVmmMap();
      m.setContext(ctx);
      m.setOp(op);
      m.setAddress(address);
      m.setBytes(bytes);
      m.setHandle(handle);
      m.setReadWrite(readWrite);
    });
  };
  using HandleOp = wire::Request::VmmHandleOp;
  using MapOp = wire::Request::VmmMapOp;

  // A: two chunks reserved, the first mapped and written.
  auto physA = vmmHandle(*a_, ctxA_, HandleOp::CREATE, kChunk, 0, 0);
  ASSERT_EQ(physA.result, CUDA_SUCCESS) << physA.message;
  auto rangeA = vmmAddress(*a_, ctxA_, false, 0, 2 * kChunk);
  ASSERT_EQ(rangeA.result, CUDA_SUCCESS) << rangeA.message;
  uint64_t mappedA = rangeA.handle;
  ASSERT_EQ(vmmMap(*a_, ctxA_, MapOp::MAP, mappedA, kChunk, physA.handle, false).result,
            CUDA_SUCCESS);
  ASSERT_EQ(vmmMap(*a_, ctxA_, MapOp::SET_ACCESS, mappedA, kChunk, 0, true).result, CUDA_SUCCESS);
  std::vector<uint8_t> secret = pattern(4096, 0x33);
  ASSERT_EQ(a_->write(ctxA_, mappedA, secret).result, CUDA_SUCCESS);

  // B's copies and memsets of A's mapping are refused.
  auto read = b_->read(ctxB_, mappedA, 64);
  EXPECT_NE(read.result, CUDA_SUCCESS);
  EXPECT_TRUE(read.bulk.empty()) << "B received bytes of A's mapping";
  EXPECT_NE(b_->write(ctxB_, mappedA, pattern(64, 1)).result, CUDA_SUCCESS);
  EXPECT_NE(b_->memset(ctxB_, mappedA, 0xff, 64).result, CUDA_SUCCESS);
  EXPECT_NE(b_->free(ctxB_, mappedA).result, CUDA_SUCCESS);

  // B's own allocation cannot go into A's reservation, nor A's allocation into B's.
  auto physB = vmmHandle(*b_, ctxB_, HandleOp::CREATE, kChunk, 0, 0);
  ASSERT_EQ(physB.result, CUDA_SUCCESS) << physB.message;
  auto rangeB = vmmAddress(*b_, ctxB_, false, 0, kChunk);
  ASSERT_EQ(rangeB.result, CUDA_SUCCESS) << rangeB.message;
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::MAP, mappedA + kChunk, kChunk, physB.handle, false).result,
            CUDA_SUCCESS);
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::MAP, rangeB.handle, kChunk, physA.handle, false).result,
            CUDA_SUCCESS);
  // Nor can B change, query, unmap, retain, release or free what is A's.
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::SET_ACCESS, mappedA, kChunk, 0, true).result, CUDA_SUCCESS);
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::SET_ACCESS, mappedA, kChunk, 0, false).result, CUDA_SUCCESS);
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::GET_ACCESS, mappedA, 0, 0, false).result, CUDA_SUCCESS);
  EXPECT_NE(vmmMap(*b_, ctxB_, MapOp::UNMAP, mappedA, kChunk, 0, false).result, CUDA_SUCCESS);
  EXPECT_NE(vmmHandle(*b_, ctxB_, HandleOp::RETAIN, 0, mappedA, 0).result, CUDA_SUCCESS);
  EXPECT_NE(vmmHandle(*b_, ctxB_, HandleOp::RELEASE, 0, 0, physA.handle).result, CUDA_SUCCESS);
  EXPECT_NE(vmmAddress(*b_, ctxB_, true, mappedA, 2 * kChunk).result, CUDA_SUCCESS);

  // A kernel of B's given A's mapped address faults instead of reading it.
  auto module = b_->loadPtx(ctxB_, kCopyWordPtx);
  ASSERT_EQ(module.result, CUDA_SUCCESS) << module.message;
  auto fn = b_->function(ctxB_, module.handle, "copy_word");
  ASSERT_EQ(fn.result, CUDA_SUCCESS) << fn.message;
  auto own = b_->alloc(ctxB_, 64);
  ASSERT_EQ(own.result, CUDA_SUCCESS);
  ASSERT_EQ(b_->memset(ctxB_, own.handle, 0, 64).result, CUDA_SUCCESS);
  auto launch = b_->launch(ctxB_, fn.handle, twoPointers(mappedA, own.handle));
  auto sync = b_->synchronize(ctxB_);
  CUresult seen = launch.result != CUDA_SUCCESS ? launch.result : sync.result;
  EXPECT_EQ(seen, CUDA_ERROR_ILLEGAL_ADDRESS) << launch.message << " / " << sync.message;

  // A's mapping still holds A's bytes, and is still A's to take down.
  auto back = a_->read(ctxA_, mappedA, secret.size());
  ASSERT_EQ(back.result, CUDA_SUCCESS) << back.message;
  EXPECT_EQ(back.bulk, secret);
  EXPECT_EQ(vmmMap(*a_, ctxA_, MapOp::UNMAP, mappedA, kChunk, 0, false).result, CUDA_SUCCESS);
  EXPECT_EQ(vmmHandle(*a_, ctxA_, HandleOp::RELEASE, 0, 0, physA.handle).result, CUDA_SUCCESS);
  EXPECT_EQ(vmmAddress(*a_, ctxA_, true, mappedA, 2 * kChunk).result, CUDA_SUCCESS);
  expectAUntouched();
}

}  // namespace
}  // namespace gpupool::hardening
