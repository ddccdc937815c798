// The byte rings of the shared-memory transport (shm://): one per direction, in a memory file the
// client creates and passes to the server. Each side copies bytes in and out and wakes the other;
// the frame format on top is FramedConnection's, so frames, queued frames and streamed bulk work as
// over TCP, and a message larger than a ring goes through in pieces.
//
// Layout of the file (offsets in bytes; ring size R a power of two):
//   0       ShmRingControl of the client-to-server ring
//   128     ShmRingControl of the server-to-client ring
//   4096    client-to-server data, R bytes
//   4096+R  server-to-client data, R bytes
// head and tail are free-running 32-bit byte counts (position = count mod R); the producer owns
// head, the consumer tail. Each is also the futex word its waiter sleeps on.
//
// The peer may be hostile: each side keeps its own copy of the count it owns, reads the peer's
// once per step, and accepts it only when it leaves 0..R bytes between them; anything else is a
// TransportError (kMalformed) for this connection alone. Positions are taken modulo R from private
// values, so no value in the shared region can make a side touch memory outside its mapping.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/connection.h"
#include "transport/frame_poll_rhythm.h"

namespace gpupool::transport {

struct alignas(64) ShmRingCount {
  uint32_t value;    // head (producer's) or tail (consumer's)
  uint32_t waiting;  // ShmWaiting: how the other count's owner sleeps until this one moves
  // The core the count's owner last moved it from, plus one (0: not known). A side about to spin
  // for this count does not when it runs on that very core: the owner could not run while it spun.
  uint32_t moverCpu;
  // On the tail only: set by the consumer to ask the producer to give back, when next idle, the
  // ring's pages that hold no unread bytes (the client's ask once its session has gone idle:
  // ShmRingEnd::askProducerToGiveBack); the producer clears it when it takes the ask.
  uint32_t giveBack;
};

struct ShmRingControl {
  ShmRingCount head;  // bytes written; `waiting`: the consumer waits for it
  ShmRingCount tail;  // bytes consumed; `waiting`: the producer waits for it
};
static_assert(sizeof(ShmRingControl) == 128);

// How a side waits for its peer to move a count.
enum ShmWaiting : uint32_t {
  kShmAwake = 0,
  kShmFutex = 1,     // sleeps on the count's futex word: the mover wakes it
  kShmDoorbell = 2,  // waits for the socket to turn readable (event loop): the mover sends a byte
};

// The client's first (and only) socket message, carrying the memory file as SCM_RIGHTS.
struct ShmSetup {
  uint64_t magic;
  uint32_t version;
  uint32_t ringBytes;
};
constexpr uint64_t kShmSetupMagic = 0x314d48534c505047;  // "GPPLSHM1"
constexpr uint32_t kShmSetupVersion = 1;

constexpr size_t kShmDataOffset = 4096;
constexpr uint32_t kShmMinRingBytes = 4096;
constexpr uint32_t kShmMaxRingBytes = 1u << 30;
inline size_t shmFileBytes(uint32_t ringBytes) { return kShmDataOffset + 2 * size_t{ringBytes}; }

// What the connection around a ring adds to its waits.
class ShmWaitHooks {
 public:
  virtual ~ShmWaitHooks() = default;
  // Throws TransportError when waiting must stop (shut down, peer gone, deadline passed).
  virtual void checkWhileWaiting() = 0;
  // Wakes a peer that waits with kShmDoorbell.
  virtual void ringDoorbell() = 0;
};

// One direction of a connection, as seen by one side: it produces into `out` and consumes `in`.
class ShmRingEnd {
 public:
  // `control` and `data` lie in the shared mapping; `ringBytes` comes from this side's own records
  // (never from the shared region).
  ShmRingEnd(ShmRingControl* control, std::byte* data, uint32_t ringBytes)
      : control_(control), data_(data), size_(ringBytes) {}

  // Producer: copies `parts` in, in order, and publishes them, in steps of at most a quarter of
  // the ring (a frame that fits is published whole, with one wakeup); waits (spinning briefly,
  // then sleeping) while the ring is full.
  void write(std::span<const ConstBuffer> parts, ShmWaitHooks& hooks);
  // Consumer: copies up to `max` bytes out, waiting for at least one when `wait` (else 0 when none
  // has arrived). `doorbellWhenEmpty`: with !wait, asks the producer to ring the socket when it
  // next writes.
  size_t read(void* dst, size_t max, bool wait, ShmWaitHooks& hooks, bool doorbellWhenEmpty);
  // Bytes the consumer could read now (validated).
  uint32_t readable();
  // Consumer, between frames: spins for up to `max` until bytes are readable, with the producer's
  // doorbell taken back meanwhile (a producer that writes now rings nothing). Returns whether
  // bytes came. The caller must read (read(..., doorbellWhenEmpty = true)) afterwards either way,
  // which asks for the doorbell again when nothing came.
  // How often it spins: FramePollRhythm (frame_poll_rhythm.h).
  bool pollReadable(std::chrono::nanoseconds max);
  static constexpr unsigned kPollMissesBeforeRest = FramePollRhythm::kMissesBeforeRest;
  static constexpr unsigned kPollProbeEvery = FramePollRhythm::kProbeEvery;
  // Wakes this side's own sleeper on this ring (shutdown from another thread).
  void wakeAll();

  // Producer, with no write in progress: gives the ring's pages that hold no unread bytes back to
  // the kernel (MADV_REMOVE frees the shared file's pages; the next write there faults in a zeroed
  // one), so an idle session keeps only what its consumer has yet to read. Does nothing unless
  // mayGiveBack(). Returns the bytes of the ranges given back.
  size_t giveBackUnusedPages();
  // Consumer: asks the producer to give back its unused pages when it is next idle.
  void askProducerToGiveBack();
  // Producer: whether the consumer asked since the last call (the ask is taken).
  bool consumerAskedToGiveBack();
  // Bytes of the ring's data in memory now (mincore), whichever side wrote them.
  size_t residentBytes() const;
  // Producer: steps that published bytes so far, and whether giveBackUnusedPages has anything to
  // do (bytes written since, or pages it kept for bytes then unread).
  uint64_t writes() const { return writes_; }
  bool mayGiveBack() const { return writtenSinceGiveBack_ || keptUnread_; }

 private:
  uint32_t peerHead();  // validated
  uint32_t peerTail();  // validated
  // After moving `count`: wakes the side that waits for it.
  void wakePeer(ShmRingCount& count, ShmWaitHooks& hooks);

  ShmRingControl* control_;
  std::byte* data_;
  uint32_t size_;
  uint32_t head_ = 0;                  // producer's own head
  uint32_t tail_ = 0;                  // consumer's own tail
  bool writtenSinceGiveBack_ = false;  // producer's
  bool keptUnread_ = false;            // producer's: the last give-back kept unread bytes' pages
  uint64_t writes_ = 0;                // producer's
  // Adaptive spin before sleeping: longer while spins keep ending in data, shorter when they end in
  // sleep anyway.
  std::chrono::nanoseconds spin_{std::chrono::microseconds(20)};
  FramePollRhythm pollRhythm_;  // pollReadable's
};

}  // namespace gpupool::transport
