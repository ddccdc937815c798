// Counters a connection keeps about how its bytes moved (Connection::counters()).
#pragma once

#include <atomic>
#include <cstdint>

namespace gpupool::transport {

// A counter its connection updates from one thread at a time (under its lock) and any thread may
// read (gpupool status): relaxed atomic loads and stores, which cost what plain ones do, since no
// two writers race.
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

// Per-connection counters of a transport that can place bulk bytes itself (RDMA). They let tests
// prove which path bytes took: bulk copied through the SEND/RECV buffers ("inline"), moved by RDMA
// READ straight between the two callers' buffers ("zero-copy"), or copied through the staging ring
// on this side ("staged"); gpupool status shows them per session.
struct TransportCounters {
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
  RelaxedCounter inlineSends;               // of them, small enough to go inline (IBV_SEND_INLINE)
  RelaxedCounter framesPacked;              // frames that left several to one SEND (sendFrameLater)
  RelaxedCounter messagesReadInPlace;       // messages handed out straight from the receive buffer
  RelaxedCounter messagesSentInPlace;       // messages built in the SEND buffer (frameSpace)
  RelaxedCounter creditWaits;               // times a send had to wait for the peer's credits
  RelaxedCounter heartbeatProbes;           // probes of a silent peer's host (RDMA heartbeat)
};

}  // namespace gpupool::transport
