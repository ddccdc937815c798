// What the files that implement RdmaConnection share (rdma_connection.h lists them): work request
// ids and queue limits. Internal to transport/rdma.
#pragma once

#include <fcntl.h>

#include <chrono>
#include <cstdint>

#include "transport/connection.h"
#include "transport/rdma/rdma_wire.h"

namespace gpupool::transport::rdma {

using Kind = TransportError::Kind;
using Clock = std::chrono::steady_clock;

// Work request ids: kind in the top byte, slot index below.
constexpr uint64_t kWrRecv = 1ull << 56;
constexpr uint64_t kWrSend = 2ull << 56;
constexpr uint64_t kWrRead = 3ull << 56;
constexpr uint64_t kWrWrite = 4ull << 56;
constexpr uint64_t kWrProbe = 5ull << 56;  // the heartbeat's zero-length RDMA WRITE
constexpr uint64_t kWrKindMask = 0xffull << 56;

// Polls before arming the completion channel: a reply usually arrives within microseconds on real
// hardware, and sleeping on the channel costs a syscall and a wakeup.
constexpr int kSpinPolls = 4000;
// Completions taken from the CQ at once.
constexpr int kPollBatch = 32;
constexpr uint64_t kMaxReadBytes = 4u << 20;
// RDMA WRITEs of one frame's bulk in flight at once, each at most kMaxReadBytes.
constexpr uint64_t kMaxWritesInFlight = 8;
// Send queue: every SEND slot, plus READs (at most 16 in flight), WRITEs and the heartbeat's one
// probe.
constexpr uint32_t kSendQueueDepth = kRdmaSendSlots + 16 + kMaxWritesInFlight + 1;

inline void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace gpupool::transport::rdma
