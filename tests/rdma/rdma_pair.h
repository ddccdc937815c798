// A connected RDMA client/server pair in one process, for transport tests.
#pragma once

#include <future>
#include <memory>
#include <stdexcept>

#include "tests/rdma/rdma_test_env.h"
#include "transport/rdma/rdma_transport.h"

namespace gpupool::transport::testing {

inline Endpoint endpointOf(const std::string& url) {
  std::string error;
  auto endpoint = parseEndpoint(url, &error);
  if (!endpoint) throw std::runtime_error(error);
  return *endpoint;
}

struct RdmaPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

// rdmaConnect returns only once the server side accepted, so it runs on another thread.
inline RdmaPair connectedRdmaPair(unsigned receiveTimeoutMs = 60000) {
  RdmaPair pair;
  pair.listener = rdmaListen(Endpoint{"rdma", rdmaTestAddress(), 0});
  Endpoint target = endpointOf(pair.listener->url());
  auto client = std::async(std::launch::async, [target] { return rdmaConnect(target, 10000); });
  pair.server = pair.listener->accept();
  pair.client = client.get();
  // A broken test must fail, not hang the suite.
  pair.server->setReceiveTimeoutMs(receiveTimeoutMs);
  pair.client->setReceiveTimeoutMs(receiveTimeoutMs);
  return pair;
}

}  // namespace gpupool::transport::testing
