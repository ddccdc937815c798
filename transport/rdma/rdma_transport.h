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

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/pinned_memory.h"

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
// including when no verbs device is usable. timeoutMs bounds each setup step (0 = 5 s). The
// connection caches registrations of the ranges `pinned` lists.
std::unique_ptr<Connection> rdmaConnect(const Endpoint& endpoint, unsigned timeoutMs = 0,
                                        PinnedMemory& pinned = processPinnedMemory());

// Binds and listens through rdma_cm; port 0 picks a free port (see Listener::url()). Accepted
// connections cache registrations of the ranges `pinned` lists, and after serving a frame poll
// for up to `pollMax` for the next (Connection::nextFrameArrived; 0 never).
std::unique_ptr<Listener> rdmaListen(const Endpoint& endpoint,
                                     PinnedMemory& pinned = processPinnedMemory(),
                                     std::chrono::microseconds pollMax = {});

// The RDMA connection's live counters.
using RdmaStats = TransportCounters;

// The live counters of an RDMA connection, for tests of this transport that watch them change;
// nullptr for any other kind of connection. Everyone else reads Connection::counters().
const RdmaStats* rdmaStatsOf(const Connection& connection);

// For tests of the heartbeat: this side's adapter stops answering the peer, as a host that vanished
// does, without telling it (the queue pair moves to the error state, where what arrives is dropped
// unacknowledged). False for any other kind of connection.
bool rdmaStopAnswering(Connection& connection);

}  // namespace gpupool::transport
