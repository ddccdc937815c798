// One RDMA connection: verbs resources, the credit-controlled SEND/RECV channel, and rendezvous
// bulk by RDMA READ. Internal to the transport; users go through rdma_transport.h.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/rdma_memory_registrations.h"
#include "transport/rdma_transport.h"
#include "transport/rdma_wire.h"

namespace gpupool::transport::rdma {

// Waits for the next event on `channel` and returns it acknowledged; throws TransportError naming
// `what` when it is not `expected` or when timeoutMs passes. With `privateData`, the event's
// private data (the peer's accept or connect payload) is copied there first.
void awaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, unsigned timeoutMs,
                  const std::string& what, std::vector<std::byte>* privateData = nullptr);

// Owns an event channel and an id until handed on (set both to null then).
struct CmHandles {
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  CmHandles() = default;
  CmHandles(const CmHandles&) = delete;
  CmHandles& operator=(const CmHandles&) = delete;
  ~CmHandles();
};

// The active side's first steps: creates cm's channel and id and resolves the address and route
// to `endpoint` (its host must resolve to an address on an RDMA device). Throws TransportError.
void resolveRoute(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm);

// The rdma_cm connection parameters both sides use (private data = ConnectParams).
rdma_conn_param connectionParameters(const ConnectParams* params, ibv_context* verbs);

class RdmaConnection final : public Connection {
 public:
  // Takes ownership of `id` and `channel` (the id's own event channel), creates PD, CQ and QP on
  // the id's device and posts every receive buffer. The caller then runs rdma_connect/rdma_accept.
  // With stagePageable, large pageable bulk goes through the staging rings (client connections).
  RdmaConnection(rdma_event_channel* channel, rdma_cm_id* id, bool stagePageable);
  ~RdmaConnection() override;

  void sendFrame(std::span<const ConstBuffer> message, std::span<const ConstBuffer> bulk) override;
  ReceivedFrame receiveFrame() override;
  void receiveBulk(void* dst, size_t size) override;
  void discardBulk(size_t size) override;
  uint64_t pendingBulk() const override { return pendingBulk_; }
  void shutdown() override;
  std::string kind() const override { return "rdma"; }
  std::string peer() const override { return peer_; }
  void setReceiveTimeoutMs(unsigned ms) override { receiveTimeoutMs_ = ms; }

  const RdmaStats& stats() const { return stats_; }
  // Called once the connection is established: records the peer's address.
  void markEstablished();

 private:
  struct OutSlot {
    int index = -1;
    WireType type{};
    size_t used = 0;
    uint64_t a = 0, b = 0;
    uint32_t rkey = 0;
  };
  struct BulkSegment {
    bool active = false;
    bool remote = false;
    int slot = -1;  // inline: the receive slot holding the bytes
    const std::byte* bytes = nullptr;
    uint64_t remoteAddress = 0;
    uint32_t rkey = 0;
    uint64_t size = 0;
    uint64_t offset = 0;
  };

  void releaseResources();
  void postReceive(int slot);
  void releaseReceive(int slot);
  WireHeader& receiveHeader(int slot);
  std::byte* sendBuffer(int slot);

  // Progress: drains the CQ, handling control messages and queueing data messages.
  bool pollCompletions();
  void waitUntil(const std::function<bool()>& done, unsigned timeoutMs, const char* what);
  [[noreturn]] void fail(const std::string& why);
  void checkUsable() const;

  int64_t credits() const { return int64_t(kRdmaRecvSlots) - int64_t(sent_ - peerConsumed_); }
  bool tryPostControl(WireType type);
  void maybeReturnCredits();
  void openSlot(OutSlot& out, WireType type, bool control);
  void postSlot(OutSlot& out);
  void appendInline(OutSlot& out, WireType continuation, const std::byte* data, size_t size);

  // A ring of kRdmaStagingChunks registered chunks, allocated on first use.
  struct StagingRing {
    std::vector<std::byte> bytes;
    ibv_mr* mr = nullptr;
    std::byte* chunk(uint64_t i) {
      return bytes.data() + (i % kRdmaStagingChunks) * kRdmaStagingChunkBytes;
    }
  };
  StagingRing& ring(StagingRing& r, int access);
  bool staged(const void* p, size_t size) const;
  void sendStaged(OutSlot& out, const std::byte* bytes, size_t size);
  void readStaged(std::byte* dst, uint64_t remote, uint32_t rkey, uint64_t size);
  void postRead(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey, uint64_t size);

  int nextIncoming();
  void loadSegment();
  void consumeBulk(std::byte* dst, size_t size);
  void readRemote(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey, uint64_t size);

  rdma_event_channel* channel_;
  rdma_cm_id* id_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* completionChannel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  bool qpCreated_ = false;
  int wakeFd_ = -1;  // eventfd written by shutdown() to wake a blocked wait
  std::vector<std::byte> recvArena_, sendArena_;
  ibv_mr* recvMr_ = nullptr;
  ibv_mr* sendMr_ = nullptr;
  std::vector<int> freeSendSlots_;
  std::deque<int> incoming_;         // receive slots holding data messages, in arrival order
  std::vector<uint32_t> recvBytes_;  // byte_len of each receive slot's completion
  unsigned unackedCqEvents_ = 0;
  uint32_t maxReadsInFlight_ = 1;

  uint64_t sent_ = 0;              // SENDs posted
  uint64_t peerConsumed_ = 0;      // the peer's `consumed`, highest seen
  uint64_t consumed_ = 0;          // peer SENDs processed with their buffers re-posted
  uint64_t consumedReturned_ = 0;  // `consumed` as last sent to the peer
  uint64_t readsPosted_ = 0, readsDone_ = 0;
  uint64_t remoteBulkAnnounced_ = 0, remoteBulkDone_ = 0;

  std::vector<uint64_t> message_;
  uint64_t pendingBulk_ = 0;
  BulkSegment segment_;
  MemoryRegistrations* registrations_ = nullptr;  // owned; after pd_, before it in teardown
  bool stagePageable_;
  StagingRing sendRing_, receiveRing_;
  // Per send-ring chunk: the ordinal of the BulkRemote that last announced it; the chunk is free
  // again once that many + 1 BulkDones came back.
  uint64_t sendRingAnnounced_[kRdmaStagingChunks] = {};
  bool sendRingUsed_[kRdmaStagingChunks] = {};
  uint64_t sendRingNext_ = 0;

  unsigned receiveTimeoutMs_ = 0;
  std::atomic<bool> shutdown_{false};
  bool broken_ = false;
  std::string brokenReason_;
  bool peerGone_ = false;
  std::string peer_ = "unknown";
  RdmaStats stats_;
};

}  // namespace gpupool::transport::rdma
