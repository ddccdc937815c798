// The raw-wire baseline of `gpupool bench`: the same connection type to the same server, with
// requests answered without any CUDA processing. tcp:// and tls:// endpoints are reached over TCP,
// rdma:// ones over RDMA (no fallback: a benchmark must measure what it says), shm:// ones through
// the shared-memory rings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::tools {

class RawWire {
 public:
  // Connects and says Hello (purpose bench unless told otherwise; with $GPU_POOL_TOKEN when set).
  // Throws std::runtime_error with the reason.
  explicit RawWire(const transport::Endpoint& endpoint,
                   wire::Hello::Purpose purpose = wire::Hello::Purpose::BENCH);

  void pingPong();                            // a message each way, no bulk
  void toServer(const void* data, size_t n);  // n bulk bytes up, a message back (sink)
  void fromServer(void* data, size_t n);      // a message up, n bulk bytes back (source)

  // The server's answer to one status request: the transport of the session whose client name
  // ends with `clientNameSuffix` (empty when there is none).
  std::string sessionTransport(const std::string& clientNameSuffix);

  const std::string& backend() const { return backend_; }
  // The RDMA endpoint the server's Welcome advertised (empty when it listens on TCP only).
  const std::string& rdmaEndpoint() const { return rdmaEndpoint_; }
  std::string transport() const { return connection_->kind(); }

 private:
  std::unique_ptr<transport::Connection> connection_;
  std::string backend_;
  std::string rdmaEndpoint_;
};

}  // namespace gpupool::tools
