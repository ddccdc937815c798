// The raw-verbs baseline `gpupool bench --transport rdma` measures gpupool against, the way
// perftest measures a link: SEND/RECV ping-pong (ib_send_lat) and streamed RDMA WRITEs
// (ib_write_bw), on a queue pair of its own to the same server and RDMA device. gpupoold's RDMA
// listener serves it (rdma_baseline_responder.h) on a thread of its own, outside every session and
// backend, so the numbers are what the device and the verbs stack give, with nothing of gpupool on
// top.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/endpoint.h"
#include "transport/link_baseline.h"
#include "transport/rdma/verbs_handles.h"

namespace gpupool::transport {

namespace rdma {
class BaselineQueue;
}

class RdmaBaselineClient final : public LinkBaseline {
 public:
  // Connects to the RDMA listener at `endpoint` (rdma://), asking for ping-pong messages up to
  // maxMessageBytes and a sink of sinkBytes to write into. Throws TransportError with the reason
  // (no verbs, refused, a server without the baseline, limits exceeded).
  RdmaBaselineClient(const Endpoint& endpoint, uint32_t maxMessageBytes, uint64_t sinkBytes,
                     unsigned timeoutMs = 0);
  ~RdmaBaselineClient() override;

  // One round trip: SENDs `size` bytes (inline where the device allows) and waits, busy-polling,
  // for the server's reply of the same size.
  void pingPong(uint32_t size) override;
  // RDMA WRITEs `count` messages of `size` bytes into the server's sink, keeping up to
  // kBaselineTxDepth in flight, and waits for all of them to complete.
  void writeStream(uint64_t size, uint64_t count) override;

  std::string deviceName() const override;
  uint32_t maxInline() const override;

 private:
  std::unique_ptr<rdma::BaselineQueue> queue_;
  std::vector<std::byte> source_;   // what the WRITEs carry, as large as the sink, registered
  rdma::MemoryRegionPtr sourceMr_;  // over source_, in the queue's PD: goes first
  uint64_t sinkAddress_ = 0;
  uint64_t sinkBytes_ = 0;
  uint32_t sinkRkey_ = 0;
};

}  // namespace gpupool::transport
