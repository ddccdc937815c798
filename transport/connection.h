// The transport interface: one small contract that TCP, TLS and RDMA implement.
//
// A connection carries frames. A frame is one message (a few KiB at most in practice) followed by
// an optional bulk payload (memory contents, module images). The receiver first gets the message,
// decides where the bulk should land, and then reads it straight there: bulk bytes are never staged
// by the transport. A connection is not thread-safe in general: each side serializes its own sends
// and receives. One that is fullDuplex() (TCP, TLS and RDMA all are) lets one thread send while
// another receives (many calls in flight on one session); sends stay serialized among themselves,
// and receives too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "transport/file_descriptor.h"
#include "transport/transport_counters.h"

namespace gpupool::transport {

// Any failure of the underlying channel (peer gone, reset, timeout, malformed frame header).
// After it is thrown the connection is unusable. kind() says which sort of failure it was, so
// callers need not parse what(); what() is the sentence for people.
class TransportError : public std::runtime_error {
 public:
  enum class Kind {
    kDisconnected,  // the peer closed or reset the channel, or it was shut down here
    kTimeout,       // the peer did not answer in time
    kMalformed,     // the peer sent something this side cannot accept
    kUnavailable,   // the channel could not be set up (no route, no device, refused, bad setup)
  };
  TransportError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  // A lost channel, for connections outside the transport library (test doubles, fuzzers).
  explicit TransportError(const std::string& what) : TransportError(Kind::kDisconnected, what) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct ConstBuffer {
  const void* data;
  size_t size;
};

struct MutableBuffer {
  void* data = nullptr;
  size_t size = 0;
};

// The largest message a receiver accepts; bulk is bounded separately by the caller.
constexpr size_t kMaxMessageBytes = 64u << 20;

// Room kept before Connection::frameSpace() for the part sent ahead of it.
constexpr size_t kFrameSpaceHeadroom = 8;

struct ReceivedFrame {
  // The message bytes, 8-byte aligned (Cap'n Proto words), exactly messageBytes long.
  std::span<const std::byte> message;
  // Bulk bytes that follow; the caller must consume all of them with receiveBulk/discardBulk
  // before the next receiveFrame.
  uint64_t bulkBytes = 0;
};

// How often a heartbeat of `heartbeatMs` looks at its peer (Connection::checkPeer): well inside
// the timeout, since the kernel ends a connection whose peer's window stays closed that long
// unless a look has lifted its bound first (transport/tcp_peer_watch.h).
constexpr unsigned heartbeatLookIntervalMs(unsigned heartbeatMs) {
  return std::clamp(heartbeatMs / 5, 20u, 1000u);
}

class Connection {
 public:
  virtual ~Connection() = default;

  // Sends one frame: the concatenation of `message` parts, then the concatenation of `bulk` parts.
  // Gathered, without copying the parts.
  virtual void sendFrame(std::span<const ConstBuffer> message,
                         std::span<const ConstBuffer> bulk) = 0;

  // Queues a frame to go out with the next sendFrame or flush(), copying what it needs, so many
  // small frames leave in one write. Order with sendFrame is kept. The default sends at once.
  virtual void sendFrameLater(std::span<const ConstBuffer> message,
                              std::span<const ConstBuffer> bulk) {
    sendFrame(message, bulk);
  }
  // Sends every queued frame now.
  virtual void flush() {}
  // Bytes queued by sendFrameLater and not yet sent.
  virtual size_t queuedBytes() const { return 0; }

  // A frame whose bulk is sent in pieces, so the sender can produce later pieces while earlier ones
  // travel: startFrame announces `bulkBytes`, then sendBulk is called until exactly that many bytes
  // have gone, before any other send. Only where streamsBulk() is true; elsewhere these throw.
  virtual bool streamsBulk() const { return false; }
  virtual void startFrame(std::span<const ConstBuffer> /*message*/, uint64_t /*bulkBytes*/) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         kind() + " connections cannot stream bulk");
  }
  virtual void sendBulk(const void* /*data*/, size_t /*size*/) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         kind() + " connections cannot stream bulk");
  }

  // Says where the bulk of the next frame received will be read to, as one receiveBulk(dst, size),
  // before the request that asks for it is sent. A transport that can place bytes itself (RDMA
  // WRITE into registered memory) lets the sender write them there; the promise holds for that one
  // frame only, and only when its bulk is exactly `size` bytes. Others ignore it.
  virtual void expectBulkInto(void* /*dst*/, size_t /*size*/) {}

  // Building in place: lends zeroed, 8-byte-aligned memory inside the send buffer of the next
  // frame, with kFrameSpaceHeadroom bytes free before it; `queued` when the message will go to
  // sendFrameLater. The next sendFrame or startFrame (sendFrameLater when queued) whose message
  // is one part of exactly that many bytes (a one-segment Cap'n Proto table) and then one part
  // that starts at the lent span sends it from where it lies, without a copy; one whose message
  // does not lie there makes the span unusable (so send nothing else in between). Call
  // returnFrameSpace
  // with how many bytes from the start of the span may have been written once the message was sent
  // or dropped; a span not sent is zeroed for the next borrower. Empty where the transport has no
  // such memory.
  virtual std::span<std::byte> frameSpace(bool /*queued*/) { return {}; }
  virtual void returnFrameSpace(size_t /*written*/) {}

  // Receives the next frame's message. The returned span stays valid until the next receiveFrame.
  virtual ReceivedFrame receiveFrame() = 0;

  // For an event loop that holds many idle connections without a thread each (gpupoold): the
  // descriptor that turns readable when more of the next frame may have arrived, or when the peer
  // went away; -1 where the transport has none (then a thread blocks in receiveFrame).
  virtual int readinessDescriptor() const { return -1; }
  // Takes in what has arrived, without waiting: true once receiveFrame() returns the next frame's
  // message without waiting (its bulk may still be on its way). Call between frames, on the
  // receiving side, only where readinessDescriptor() is not -1. Throws TransportError as a
  // receive would (peer gone, malformed frame header).
  virtual bool frameArrived() { return false; }
  // After frameArrived() answered false at the end of a served frame: waits briefly, spinning,
  // for the next frame's bytes where that costs less than a trip through the event loop (shm,
  // whose client usually sends its next call within microseconds). Returns false where the
  // transport does not wait (nothing changed); true once it waited, whether or not bytes came:
  // then call frameArrived() again (it takes them in, or asks again to be woken).
  virtual bool awaitFrameBriefly() { return false; }
  // The look right after a frame was served: true once receiveFrame() returns the next frame's
  // message without waiting; false sends the connection back to the event loop. By default
  // frameArrived(), then, when nothing came and the transport waits briefly, frameArrived() again.
  virtual bool nextFrameArrived() {
    return frameArrived() || (awaitFrameBriefly() && frameArrived());
  }
  // Gives back the receive memory an idle connection holds between frames.
  virtual void releaseIdleMemory() {}
  // The memory an idle connection's sends hold (shm: the pages of the outgoing ring that hold no
  // unread bytes), given back. The client's flusher calls it every so often: it gives back once a
  // whole period between two calls passed without a send, and asks the server to do the same; the
  // server calls it when it goes idle, and gives back once asked. Call with no send in progress.
  virtual void giveBackIdleSendMemory() {}
  // Whether giveBackIdleSendMemory can give anything back (else nobody needs to call it).
  virtual bool givesBackIdleSendMemory() const { return false; }
  // shm: the bytes of both rings in memory now (the rest was given back, or never touched).
  virtual std::optional<uint64_t> ringBytesResident() const { return std::nullopt; }
  // For a turn that ended with frames still waiting (perhaps already taken in, so the descriptor
  // may not turn readable for them): makes readinessDescriptor() readable now and returns true;
  // false where it cannot (a socket: the loop then watches for writability, which it nearly
  // always has).
  virtual bool readyAgain() { return false; }

  // Reads the next `size` bulk bytes of the current frame into `dst`.
  virtual void receiveBulk(void* dst, size_t size) = 0;
  // Skips the next `size` bulk bytes of the current frame.
  virtual void discardBulk(size_t size) = 0;
  // Bulk bytes of the current frame not yet consumed.
  virtual uint64_t pendingBulk() const = 0;

  // Shuts the connection down; a blocked receive in another thread returns with TransportError.
  virtual void shutdown() = 0;

  // "tcp", "tls" or "rdma".
  virtual std::string kind() const = 0;
  // The peer's address, for logs and status.
  virtual std::string peer() const = 0;

  // True when one thread may send (sendFrame, sendFrameLater, flush, startFrame/sendBulk,
  // expectBulkInto, frameSpace/returnFrameSpace, queuedBytes) while another receives
  // (receiveFrame, receiveBulk, discardBulk, pendingBulk); sends stay serialized among themselves
  // and receives among themselves, by the caller. There, setReceiveTimeoutMs may come from either
  // side (it bounds the next wait); shutdown(), peerClosed(), kind() and peer() from any thread.
  virtual bool fullDuplex() const { return false; }

  // Bounds how long a receive may wait for the peer (0 = forever).
  virtual void setReceiveTimeoutMs(unsigned ms) = 0;

  // Heartbeat: declares the peer dead (every receive and send then fails with TransportError) when
  // its host has not answered for about `ms`, however long the peer's application stays silent, so
  // a long kernel never trips it but a killed host or a cut network does (0 = off). Transports
  // without such a mechanism ignore it.
  virtual void setDeadPeerTimeoutMs(unsigned /*ms*/) {}
  // The heartbeat's look at the peer, for an owner to call now and then while no thread waits on
  // the connection (bytes may sit behind a busy peer's closed receive window meanwhile): throws
  // TransportError (kTimeout) once the peer's host stopped answering; cheap, and safe beside a
  // thread blocked in a call on this connection. Waits inside the transport look by themselves,
  // every heartbeatLookIntervalMs; an owner looks as often.
  virtual void checkPeer() {}

  // Whether the peer has closed or reset the connection, without receiving anything. Safe to call
  // from another thread while one is blocked in a call on this connection (false when unknown).
  virtual bool peerClosed() const { return false; }

  // Memory files passed to the peer (shm, whose peer shares this host): sendFile passes a
  // duplicate of `fd` ahead of every frame sent after it returns; false where the transport
  // cannot. On the receiving side takeFile hands over the oldest file the peer passed that no one
  // has taken (the caller owns it), or an empty descriptor when none came. Files and frames are
  // matched by the protocol, in order (a share request takes the file passed before it). Either
  // may be called from any thread.
  virtual bool sendFile(int /*fd*/) { return false; }
  virtual FileDescriptor takeFile() { return {}; }

  // How this connection's bulk bytes moved so far (gpupool status, tests); nullopt for transports
  // that copy everything through one stream (TCP, TLS).
  virtual std::optional<TransportCounters> counters() const { return std::nullopt; }
};

class Listener {
 public:
  virtual ~Listener() = default;
  // Blocks until a peer connects; throws TransportError once shutdown() was called.
  virtual std::unique_ptr<Connection> accept() = 0;
  virtual void shutdown() = 0;
  // The URL peers can use, with the real port when 0 was asked for (e.g. tcp://127.0.0.1:40123).
  virtual std::string url() const = 0;
};

}  // namespace gpupool::transport
