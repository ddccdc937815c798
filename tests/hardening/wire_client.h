// A raw protocol client for hardening tests: speaks gpupool's wire protocol directly (no libcuda),
// so a test can send exactly the handles and addresses a hostile tenant would.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "transport/connection.h"

namespace gpupool::hardening {

// What a test needs from one Response.
struct Reply {
  CUresult result = CUDA_ERROR_UNKNOWN;
  std::string message;
  uint64_t handle = 0;  // handle, memAlloc address, function handle or global address
  uint64_t bytes = 0;   // a global's size
  std::vector<uint8_t> bulk;
  uint64_t callId = 0;  // the Request.callId it answers
};

// A TCP socket connected to 127.0.0.1:`port`, for tests that send raw bytes. Throws
// std::runtime_error when it cannot connect.
int connectToLoopback(uint16_t port);

// The parameter block of a kernel taking two pointers.
std::vector<uint8_t> twoPointers(uint64_t a, uint64_t b);

class WireClient {
 public:
  // Connects and says Hello with `purpose`. Throws std::runtime_error when the server refuses
  // (with its message) or cannot be reached.
  explicit WireClient(const std::string& endpoint,
                      wire::Hello::Purpose purpose = wire::Hello::Purpose::DRIVER,
                      const std::string& token = "");
  ~WireClient();

  // Sends one request (and bulk) and returns its reply. Throws transport::TransportError when the
  // connection breaks.
  Reply call(const std::function<void(wire::Request::Builder)>& build,
             std::span<const uint8_t> bulk = {});
  // The halves of call(), for tests with several calls in flight: send one request, and receive
  // whichever reply comes next.
  void send(const std::function<void(wire::Request::Builder)>& build,
            std::span<const uint8_t> bulk = {});
  Reply receive();
  // Queues one request (without bulk) for the next flush(), which sends every queued one in one
  // write, as the library sends posted calls.
  void queue(const std::function<void(wire::Request::Builder)>& build);
  void flush();

  // Shorthands. Each returns the reply; handles come back in Reply::handle.
  Reply createContext(int device = 0);
  Reply alloc(uint64_t context, uint64_t bytes);
  Reply write(uint64_t context, uint64_t address, std::span<const uint8_t> bytes);
  Reply read(uint64_t context, uint64_t address, uint64_t bytes);
  Reply memset(uint64_t context, uint64_t address, uint8_t value, uint64_t bytes);
  Reply free(uint64_t context, uint64_t address);
  // Loads NUL-terminated PTX text (the terminator is added here).
  Reply loadPtx(uint64_t context, const std::string& ptx);
  Reply function(uint64_t context, uint64_t module, const std::string& name);
  // One block of one thread; `params` is the packed parameter block.
  // A 1x1x1 block of one thread; `clusterX` > 1 asks for clusters of that many blocks (and as
  // many blocks).
  Reply launch(uint64_t context, uint64_t function, std::span<const uint8_t> params,
               uint64_t stream = 0, uint32_t clusterX = 1);
  Reply synchronize(uint64_t context);
  // Total device memory in use on the server, from a status request.
  uint64_t serverMemoryUsed();

  transport::Connection& connection() { return *connection_; }

 private:
  std::unique_ptr<transport::Connection> connection_;
};

}  // namespace gpupool::hardening
