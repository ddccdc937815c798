// One RDMA connection: verbs resources, the credit-controlled SEND/RECV channel, rendezvous bulk
// by RDMA READ, bulk RDMA WRITTEN into a destination the peer offered, and small queued frames
// packed into shared SENDs. Internal to the transport; users go through rdma_transport.h.
//
// One class, implemented by concern: rdma_cm_setup.cc (rdma_cm steps), rdma_connection.cc
// (resources, completions), rdma_send.cc (send path, packing), rdma_bulk.cc (READ/WRITE,
// staging), rdma_receive.cc (frames and bulk received), rdma_readiness.cc (the event loop's
// view), rdma_heartbeat.cc (probes of a silent peer's host).
//
// Full duplex: one thread may send while another receives. Every entry point holds mutex_, so all
// state below is touched by one thread at a time; waitUntil is the only place that lets go of it
// (while it waits on the completion channel, or for the thread draining the CQ to make progress).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/frame_poll_rhythm.h"
#include "transport/pinned_memory.h"
#include "transport/rdma/rdma_cm_setup.h"
#include "transport/rdma/rdma_memory_registrations.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/rdma_wire.h"
#include "transport/rdma/verbs_handles.h"

namespace gpupool::transport::rdma {

class RdmaConnection final : public Connection {
 public:
  // Takes ownership of `id` and `channel` (the id's own event channel), creates PD, CQ and QP on
  // the id's device and posts every receive buffer. The caller then runs rdma_connect/rdma_accept.
  // With stagePageable, large pageable bulk goes through the staging rings (client connections).
  // `pinned` lists the ranges whose registrations are cached; it must outlive the connection.
  RdmaConnection(rdma_event_channel* channel, rdma_cm_id* id, bool stagePageable,
                 const PinnedMemory& pinned);
  ~RdmaConnection() override;

  void sendFrame(std::span<const ConstBuffer> message, std::span<const ConstBuffer> bulk) override;
  // Small frames are written straight into one open registered SEND buffer, which leaves when it
  // is full, at flush(), or before any other send.
  void sendFrameLater(std::span<const ConstBuffer> message,
                      std::span<const ConstBuffer> bulk) override;
  void flush() override;
  size_t queuedBytes() const override;
  // Streamed bulk (the cuda backend's pipelined device reads): each piece is written into the
  // peer's offer, announced for READ, or sent inline, and may be reused when sendBulk returns.
  bool streamsBulk() const override { return true; }
  void startFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes) override;
  void sendBulk(const void* data, size_t size) override;
  // Offers `dst` when it lies in a noted pinned range: the peer then RDMA WRITEs the next frame's
  // bulk there instead of announcing it for READ.
  void expectBulkInto(void* dst, size_t size) override;
  // The payload of a reserved SEND buffer after the headroom (queued: the open packed SEND buffer
  // after the next record's header and headroom); the frame whose message was built there leaves
  // from it.
  std::span<std::byte> frameSpace(bool queued) override;
  void returnFrameSpace(size_t written) override;
  ReceivedFrame receiveFrame() override;
  void receiveBulk(void* dst, size_t size) override;
  void discardBulk(size_t size) override;
  uint64_t pendingBulk() const override;
  void shutdown() override;
  // Sends and receives share one CQ, the credits and the offers, under mutex_; whichever thread
  // waits drives the CQ for both (waitUntil).
  bool fullDuplex() const override { return true; }
  std::string kind() const override { return "rdma"; }
  std::string peer() const override { return peer_; }
  void setReceiveTimeoutMs(unsigned ms) override { receiveTimeoutMs_ = ms; }
  // The heartbeat (rdma_heartbeat.cc): a peer whose host acknowledged nothing for a third of `ms`
  // gets a probe, a zero-length RDMA WRITE, which its host's adapter acknowledges however busy or
  // stopped the peer's program is and which takes none of its receive buffers; the peer is gone
  // when the adapter gives the probe up (retries exhausted) or, on adapters that retry longer,
  // when it stays unacknowledged for the rest of `ms`. Waits look on their own; checkPeer is the
  // owners' look at a connection nobody waits on.
  void setDeadPeerTimeoutMs(unsigned ms) override;
  void checkPeer() override;
  // rdmaStopAnswering (tests): the queue pair to the error state, the peer not told.
  void stopAnswering();

  // The event loop's view (rdma_readiness.cc): an epoll descriptor over the completion channel,
  // the rdma_cm channel (edge-triggered, so that a pending event another thread is about to take
  // does not keep the loop spinning) and readyFd_, made on first use. It turns readable when a
  // completion or a cm event comes, at shutdown, and when a thread that drove the CQ (a sender
  // waiting, say) queued the start of a frame or left that role; frameArrived then drives the CQ
  // itself when no other thread does.
  int readinessDescriptor() const override;
  bool frameArrived() override;
  bool readyAgain() override;
  // Server side, after a served frame: polls the CQ for up to the poll budget (setPollMax; 0 never)
  // for the session's next frame before the look that arms the CQ for the event loop, so a client
  // calling back to back is answered without a system call on this side but the reply's SEND, as
  // the shm transport spins on its ring (FramePollRhythm bounds what spins that catch nothing
  // cost).
  bool nextFrameArrived() override;
  void setPollMax(std::chrono::nanoseconds max) { pollMax_ = max; }

  // Relaxed counters, written under mutex_: readable from any thread.
  const RdmaStats& stats() const { return stats_; }
  std::optional<TransportCounters> counters() const override { return stats_; }
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
    bool written = false;  // already placed by the peer's RDMA WRITE at `bytes`
    int slot = -1;         // inline: the receive slot holding the bytes
    const std::byte* bytes = nullptr;
    uint64_t remoteAddress = 0;
    uint32_t rkey = 0;
    uint64_t size = 0;
    uint64_t offset = 0;
  };

  // A data message waiting to be read: its receive slot and its header there (a Packed SEND holds
  // several; the slot is re-posted once the last of them is released).
  struct Incoming {
    int slot = -1;
    const WireHeader* header = nullptr;
  };
  // A destination offered for the next frame's bulk (ours or the peer's).
  struct BulkOffer {
    bool active = false;
    std::byte* data = nullptr;  // ours: where the bytes land
    uint64_t address = 0;       // the peer's: where to write, under rkey
    uint64_t size = 0;
    uint32_t rkey = 0;
  };

  void postReceive(int slot);
  void releaseReceive(int slot);
  void unpack(int slot, const WireHeader& packed);
  WireHeader& receiveHeader(int slot);
  std::byte* sendBuffer(int slot);

  // Progress: drains the CQ, handling control messages and queueing data messages.
  bool pollCompletions();
  bool handleCompletions(const ibv_wc* wcs, int n);
  // With mutex_ held: returns once done() holds, letting go of mutex_ while it waits. The first
  // waiter drains the CQ for everyone; the others wait on progressed_ until it has made progress
  // or left.
  void waitUntil(const std::function<bool()>& done, unsigned timeoutMs, const char* what);
  void pollUntil(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                 unsigned timeoutMs, std::chrono::steady_clock::time_point deadline,
                 const char* what);
  // False once the deadline passed.
  bool waitForPoller(std::unique_lock<std::mutex>& lock, unsigned timeoutMs,
                     std::chrono::steady_clock::time_point deadline);
  [[noreturn]] void timedOut(const char* what);
  // After a change no completion announces (a send slot given back, the connection broken): wakes
  // every waiter.
  void wakeWaiters();
  // With mutex_ held: takes every pending completion-channel event (the CQ is then unarmed), and
  // every rdma_cm event (noting the peer's departure).
  void takeCompletionEvents();
  void takeCmEvents();
  // With mutex_ held: asks for the CQ's next completion event, unless it is asked for already
  // (cqArmed_: no event was taken since), which saves a system call per look of a busy connection.
  void armCompletionQueue();
  // With mutex_ held: drains the CQ unless another thread drives it; true when the next frame's
  // message is then queued. No system call.
  bool frameInCompletionQueue();
  // With mutex_ held (let go while spinning): polls the CQ until a whole frame is queued (true) or
  // the poll budget is spent (false).
  bool spinForFrame(std::unique_lock<std::mutex>& lock);
  // Makes readiness_ readable (through readyFd_) where an event loop watches this connection.
  void signalReadiness();
  // The next frame's whole message is in incoming_ (or as much of it as the receive window holds).
  bool wholeMessageQueued() const;
  [[noreturn]] void fail(TransportError::Kind kind, const std::string& why);
  void checkUsable() const;
  // With mutex_ held: the heartbeat's look (rdma_heartbeat.cc): posts a probe when the peer's host
  // has been silent long enough, fails the connection when one went unanswered too long.
  void lookAtPeer(std::chrono::steady_clock::time_point now);
  void postProbe(std::chrono::steady_clock::time_point now);
  // How long a wait sleeps before it looks again (-1: forever, no heartbeat).
  int heartbeatLookMs() const;

  // Slots opened but not yet posted count as spent, so an open packed SEND keeps the reserve.
  int64_t credits() const {
    return int64_t(kRdmaRecvSlots) - int64_t(sent_ + opened_ - peerConsumed_);
  }
  bool tryPostControl(WireType type);
  void maybeReturnCredits();
  void openSlot(OutSlot& out, WireType type, bool control);
  void postSlot(OutSlot& out);
  void appendInline(OutSlot& out, WireType continuation, const std::byte* data, size_t size);

  // A ring of kRdmaStagingChunks registered chunks, allocated on first use.
  struct StagingRing {
    std::vector<std::byte> bytes;
    MemoryRegionPtr mr;  // over bytes, so after them
    std::byte* chunk(uint64_t i) {
      return bytes.data() + (i % kRdmaStagingChunks) * kRdmaStagingChunkBytes;
    }
  };
  StagingRing& ring(StagingRing& r, int access);
  bool staged(const void* p, size_t size) const;
  void sendStaged(OutSlot& out, const std::byte* bytes, size_t size);
  void readStaged(std::byte* dst, uint64_t remote, uint32_t rkey, uint64_t size);
  void postOneSided(ibv_wr_opcode opcode, const std::byte* local, uint64_t n, uint32_t lkey,
                    uint64_t remote, uint32_t rkey);
  void postRead(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey, uint64_t size);

  // sendFrame and flush, with mutex_ held.
  void sendWhole(std::span<const ConstBuffer> message, std::span<const ConstBuffer> bulk);
  void flushQueued();
  BulkOffer beginFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes);
  void dropForgottenRegistrations();
  void postFrameBegin(std::span<const ConstBuffer> message, uint64_t bulkBytes);
  std::byte* lentPayload() { return sendBuffer(lent_.slot) + sizeof(WireHeader); }
  bool builtInLent(std::span<const ConstBuffer> message);
  std::span<const ConstBuffer> rescueLent(std::span<const ConstBuffer> message,
                                          std::vector<std::byte>& copy, ConstBuffer& whole);
  void writeRecord(std::byte* at, WireType type, size_t bytes, size_t messageBytes,
                   size_t bulkBytes, std::span<const ConstBuffer> parts);
  void sendUnoffered(std::span<const ConstBuffer> bulk);
  void sendPart(OutSlot& out, const ConstBuffer& part, std::vector<RegistrationLease>& leases);
  bool registerForWrite(std::span<const ConstBuffer> bulk, std::vector<RegistrationLease>& leases);
  void postWrites(std::span<const ConstBuffer> parts, const std::vector<RegistrationLease>& leases,
                  const BulkOffer& offer, uint64_t offset);
  void awaitWrites();
  void finishWrites(uint64_t bulkBytes);

  Incoming nextIncoming();
  void loadSegment();
  void consumeBulk(std::byte* dst, size_t size);
  void readRemote(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey, uint64_t size);

  mutable std::mutex mutex_;
  std::condition_variable progressed_;   // the CQ was drained, or the thread draining it left
  bool polling_ = false;                 // a thread in waitUntil drains the CQ
  bool loopThreadPolls_ = false;         // that thread serves the frames it takes in
  std::chrono::nanoseconds pollMax_{0};  // nextFrameArrived's budget (server side)
  FramePollRhythm pollRhythm_;           // nextFrameArrived's
  std::atomic<uint64_t> wakeups_{0};     // wakeWaiters calls, watched by the spinning poller

  // Verbs resources in the order they are created; they unwind in reverse (verbs_handles.h), the
  // queue pair (declared last) first.
  RdmaStats stats_;        // before registrations_, which count into it until they are gone
  FileDescriptor wakeFd_;  // eventfd written by shutdown() to wake a blocked wait
  // eventfd read only by frameArrived (a waiting thread reads wakeFd_, which would take the
  // readiness it signals away from the loop): a frame queued, the CQ handed back, shutdown.
  FileDescriptor readyFd_;
  mutable FileDescriptor readiness_;  // epoll, for the event loop (readinessDescriptor())
  EventChannelPtr channel_;
  CmIdPtr id_;
  ProtectionDomainPtr pd_;
  CompletionChannelPtr completionChannel_;
  CompletionQueue cq_;
  // The CQ is armed: no completion event has been taken since ibv_req_notify_cq. One that fired and
  // waits in the channel still leaves it true, and its descriptor readable, so it is taken (and the
  // CQ armed again) at the next look or wait.
  bool cqArmed_ = false;
  // frameArrived took the channels' edges while another thread drove the CQ: the next look that
  // drives it reads both channels, edges or not.
  bool edgesUntaken_ = false;
  std::vector<std::byte> recvArena_, sendArena_;
  MemoryRegionPtr recvMr_, sendMr_;
  std::vector<int> freeSendSlots_;
  std::deque<Incoming> incoming_;    // data messages, in arrival order
  std::vector<uint32_t> slotUsers_;  // per receive slot: messages in it not yet released
  int heldSlot_ = -1;                // holds the message receiveFrame() returned in place
  uint32_t maxReadsInFlight_ = 1;
  uint32_t maxInlineBytes_ = 0;  // the queue pair's inline send size: SENDs this small go inline

  uint64_t sent_ = 0;              // SENDs posted
  uint64_t peerConsumed_ = 0;      // the peer's `consumed`, highest seen
  uint64_t consumed_ = 0;          // peer SENDs processed with their buffers re-posted
  uint64_t consumedReturned_ = 0;  // `consumed` as last sent to the peer
  uint64_t opened_ = 0;            // send slots opened and not yet posted
  uint64_t readsPosted_ = 0, readsDone_ = 0;
  uint64_t writesPosted_ = 0, writesDone_ = 0;
  uint64_t remoteBulkAnnounced_ = 0, remoteBulkDone_ = 0;

  OutSlot packed_;    // the open Packed SEND of sendFrameLater, index < 0 when none
  OutSlot reserved_;  // the SEND buffer frameSpace() lends, index < 0 when none
  // What frameSpace() lent: a span of send slot `slot` from payload offset `offset` to its end
  // (reserved_'s, or packed_'s when queued).
  struct Lent {
    bool active = false;
    bool queued = false;
    int slot = -1;
    size_t offset = 0;
  };
  Lent lent_;
  // Per send slot: payload bytes of its last SEND. A completed SEND's payload is zeroed, so every
  // free buffer is clean for frameSpace() (Cap'n Proto builds only in zeroed memory).
  std::vector<size_t> sendUsed_;
  size_t queuedBytes_ = 0;
  uint64_t streamLeft_ = 0;  // bulk bytes startFrame announced and sendBulk has not sent yet
  BulkOffer streamOffer_;    // the peer's offer the streamed frame is written into
  BulkOffer offer_;          // ours, for the next frame to start arriving (expectBulkInto)
  BulkOffer frameOffer_;     // ours, for the frame being received
  BulkOffer peerOffer_;      // the peer's, for the next frame we send

  std::vector<uint64_t> message_;
  uint64_t pendingBulk_ = 0;
  BulkSegment segment_;
  const PinnedMemory& pinned_;
  std::unique_ptr<MemoryRegistrations> registrations_;  // after pd_, before it in teardown
  bool stagePageable_;
  StagingRing sendRing_, receiveRing_;
  // Per send-ring chunk: the ordinal of the BulkRemote that last announced it; the chunk is free
  // again once that many + 1 BulkDones came back.
  uint64_t sendRingAnnounced_[kRdmaStagingChunks] = {};
  bool sendRingUsed_[kRdmaStagingChunks] = {};
  uint64_t sendRingNext_ = 0;

  std::atomic<unsigned> receiveTimeoutMs_ = 0;
  // The heartbeat's state, under mutex_ (heartbeatMs_ may be set from any thread).
  std::atomic<unsigned> heartbeatMs_ = 0;
  std::chrono::steady_clock::time_point lastHeard_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point probePostedAt_{};
  bool probeOutstanding_ = false;
  std::atomic<bool> shutdown_{false};
  bool broken_ = false;
  TransportError::Kind brokenKind_ = TransportError::Kind::kDisconnected;
  std::string brokenReason_;
  bool peerGone_ = false;
  std::string peer_ = "unknown";
  CmQueuePair qp_;  // destroyed first: no work request is in flight when the rest goes
};

}  // namespace gpupool::transport::rdma
