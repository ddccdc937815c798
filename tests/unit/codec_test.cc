// Cap'n Proto messages over a real loopback connection: fields and bulk round-trip, multi-segment
// messages survive, and hostile bytes inside a well-formed frame raise kj::Exception, not a crash.
#include <arpa/inet.h>
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "loopback_pair.h"
#include "protocol/message_codec.h"
#include "protocol/outgoing_message.h"
#include "transport/tcp_transport.h"

namespace gpupool::protocol {
namespace {

using transport::connectedPair;
using transport::ConstBuffer;
using transport::Endpoint;

// Writes one frame whose message bytes are exactly `words`: a valid frame around any content.
void sendRawFrame(transport::Connection& connection, const std::vector<uint64_t>& words) {
  ConstBuffer parts[] = {{words.data(), words.size() * sizeof(uint64_t)}};
  connection.sendFrame(parts, {});
}

// Reads a message as far as a server would: the root and its union tag.
void readRequestFully(transport::Connection& connection) {
  IncomingMessage in(connection);
  auto request = in.root<wire::Request>();
  if (request.which() == wire::Request::HELLO) (void)request.getHello().getClientName();
}

TEST(CodecTest, RequestFieldsAndBulkRoundTrip) {
  auto pair = connectedPair("tcp");
  capnp::MallocMessageBuilder builder;
  auto copy = builder.initRoot<wire::Request>().initMemcpyHtoD();
  copy.setContext(7);
  copy.setDst(0x7f0000001000ull);
  copy.setBytes(3000);
  copy.setStream(0xdeadbeefcafeull);
  copy.setAsync(true);
  std::vector<uint8_t> bulk(3000);
  for (size_t i = 0; i < bulk.size(); ++i) bulk[i] = static_cast<uint8_t>(i * 7);
  ConstBuffer bulkParts[] = {{bulk.data(), bulk.size()}};
  sendMessage(*pair.client, builder, bulkParts);

  IncomingMessage in(*pair.server);
  ASSERT_EQ(in.bulkBytes(), bulk.size());
  auto request = in.root<wire::Request>();
  ASSERT_EQ(request.which(), wire::Request::MEMCPY_HTO_D);
  auto received = request.getMemcpyHtoD();
  EXPECT_EQ(received.getContext(), 7u);
  EXPECT_EQ(received.getDst(), 0x7f0000001000ull);
  EXPECT_EQ(received.getBytes(), 3000u);
  EXPECT_EQ(received.getStream(), 0xdeadbeefcafeull);
  EXPECT_TRUE(received.getAsync());
  std::vector<uint8_t> receivedBulk(bulk.size());
  pair.server->receiveBulk(receivedBulk.data(), receivedBulk.size());
  EXPECT_EQ(receivedBulk, bulk);
}

TEST(CodecTest, TextListsAndEnumsRoundTrip) {
  auto pair = connectedPair("tcp");
  capnp::MallocMessageBuilder builder;
  auto response = builder.initRoot<wire::Response>();
  response.setResult(0);
  response.setMessage("all good");
  auto welcome = response.initWelcome();
  welcome.setProtocolVersion(wire::PROTOCOL_VERSION);
  welcome.setServerVersion("9.8.7");
  welcome.setDeviceAddressBase(0x7f0000000000ull);
  auto devices = welcome.initDevices(2);
  devices[0].setName("emu device 0");
  devices[1].setName("emu device 1");
  auto attributes = devices[1].initAttributes(3);
  attributes.set(0, 11);
  attributes.set(1, -2);
  attributes.set(2, 1 << 30);
  sendMessage(*pair.client, builder);

  IncomingMessage in(*pair.server);
  EXPECT_EQ(in.bulkBytes(), 0u);
  auto received = in.root<wire::Response>();
  EXPECT_EQ(received.getMessage(), "all good");
  ASSERT_EQ(received.which(), wire::Response::WELCOME);
  auto w = received.getWelcome();
  EXPECT_EQ(w.getProtocolVersion(), wire::PROTOCOL_VERSION);
  EXPECT_EQ(w.getServerVersion(), "9.8.7");
  EXPECT_EQ(w.getDeviceAddressBase(), 0x7f0000000000ull);
  ASSERT_EQ(w.getDevices().size(), 2u);
  EXPECT_EQ(w.getDevices()[1].getName(), "emu device 1");
  auto a = w.getDevices()[1].getAttributes();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], 11);
  EXPECT_EQ(a[1], -2);
  EXPECT_EQ(a[2], 1 << 30);

  capnp::MallocMessageBuilder helloBuilder;
  auto hello = helloBuilder.initRoot<wire::Request>().initHello();
  hello.setPurpose(wire::Hello::Purpose::STATUS);
  hello.setClientName("codec_test[1234]");
  sendMessage(*pair.client, helloBuilder);
  IncomingMessage helloIn(*pair.server);
  auto helloReceived = helloIn.root<wire::Request>();
  ASSERT_EQ(helloReceived.which(), wire::Request::HELLO);
  EXPECT_EQ(helloReceived.getHello().getPurpose(), wire::Hello::Purpose::STATUS);
  EXPECT_EQ(helloReceived.getHello().getClientName(), "codec_test[1234]");
}

TEST(CodecTest, QueuedMessagesArriveBeforeTheNextSentOne) {
  auto pair = connectedPair("tcp");
  for (uint64_t i = 1; i <= 3; ++i) {
    capnp::MallocMessageBuilder builder;
    auto memFree = builder.initRoot<wire::Request>().initMemFree();
    memFree.setContext(i);
    memFree.setAddress(0x1000 * i);
    queueMessage(*pair.client, builder);
  }
  capnp::MallocMessageBuilder last;
  last.initRoot<wire::Request>().setCtxSynchronize(4);
  sendMessage(*pair.client, last);
  for (uint64_t i = 1; i <= 3; ++i) {
    IncomingMessage in(*pair.server);
    auto request = in.root<wire::Request>();
    ASSERT_EQ(request.which(), wire::Request::MEM_FREE);
    EXPECT_EQ(request.getMemFree().getContext(), i);
    EXPECT_EQ(request.getMemFree().getAddress(), 0x1000 * i);
  }
  IncomingMessage in(*pair.server);
  EXPECT_EQ(in.root<wire::Request>().getCtxSynchronize(), 4u);
}

TEST(CodecTest, MultiSegmentMessageRoundTrips) {
  auto pair = connectedPair("tcp");
  // A tiny fixed first segment forces the large Data field into segments of its own.
  capnp::MallocMessageBuilder builder(16, capnp::AllocationStrategy::FIXED_SIZE);
  auto launch = builder.initRoot<wire::Request>().initLaunchKernel();
  launch.setFunction(99);
  launch.initGrid().setX(1024);
  std::vector<uint8_t> params(1 << 20);
  for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<uint8_t>(i * 13 + (i >> 9));
  launch.setParams(kj::arrayPtr(params.data(), params.size()));
  ASSERT_GT(builder.getSegmentsForOutput().size(), 1u) << "the test needs a multi-segment message";

  std::thread sender([&] { sendMessage(*pair.client, builder); });
  IncomingMessage in(*pair.server);
  auto request = in.root<wire::Request>();
  ASSERT_EQ(request.which(), wire::Request::LAUNCH_KERNEL);
  auto received = request.getLaunchKernel();
  EXPECT_EQ(received.getFunction(), 99u);
  EXPECT_EQ(received.getGrid().getX(), 1024u);
  auto data = received.getParams();
  ASSERT_EQ(data.size(), params.size());
  EXPECT_EQ(std::memcmp(data.begin(), params.data(), params.size()), 0);
  sender.join();
}

// OutgoingMessage builds a connection that lends no frame space (TCP, shm) in the thread's reused
// first segment: a message built after a large one must read every field it did not set as zero,
// and a message built while another still holds that segment must come out whole too.
TEST(CodecTest, OutgoingMessagesReuseTheThreadsSegmentClean) {
  auto pair = connectedPair("tcp");
  std::vector<uint8_t> params(900);  // nearly all of the 1 KiB first segment
  for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<uint8_t>(0xa5 ^ i);
  {
    OutgoingMessage large(*pair.client);
    auto launch = large.initRoot<wire::Request>().initLaunchKernel();
    launch.setFunction(1);
    launch.setParams(kj::arrayPtr(params.data(), params.size()));
    sendMessage(*pair.client, large);
  }
  {
    IncomingMessage in(*pair.server);
    EXPECT_EQ(in.root<wire::Request>().getLaunchKernel().getParams().size(), params.size());
  }
  {
    // The segment the next message gets is all zeros again (capnp builds only in zeroed memory).
    OutgoingMessage next(*pair.client);
    kj::ArrayPtr<capnp::word> segment = next.allocateSegment(1);
    ASSERT_EQ(segment.size(), OutgoingMessage::kFirstHeapSegmentWords);
    std::vector<capnp::word> zeros(segment.size());
    std::memset(zeros.data(), 0, zeros.size() * sizeof(capnp::word));
    EXPECT_EQ(std::memcmp(segment.begin(), zeros.data(), zeros.size() * sizeof(capnp::word)), 0);
  }
  for (int round = 0; round < 3; ++round) {
    OutgoingMessage held(*pair.client);  // takes the thread's segment
    auto copy = held.initRoot<wire::Request>().initMemcpyHtoD();
    copy.setBytes(42 + round);  // nothing else set: the rest must read 0, not old bytes
    {
      OutgoingMessage nested(*pair.client);  // the segment is taken: from the heap
      nested.initRoot<wire::Request>().setCtxSynchronize(7 + round);
      sendMessage(*pair.client, nested);
    }
    sendMessage(*pair.client, held);
    IncomingMessage first(*pair.server);
    EXPECT_EQ(first.root<wire::Request>().getCtxSynchronize(), uint64_t(7 + round));
    IncomingMessage second(*pair.server);
    auto received = second.root<wire::Request>().getMemcpyHtoD();
    EXPECT_EQ(received.getBytes(), uint64_t(42 + round));
    EXPECT_EQ(received.getContext(), 0u);
    EXPECT_EQ(received.getDst(), 0u);
    EXPECT_EQ(received.getStream(), 0u);
    EXPECT_FALSE(received.getAsync());
  }
}

// More segments than the framing keeps on the stack (6): the table and parts go to the heap.
TEST(CodecTest, MessageOfManySegmentsRoundTrips) {
  auto pair = connectedPair("tcp");
  capnp::MallocMessageBuilder builder(1, capnp::AllocationStrategy::FIXED_SIZE);
  auto op = builder.initRoot<wire::Request>().initTextureOp();
  op.setName("a reference name longer than one word");
  op.initAddressMode(3).set(2, 4);
  op.initBorderColor(4).set(3, 0.5f);
  op.initGlobalDims(5).set(4, 1u << 20);
  op.initGlobalStrides(4).set(3, 4096);
  op.initBoxDims(5).set(0, 64);
  op.initElementStrides(5).set(1, 2);
  ASSERT_GT(builder.getSegmentsForOutput().size(), 7u) << "the test needs over 6 segments";
  sendMessage(*pair.client, builder);
  IncomingMessage in(*pair.server);
  auto received = in.root<wire::Request>().getTextureOp();
  EXPECT_EQ(std::string(received.getName().cStr()), "a reference name longer than one word");
  EXPECT_EQ(received.getAddressMode()[2], 4u);
  EXPECT_EQ(received.getBorderColor()[3], 0.5f);
  EXPECT_EQ(received.getGlobalDims()[4], 1u << 20);
  EXPECT_EQ(received.getGlobalStrides()[3], 4096u);
  EXPECT_EQ(received.getBoxDims()[0], 64u);
  EXPECT_EQ(received.getElementStrides()[1], 2u);
}

TEST(CodecTest, SegmentTableClaimingTooManySegmentsThrows) {
  auto pair = connectedPair("tcp");
  sendRawFrame(*pair.client, {0x00000000fffffffeull, 0, 0, 0});
  EXPECT_THROW(readRequestFully(*pair.server), kj::Exception);
}

TEST(CodecTest, OutOfBoundsRootPointerThrows) {
  auto pair = connectedPair("tcp");
  // One segment of two words; the root is a struct pointer whose target lies 1000 words away.
  uint64_t rootPointer = (1000ull << 2) | (1ull << 32) | (0ull << 48);
  sendRawFrame(*pair.client, {0x0000000200000000ull, rootPointer, 0});
  EXPECT_THROW(readRequestFully(*pair.server), kj::Exception);
}

TEST(CodecTest, ListWhereStructExpectedThrows) {
  auto pair = connectedPair("tcp");
  // Root pointer of kind 1 (list) where a Request struct is expected.
  uint64_t listPointer = 1ull | (0ull << 2) | (2ull << 32) | (1ull << 35);
  sendRawFrame(*pair.client, {0x0000000300000000ull, listPointer, 0, 0});
  EXPECT_THROW(readRequestFully(*pair.server), kj::Exception);
}

TEST(CodecTest, ConnectionStaysUsableAfterAGarbageMessage) {
  auto pair = connectedPair("tcp");
  sendRawFrame(*pair.client, {0x00000000fffffffeull, 0});
  EXPECT_THROW(readRequestFully(*pair.server), kj::Exception);
  capnp::MallocMessageBuilder builder;
  builder.initRoot<wire::Request>().setCtxSynchronize(5);
  sendMessage(*pair.client, builder);
  IncomingMessage in(*pair.server);
  auto request = in.root<wire::Request>();
  ASSERT_EQ(request.which(), wire::Request::CTX_SYNCHRONIZE);
  EXPECT_EQ(request.getCtxSynchronize(), 5u);
}

TEST(CodecTest, RandomBytesNeverCrashTheReader) {
  auto pair = connectedPair("tcp");
  int rejected = 0;
  constexpr int kMessages = 300;
  std::thread sender([&] {
    std::mt19937_64 senderRandom(20240601);
    for (int i = 0; i < kMessages; ++i) {
      std::vector<uint64_t> words(1 + senderRandom() % 64);
      for (auto& w : words) w = senderRandom();
      // Half the messages get a plausible single-segment table so the pointers are exercised too.
      if (i % 2) words[0] = static_cast<uint64_t>(words.size() - 1) << 32;
      sendRawFrame(*pair.client, words);
    }
  });
  for (int i = 0; i < kMessages; ++i) {
    try {
      IncomingMessage in(*pair.server);
      auto request = in.root<wire::Request>();
      if (request.which() == wire::Request::HELLO) (void)request.getHello().getClientName();
      if (request.which() == wire::Request::LAUNCH_KERNEL) {
        (void)request.getLaunchKernel().getParams().size();
      }
    } catch (const kj::Exception&) {
      ++rejected;
    }
  }
  sender.join();
  // Random segment tables claim billions of segments, so at least those must be rejected.
  EXPECT_GE(rejected, kMessages / 2 - 10);
}

}  // namespace
}  // namespace gpupool::protocol
