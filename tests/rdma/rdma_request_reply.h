// One request from the client and the server's reply with bulk, for the RDMA transport tests.
#pragma once

#include <gtest/gtest.h>

#include <span>
#include <thread>

#include "tests/rdma/rdma_test_data.h"
#include "transport/connection.h"

namespace gpupool::transport::testing {

// The client's request (after an optional offer) and the server's reply carrying `bulk`.
inline void requestReply(Connection& client, Connection& server, void* offer, size_t offerSize,
                         std::span<const ConstBuffer> bulk, std::byte* dst, size_t readSize) {
  if (offer) client.expectBulkInto(offer, offerSize);
  auto request = messageOf(3, readSize);
  ConstBuffer r{request.data(), request.size() * 8};
  client.sendFrame(std::span(&r, 1), {});
  expectMessage(server.receiveFrame(), request);
  auto reply = messageOf(2, readSize + 1);
  ConstBuffer m{reply.data(), reply.size() * 8};
  std::thread sender([&] { server.sendFrame(std::span(&m, 1), bulk); });
  auto frame = client.receiveFrame();
  expectMessage(frame, reply);
  ASSERT_EQ(frame.bulkBytes, readSize);
  client.receiveBulk(dst, readSize);
  sender.join();
}

}  // namespace gpupool::transport::testing
