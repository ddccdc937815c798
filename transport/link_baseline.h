// What the link itself gives, with nothing of gpupool on top: the baseline `gpupool bench`
// measures gpupool against, the way perftest measures a link (ib_send_lat: SEND/RECV ping-pong;
// ib_write_bw: streamed one-sided WRITEs). The server's listener for the scheme serves it beside
// its sessions. Only rdma:// has one today (transport/rdma/baseline/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/endpoint.h"

namespace gpupool::transport {

class LinkBaseline {
 public:
  virtual ~LinkBaseline() = default;
  // One round trip: sends `size` bytes and waits, busy-polling, for the server's reply of the
  // same size.
  virtual void pingPong(uint32_t size) = 0;
  // Writes `count` messages of `size` bytes into the server's sink, keeping several in flight,
  // and waits for all of them to complete.
  virtual void writeStream(uint64_t size, uint64_t count) = 0;
  virtual std::string deviceName() const = 0;
  // The largest message the device sends inline (0 where it has no such notion).
  virtual uint32_t maxInline() const = 0;
};

// Connects to the baseline served at `endpoint`, asking for ping-pong messages up to
// maxMessageBytes and a sink of sinkBytes to write into. Throws TransportError with the reason (a
// scheme without a baseline, no device, refused, a server without the baseline, limits exceeded).
std::unique_ptr<LinkBaseline> connectLinkBaseline(const Endpoint& endpoint,
                                                  uint32_t maxMessageBytes, uint64_t sinkBytes,
                                                  unsigned timeoutMs = 0);

}  // namespace gpupool::transport
