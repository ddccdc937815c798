// RdmaConnection, part 4 of 4: receiving: packed SENDs unpacked, frames handed out (in place
// where they fit), and their bulk consumed inline, written, or read.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/pinned_memory.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/rdma_connection_internal.h"
#include "transport/rdma/rdma_queue_pair.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport::rdma {
void RdmaConnection::unpack(int slot, const WireHeader& packed) {
  auto* at = reinterpret_cast<const std::byte*>(&packed + 1);
  size_t left = packed.payloadBytes;
  uint32_t records = 0;
  while (left > 0) {
    auto* r = reinterpret_cast<const WireHeader*>(at);
    if (left < sizeof(WireHeader) || r->magic != kWireMagic ||
        (r->type != uint32_t(WireType::kFrameBegin) &&
         r->type != uint32_t(WireType::kBulkInline)) ||
        paddedRecordBytes(r->payloadBytes) > left - sizeof(WireHeader)) {
      fail(Kind::kMalformed, "malformed RDMA message (packed record)");
    }
    size_t length = sizeof(WireHeader) + paddedRecordBytes(r->payloadBytes);
    incoming_.push_back({slot, r});
    records++;
    at += length;
    left -= length;
  }
  if (records == 0) fail(Kind::kMalformed, "malformed RDMA message (empty packed message)");
  slotUsers_[slot] = records;
}

RdmaConnection::Incoming RdmaConnection::nextIncoming() {
  if (incoming_.empty()) {
    waitUntil([&] { return !incoming_.empty(); }, receiveTimeoutMs_, "message");
  }
  Incoming next = incoming_.front();
  incoming_.pop_front();
  return next;
}

ReceivedFrame RdmaConnection::receiveFrame() {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (pendingBulk_ != 0)
    throw TransportError(Kind::kMalformed, "previous frame's bulk bytes were not consumed");
  if (heldSlot_ >= 0) releaseReceive(std::exchange(heldSlot_, -1));
  frameOffer_ = BulkOffer{};
  dropForgottenRegistrations();
  Incoming in = nextIncoming();
  // An offer we made is for this frame only; taken once it starts, as the sending half may have
  // made it while we waited.
  frameOffer_ = std::exchange(offer_, BulkOffer{});
  const WireHeader& begin = *in.header;
  if (begin.type != uint32_t(WireType::kFrameBegin))
    fail(Kind::kMalformed, "malformed frame (expected a frame start)");
  uint64_t messageBytes = begin.a;
  uint64_t bulkBytes = begin.b;
  if (messageBytes > kMaxMessageBytes || messageBytes % 8 != 0) {
    fail(Kind::kMalformed, "malformed frame (message size " + std::to_string(messageBytes) + ")");
  }
  pendingBulk_ = bulkBytes;
  segment_ = BulkSegment{};
  auto* first = reinterpret_cast<const std::byte*>(&begin + 1);
  if (begin.payloadBytes == messageBytes &&
      reinterpret_cast<uintptr_t>(first) % alignof(uint64_t) == 0) {
    // The whole message is in one receive buffer, aligned: hand it out from there and keep the
    // buffer until the next receiveFrame.
    heldSlot_ = in.slot;
    stats_.messagesReadInPlace++;
    return {std::span<const std::byte>(first, messageBytes), bulkBytes};
  }
  size_t words = messageBytes / 8;
  if (message_.size() < words) message_.resize(words);
  auto* dst = reinterpret_cast<std::byte*>(message_.data());
  size_t got = 0;
  for (;;) {
    const WireHeader& h = *in.header;
    if (got + h.payloadBytes > messageBytes)
      fail(Kind::kMalformed, "malformed frame (message overrun)");
    std::memcpy(dst + got, reinterpret_cast<const std::byte*>(&h + 1), h.payloadBytes);
    got += h.payloadBytes;
    releaseReceive(in.slot);
    if (got == messageBytes) break;
    in = nextIncoming();
    if (in.header->type != uint32_t(WireType::kMessageData)) {
      fail(Kind::kMalformed, "malformed frame (message cut short)");
    }
  }
  return {std::as_bytes(std::span<const uint64_t>(message_.data(), words)), bulkBytes};
}

void RdmaConnection::loadSegment() {
  Incoming in = nextIncoming();
  int slot = in.slot;
  const WireHeader& h = *in.header;
  segment_ = BulkSegment{};
  segment_.active = true;
  if (h.type == uint32_t(WireType::kBulkWritten)) {
    // Trust only our own offer: the whole frame's bulk, exactly the size we offered.
    if (!frameOffer_.active || h.b != frameOffer_.size || h.b != pendingBulk_) {
      fail(Kind::kMalformed, "malformed frame (bulk written without a matching offer)");
    }
    segment_.written = true;
    segment_.bytes = frameOffer_.data;
    segment_.size = h.b;
    frameOffer_.active = false;
    releaseReceive(slot);
    return;
  }
  if (h.type == uint32_t(WireType::kBulkInline)) {
    segment_.slot = slot;
    segment_.bytes = reinterpret_cast<const std::byte*>(&h + 1);
    segment_.size = h.payloadBytes;
    if (segment_.size == 0) fail(Kind::kMalformed, "malformed frame (empty bulk piece)");
    return;
  }
  if (h.type != uint32_t(WireType::kBulkRemote) || h.b == 0)
    fail(Kind::kMalformed, "malformed frame (expected bulk)");
  segment_.remote = true;
  segment_.remoteAddress = h.a;
  segment_.rkey = h.rkey;
  segment_.size = h.b;
  releaseReceive(slot);  // the descriptor is copied out; its buffer can take the next SEND
}
void RdmaConnection::consumeBulk(std::byte* dst, size_t size) {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (size > pendingBulk_)
    throw TransportError(Kind::kMalformed, "bulk read past the end of the frame");
  std::optional<RegistrationLease> lease;
  bool stage = dst && staged(dst, size);
  size_t done = 0;
  while (done < size) {
    if (!segment_.active) loadSegment();
    uint64_t n = std::min<uint64_t>(size - done, segment_.size - segment_.offset);
    if (segment_.written) {
      // Already in place when read to the offered address; moved if the caller reads elsewhere.
      if (dst && dst + done != segment_.bytes + segment_.offset) {
        std::memmove(dst + done, segment_.bytes + segment_.offset, n);
      }
      stats_.bulkBytesReceivedWritten += n;
    } else if (!segment_.remote) {
      if (dst) std::memcpy(dst + done, segment_.bytes + segment_.offset, n);
      stats_.bulkBytesReceivedInline += n;
    } else if (dst && stage) {
      readStaged(dst + done, segment_.remoteAddress + segment_.offset, segment_.rkey, n);
      stats_.bulkBytesReceivedStaged += n;
    } else if (dst) {
      if (!lease) {
        lease = registrations_->acquire(dst + done, size - done, IBV_ACCESS_LOCAL_WRITE);
        if (!lease) fail(Kind::kUnavailable, "cannot register the receive buffer for RDMA READ");
        // acquire() covers [dst + done, dst + size): later pieces of this call reuse it.
      }
      readRemote(dst + done, lease->lkey(), segment_.remoteAddress + segment_.offset, segment_.rkey,
                 n);
      stats_.bulkBytesReceivedZeroCopy += n;
    }
    segment_.offset += n;
    done += n;
    pendingBulk_ -= n;
    if (segment_.offset == segment_.size) {
      segment_.active = false;
      if (segment_.written) {
        // Nothing to return: the writer waited for its own WRITE completions.
      } else if (segment_.remote) {
        // Control messages keep a reserved credit, so this never waits on the peer's data.
        OutSlot out;
        openSlot(out, WireType::kBulkDone, true);
        postSlot(out);
      } else {
        releaseReceive(segment_.slot);
      }
    }
  }
}

void RdmaConnection::receiveBulk(void* dst, size_t size) {
  if (size && !dst) throw TransportError(Kind::kMalformed, "receiveBulk: null destination");
  consumeBulk(static_cast<std::byte*>(dst), size);
}

void RdmaConnection::discardBulk(size_t size) { consumeBulk(nullptr, size); }

uint64_t RdmaConnection::pendingBulk() const {
  std::lock_guard lock(mutex_);
  return pendingBulk_;
}

}  // namespace gpupool::transport::rdma
