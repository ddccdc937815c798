// The verbs resources both ends of the raw-verbs baseline use (rdma_baseline_client.h and
// rdma_baseline_responder.h): a queue pair with its own CQ, a registered message area for SEND/RECV
// ping-pong and, on the server, a registered sink that the client RDMA WRITEs into. Nothing here
// touches the gpupool transport's framing, credits or sessions.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/rdma/rdma_cm_setup.h"
#include "transport/rdma/verbs_handles.h"

namespace gpupool::transport::rdma {

// rdma_cm private data: the client's connect request, and the server's accept with the sink's keys.
// The magic differs from the transport's ConnectParams, so the listener can tell them apart.
constexpr uint32_t kBaselineMagic = 0x4c534142;  // "BASL"
struct BaselineRequest {
  uint32_t magic;
  uint32_t maxMessageBytes;  // the largest ping-pong message
  uint64_t sinkBytes;        // the RDMA WRITE target the server should register
};
struct BaselineAccept {
  uint32_t magic;
  uint32_t rkey;
  uint64_t sinkAddress;
  uint64_t sinkBytes;
};

// Limits the server enforces, so a client cannot make it allocate without bound.
constexpr uint32_t kBaselineMaxMessageBytes = 64u << 10;
constexpr uint64_t kBaselineMaxSinkBytes = 256u << 20;
// Receives each side keeps posted, and RDMA WRITEs the client keeps in flight (perftest's
// default tx depth for ib_write_bw).
constexpr uint32_t kBaselineRecvDepth = 16;
constexpr uint32_t kBaselineTxDepth = 128;

// Work request ids.
constexpr uint64_t kBaselineWrRecv = 1ull << 56;
constexpr uint64_t kBaselineWrSend = 2ull << 56;
constexpr uint64_t kBaselineWrWrite = 3ull << 56;
constexpr uint64_t kBaselineWrKindMask = 0xffull << 56;

class BaselineQueue {
 public:
  // Takes ownership of cm's channel and id (left null), creates PD, CQ (polled only, as
  // perftest does), an RC QP (with inline data where the device has it), registers a message area
  // of kBaselineRecvDepth receive slots plus one send slot of maxMessageBytes each, and posts every
  // receive. The caller then runs rdma_connect or rdma_accept on id().
  BaselineQueue(CmHandles& cm, uint32_t maxMessageBytes);
  ~BaselineQueue();
  BaselineQueue(const BaselineQueue&) = delete;
  BaselineQueue& operator=(const BaselineQueue&) = delete;

  rdma_cm_id* id() const { return id_.get(); }
  rdma_event_channel* cmChannel() const { return channel_.get(); }
  ibv_cq* cq() const { return cq_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  uint32_t maxInline() const { return maxInline_; }
  uint32_t maxMessageBytes() const { return maxMessageBytes_; }
  std::string deviceName() const;

  void postReceive(uint32_t slot);
  // SENDs `size` bytes from the send slot, inline when they fit (as perftest does), signaled.
  void postSend(uint32_t size);
  // Fills `wcs` from the CQ; throws TransportError on a failed completion.
  int poll(ibv_wc* wcs, int capacity);
  // Polls until `done()`; every so many empty polls checks the CM channel, so a peer that
  // disconnected ends the wait with TransportError instead of a spin until the retry timeout.
  template <typename Handle, typename Done>
  void pollUntil(Handle handle, Done done) {
    ibv_wc wcs[16];
    unsigned empty = 0;
    while (!done()) {
      int n = poll(wcs, 16);
      for (int i = 0; i < n; ++i) handle(wcs[i]);
      if (n == 0 && ++empty % 1024 == 0) throwIfDisconnected();
    }
  }
  // Drains pending CM events; throws TransportError if one says the peer is gone.
  void throwIfDisconnected();

 private:
  // In the order they are created; they unwind in reverse, the queue pair first.
  EventChannelPtr channel_;
  CmIdPtr id_;
  ProtectionDomainPtr pd_;
  CompletionQueue cq_;
  uint32_t maxInline_ = 0;
  uint32_t maxMessageBytes_ = 0;
  std::vector<std::byte> messages_;  // receive slots, then the send slot
  MemoryRegionPtr messagesMr_;
  CmQueuePair qp_;
};

}  // namespace gpupool::transport::rdma
