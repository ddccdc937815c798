// RDMA implementation of the transport interface (libibverbs + librdmacm, RC queue pairs).
//
// Endpoints are `rdma://host:port`, where host is an IP address bound to an RDMA-capable netdev
// (rdma_cm resolves it to a verbs device). Frames travel as SENDs into receive buffers the peer
// posted in advance, under credit-based flow control, so a receiver is never overrun. Bulk parts of
// at least kRdmaRendezvousBytes are not copied: the sender registers them and announces
// {address, rkey, length}; the receiver RDMA READs them straight into the destination given to
// receiveBulk() and then tells the sender, whose sendFrame() returns only after that. Smaller bulk
// parts are copied inline into the SEND buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::transport {

// Bulk parts this large or larger move by RDMA READ (zero-copy); smaller ones go inline.
constexpr size_t kRdmaRendezvousBytes = 64u << 10;

// On a client connection (rdmaConnect), bulk of at least kRdmaRendezvousBytes in memory that is not
// a noted pinned range moves through a ring of registered staging chunks instead of registering
// the caller's pages for one transfer: the sender copies chunk k+1 in while the peer READs chunk
// k, and the receiver copies chunk k out while the READs of the next ones run. Connections a
// listener accepts (gpupoold) register their own long-lived buffers (device memory views,
// staging) per transfer instead, so they never add a copy.
constexpr size_t kRdmaStagingChunkBytes = 1u << 20;
constexpr size_t kRdmaStagingChunks = 4;

// Empty when this process can use verbs (a device opens and has an active port); otherwise a
// sentence naming why not, for the fallback warning.
std::string rdmaUnavailableReason();

// Connects over rdma_cm (scheme must be rdma). Throws TransportError with the reason on failure,
// including when no verbs device is usable. timeoutMs bounds each setup step (0 = 5 s).
std::unique_ptr<Connection> rdmaConnect(const Endpoint& endpoint, unsigned timeoutMs = 0);

// Binds and listens through rdma_cm; port 0 picks a free port (see Listener::url()).
std::unique_ptr<Listener> rdmaListen(const Endpoint& endpoint);

// A counter its connection's thread updates and any thread may read (gpupool status): relaxed
// atomic loads and stores, which cost what plain ones do, since only one thread writes.
class RelaxedCounter {
 public:
  RelaxedCounter() = default;
  RelaxedCounter(const RelaxedCounter& other) : value_(uint64_t(other)) {}
  RelaxedCounter& operator=(const RelaxedCounter& other) {
    value_.store(uint64_t(other), std::memory_order_relaxed);
    return *this;
  }
  RelaxedCounter& operator+=(uint64_t n) {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return *this;
  }
  RelaxedCounter& operator++() { return *this += 1; }
  uint64_t operator++(int) {
    uint64_t before = *this;
    *this += 1;
    return before;
  }
  operator uint64_t() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Per-connection counters. They let tests prove which path bytes took: bulk copied through the
// SEND/RECV buffers ("inline"), moved by RDMA READ straight between the two callers' buffers
// ("zero-copy"), or copied through the staging ring on this side ("staged"); gpupool status shows
// them per session.
struct RdmaStats {
  RelaxedCounter bulkBytesSentInline;
  RelaxedCounter bulkBytesSentZeroCopy;
  RelaxedCounter bulkBytesReceivedInline;
  RelaxedCounter bulkBytesReceivedZeroCopy;
  RelaxedCounter bulkBytesSentStaged;  // pageable: copied into the staging ring, READ from there
  RelaxedCounter bulkBytesReceivedStaged;   // pageable: READ into the staging ring, copied out
  RelaxedCounter registrations;             // ibv_reg_mr calls for caller memory
  RelaxedCounter registrationCacheHits;     // caller memory found already registered
  RelaxedCounter deregistrations;           // ibv_dereg_mr calls for caller memory
  RelaxedCounter bulkBytesSentByWrite;      // RDMA WRITTEN into the destination the peer offered
  RelaxedCounter bulkBytesReceivedWritten;  // placed by the peer's RDMA WRITE into our offer
  RelaxedCounter sends;                     // SEND work requests posted
  RelaxedCounter framesPacked;              // frames that left several to one SEND (sendFrameLater)
  RelaxedCounter messagesReadInPlace;       // messages handed out straight from the receive buffer
  RelaxedCounter messagesSentInPlace;       // messages built in the SEND buffer (frameSpace)
  RelaxedCounter creditWaits;               // times a send had to wait for the peer's credits
};

// The counters of an RDMA connection; nullptr for any other kind of connection.
const RdmaStats* rdmaStatsOf(const Connection& connection);

// Process-wide list of long-lived page-locked host ranges (cuMemHostAlloc, cuMemHostRegister, a
// server's device memory). A connection registers such a range once, as a whole, and keeps it
// registered until the range is forgotten (dropped at the connection's next safe point: the next
// frame it receives with none of its own memory lent to the peer) or the connection closes. Memory
// not listed is treated as pageable: registered for one transfer only, because it may be unmapped
// and its addresses reused afterwards.
enum class PeerAccess {
  kReadWrite,  // the peer may be given keys to it (client pinned memory: the server READs and
               // WRITEs it directly)
  kNone,       // ours alone (server device memory): cached for local access only; a transfer that
               // must expose it to the peer registers just that piece, for just that transfer
};
void notePinnedHostRange(const void* base, size_t size, PeerAccess access = PeerAccess::kReadWrite);
// Call before the range is freed or unregistered.
void forgetPinnedHostRange(const void* base);

}  // namespace gpupool::transport
