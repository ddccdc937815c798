// RdmaConnection, part 2 of 4: the send path: credits, SEND slots, frames built in place, small
// frames packed into shared SENDs, and bulk that has no offer to write into.
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
#include "transport/rdma/verbs_call.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport::rdma {
bool RdmaConnection::tryPostControl(WireType type) {
  if (credits() < 1 || freeSendSlots_.empty()) return false;
  OutSlot out;
  out.index = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  out.type = type;
  opened_++;
  postSlot(out);
  return true;
}

void RdmaConnection::maybeReturnCredits() {
  if (broken_ || shutdown_) return;
  // Half the window: often enough that the peer rarely waits, rarely enough to cost little.
  if (consumed_ - consumedReturned_ >= kRdmaRecvSlots / 2) tryPostControl(WireType::kCredit);
}

void RdmaConnection::openSlot(OutSlot& out, WireType type, bool control) {
  // Data keeps two credits in reserve and BulkDone one, so a BulkDone can always be sent, and a
  // credit return too, whatever the other half of a duplex connection has taken.
  int64_t need = control ? 2 : 3;
  if (credits() < need || freeSendSlots_.empty()) {
    if (credits() < need) stats_.creditWaits++;
    waitUntil([&] { return credits() >= need && !freeSendSlots_.empty(); }, receiveTimeoutMs_,
              "send credits");
  }
  out = OutSlot{};
  out.index = freeSendSlots_.back();
  freeSendSlots_.pop_back();
  out.type = type;
  opened_++;
}

void RdmaConnection::postSlot(OutSlot& out) {
  std::byte* buffer = sendBuffer(out.index);
  WireHeader h{};
  h.type = static_cast<uint32_t>(out.type);
  h.payloadBytes = static_cast<uint32_t>(out.used);
  h.consumed = consumed_;
  h.a = out.a;
  h.b = out.b;
  h.rkey = out.rkey;
  h.magic = kWireMagic;
  std::memcpy(buffer, &h, sizeof h);
  const uint32_t bytes = uint32_t(sizeof h + out.used);
  const bool inlined = bytes <= maxInlineBytes_;
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), bytes, sendMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kWrSend | uint64_t(out.index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  // Still signaled: the slot goes back to freeSendSlots_ on its completion either way.
  wr.send_flags = IBV_SEND_SIGNALED | (inlined ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  opened_--;
  sendUsed_[out.index] = out.used;
  if (int ret = ibv_post_send(id_->qp, &wr, &bad)) {
    freeSendSlots_.push_back(out.index);
    out.index = -1;
    fail(Kind::kDisconnected, verbsError("ibv_post_send", ret));
  }
  consumedReturned_ = consumed_;
  sent_++;
  stats_.sends++;
  if (inlined) stats_.inlineSends++;
  out.index = -1;
}

void RdmaConnection::appendInline(OutSlot& out, WireType continuation, const std::byte* data,
                                  size_t size) {
  while (size > 0) {
    if (out.index < 0) openSlot(out, continuation, false);
    size_t n = std::min(size, kRdmaSlotPayload - out.used);
    std::memcpy(sendBuffer(out.index) + sizeof(WireHeader) + out.used, data, n);
    out.used += n;
    data += n;
    size -= n;
    if (out.used == kRdmaSlotPayload) postSlot(out);
  }
}

std::span<std::byte> RdmaConnection::frameSpace(bool queued) {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (lent_.active) {
    // Lent before and neither sent nor returned: make it clean again.
    size_t from = lent_.offset - kFrameSpaceHeadroom;
    std::memset(lentPayload() + from, 0, kRdmaSlotPayload - from);
    lent_ = Lent{};
  }
  if (!queued) {
    if (reserved_.index < 0) openSlot(reserved_, WireType::kFrameBegin, false);
    lent_ = Lent{true, false, reserved_.index, kFrameSpaceHeadroom};
  } else {
    // Room for a record header, the headroom and a typical posted call, else a fresh buffer.
    constexpr size_t kMinQueuedSpace = 1024;
    if (packed_.index >= 0 && kRdmaSlotPayload - packed_.used <
                                  sizeof(WireHeader) + kFrameSpaceHeadroom + kMinQueuedSpace) {
      flushQueued();
    }
    if (packed_.index < 0) openSlot(packed_, WireType::kPacked, false);
    lent_ =
        Lent{true, true, packed_.index, packed_.used + sizeof(WireHeader) + kFrameSpaceHeadroom};
  }
  return {lentPayload() + lent_.offset, kRdmaSlotPayload - lent_.offset};
}

void RdmaConnection::returnFrameSpace(size_t written) {
  std::lock_guard lock(mutex_);
  if (!lent_.active) return;
  // Not sent from there: clean what the builder wrote.
  size_t from = lent_.offset - kFrameSpaceHeadroom;
  std::memset(lentPayload() + from, 0,
              std::min(written + kFrameSpaceHeadroom, kRdmaSlotPayload - from));
  lent_ = Lent{};
}

bool RdmaConnection::builtInLent(std::span<const ConstBuffer> message) {
  return lent_.active && message.size() == 2 && message[0].size == kFrameSpaceHeadroom &&
         message[1].data == lentPayload() + lent_.offset &&
         message[1].size <= kRdmaSlotPayload - lent_.offset;
}

// A message that cannot leave from the span lent in the packed buffer (it outgrew it, or another
// send comes first): copies it out and cleans the span before the packed buffer can be posted and
// reused.
std::span<const ConstBuffer> RdmaConnection::rescueLent(std::span<const ConstBuffer> message,
                                                        std::vector<std::byte>& copy,
                                                        ConstBuffer& whole) {
  std::byte* begin = lentPayload() + lent_.offset;
  std::byte* end = lentPayload() + kRdmaSlotPayload;
  size_t written = 0;
  bool inside = false;
  for (auto& part : message) {
    auto* bytes = static_cast<const std::byte*>(part.data);
    if (bytes >= begin && bytes < end) {
      inside = true;
      written = std::max(written, size_t(bytes + part.size - begin));
    }
  }
  if (inside) {
    for (auto& part : message) {
      auto* bytes = static_cast<const std::byte*>(part.data);
      copy.insert(copy.end(), bytes, bytes + part.size);
    }
    whole = ConstBuffer{copy.data(), copy.size()};
    message = std::span(&whole, 1);
  } else {
    written = size_t(end - begin);  // unknown: all of it
  }
  std::memset(begin - kFrameSpaceHeadroom, 0, written + kFrameSpaceHeadroom);
  lent_ = Lent{};
  return message;
}

void RdmaConnection::postFrameBegin(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  size_t messageBytes = 0;
  for (auto& part : message) messageBytes += part.size;
  if (messageBytes > kMaxMessageBytes)
    throw TransportError(Kind::kMalformed, "message too large to send");
  if (!lent_.queued && builtInLent(message) && lent_.slot == reserved_.index) {
    // Built in place: only the part before it (a one-segment table) is written.
    std::memcpy(lentPayload(), message[0].data, kFrameSpaceHeadroom);
    lent_ = Lent{};
    OutSlot out = std::exchange(reserved_, OutSlot{});
    out.type = WireType::kFrameBegin;
    out.a = messageBytes;
    out.b = bulkBytes;
    out.used = messageBytes;
    postSlot(out);
    stats_.messagesSentInPlace++;
    return;
  }
  OutSlot out;
  openSlot(out, WireType::kFrameBegin, false);
  out.a = messageBytes;
  out.b = bulkBytes;
  for (auto& part : message) {
    appendInline(out, WireType::kMessageData, static_cast<const std::byte*>(part.data), part.size);
  }
  if (out.index >= 0) postSlot(out);
}

// What sendFrame and startFrame both do first: queued frames leave, the message goes out, and the
// peer's offer, which is for this frame only whatever it carries, is taken.
RdmaConnection::BulkOffer RdmaConnection::beginFrame(std::span<const ConstBuffer> message,
                                                     uint64_t bulkBytes) {
  checkUsable();
  if (streamLeft_)
    throw TransportError(Kind::kMalformed, "a frame started inside a streamed frame");
  std::vector<std::byte> rescued;
  ConstBuffer whole{};
  if (lent_.active && lent_.queued) message = rescueLent(message, rescued, whole);
  flushQueued();
  dropForgottenRegistrations();
  BulkOffer offer = std::exchange(peerOffer_, BulkOffer{});
  postFrameBegin(message, bulkBytes);
  return offer;
}

// Between frames, and only while no key of ours is in use: the peer may still READ what we
// announced or WRITE into what we offered, and our own WRITEs may still be reading our memory.
// Deregistering under them would put the QP in error (a freed range is the caller's to stop
// using; its pages stay pinned, not reachable by anyone else, until this runs).
void RdmaConnection::dropForgottenRegistrations() {
  // Both halves count: the receiving one may be reading, or waiting for bytes written into its
  // offer, while the sending one starts a frame.
  if (remoteBulkDone_ == remoteBulkAnnounced_ && !offer_.active && !frameOffer_.active &&
      writesDone_ == writesPosted_ && readsDone_ == readsPosted_) {
    registrations_->dropForgotten();
  }
}

void RdmaConnection::sendFrame(std::span<const ConstBuffer> message,
                               std::span<const ConstBuffer> bulk) {
  std::lock_guard lock(mutex_);
  sendWhole(message, bulk);
}

void RdmaConnection::sendWhole(std::span<const ConstBuffer> message,
                               std::span<const ConstBuffer> bulk) {
  uint64_t bulkBytes = 0;
  for (auto& part : bulk) bulkBytes += part.size;
  BulkOffer offer = beginFrame(message, bulkBytes);
  if (offer.active && offer.size == bulkBytes) {
    std::vector<RegistrationLease> leases;
    if (registerForWrite(bulk, leases)) {
      postWrites(bulk, leases, offer, 0);
      finishWrites(bulkBytes);
      return;
    }
  }
  sendUnoffered(bulk);
}

// Bulk parts without an offer to write into. Returns once the peer has read every part announced
// for READ: until then that memory must stay registered and unchanged.
void RdmaConnection::sendUnoffered(std::span<const ConstBuffer> bulk) {
  std::vector<RegistrationLease> leases;
  uint64_t announcedBefore = remoteBulkAnnounced_;
  OutSlot out;
  for (auto& part : bulk) sendPart(out, part, leases);
  if (out.index >= 0) postSlot(out);
  if (remoteBulkAnnounced_ != announcedBefore) {
    waitUntil([&] { return remoteBulkDone_ >= remoteBulkAnnounced_; }, receiveTimeoutMs_,
              "bulk read by peer");
  }
}

// One bulk part without an offer: staged (client pageable memory), announced for READ, or inline.
void RdmaConnection::sendPart(OutSlot& out, const ConstBuffer& part,
                              std::vector<RegistrationLease>& leases) {
  auto* bytes = static_cast<const std::byte*>(part.data);
  if (part.size >= kRdmaRendezvousBytes && staged(part.data, part.size)) {
    if (out.index >= 0) postSlot(out);
    sendStaged(out, bytes, part.size);
    return;
  }
  if (part.size >= kRdmaRendezvousBytes) {
    auto lease = registrations_->acquire(part.data, part.size, IBV_ACCESS_REMOTE_READ);
    if (lease) {
      if (out.index >= 0) postSlot(out);
      openSlot(out, WireType::kBulkRemote, false);
      out.a = reinterpret_cast<uintptr_t>(part.data);
      out.b = part.size;
      out.rkey = lease->rkey();
      postSlot(out);
      leases.push_back(std::move(*lease));
      remoteBulkAnnounced_++;
      stats_.bulkBytesSentZeroCopy += part.size;
      return;
    }
    // Unregistrable memory (e.g. odd mappings): still correct, just copied.
  }
  appendInline(out, WireType::kBulkInline, bytes, part.size);
  stats_.bulkBytesSentInline += part.size;
}

void RdmaConnection::startFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  std::lock_guard lock(mutex_);
  BulkOffer offer = beginFrame(message, bulkBytes);
  streamOffer_ = offer.active && offer.size == bulkBytes ? offer : BulkOffer{};
  streamLeft_ = bulkBytes;
}

void RdmaConnection::sendBulk(const void* data, size_t size) {
  std::lock_guard lock(mutex_);
  checkUsable();
  if (size > streamLeft_)
    throw TransportError(Kind::kMalformed, "sendBulk past the frame's announced bulk");
  if (size == 0) return;
  std::vector<RegistrationLease> leases;
  ConstBuffer part{data, size};
  uint64_t offset = streamOffer_.size - streamLeft_;
  if (streamOffer_.active && offset == 0 && !registerForWrite(std::span(&part, 1), leases)) {
    streamOffer_ = BulkOffer{};  // nothing written yet: the frame goes the READ way instead
  }
  if (streamOffer_.active) {
    if (leases.empty() && !registerForWrite(std::span(&part, 1), leases)) {
      fail(Kind::kUnavailable,
           "cannot register streamed bulk for RDMA WRITE");  // half written: cannot switch now
    }
    postWrites(std::span(&part, 1), leases, streamOffer_, offset);
    streamLeft_ -= size;
    if (streamLeft_ == 0) {
      finishWrites(streamOffer_.size);
      streamOffer_ = BulkOffer{};
    } else {
      awaitWrites();  // the caller reuses `data` once we return
    }
    return;
  }
  streamLeft_ -= size;
  sendUnoffered(std::span(&part, 1));
}

// A record of a packed SEND at `at`: its header, then `parts` (all of its `bytes`-long payload, or
// only its start when the rest is already in place), then the payload's padding to whole words.
void RdmaConnection::writeRecord(std::byte* at, WireType type, size_t bytes, size_t messageBytes,
                                 size_t bulkBytes, std::span<const ConstBuffer> parts) {
  WireHeader h{};
  h.type = static_cast<uint32_t>(type);
  h.payloadBytes = static_cast<uint32_t>(bytes);
  h.a = messageBytes;
  h.b = bulkBytes;
  h.magic = kWireMagic;
  std::memcpy(at, &h, sizeof h);
  at += sizeof h;
  for (auto& part : parts) {
    if (part.size) std::memcpy(at, part.data, part.size);
    at += part.size;
  }
  std::memset(at, 0, paddedRecordBytes(bytes) - bytes);
}

void RdmaConnection::sendFrameLater(std::span<const ConstBuffer> message,
                                    std::span<const ConstBuffer> bulk) {
  std::lock_guard lock(mutex_);
  checkUsable();
  size_t messageBytes = 0, bulkBytes = 0;
  for (auto& part : message) messageBytes += part.size;
  for (auto& part : bulk) bulkBytes += part.size;
  size_t bulkRecord = bulkBytes ? sizeof(WireHeader) + paddedRecordBytes(bulkBytes) : 0;
  if (lent_.queued && builtInLent(message) && lent_.slot == packed_.index &&
      lent_.offset == packed_.used + sizeof(WireHeader) + kFrameSpaceHeadroom &&
      bulkRecord <= kRdmaSlotPayload - lent_.offset - message[1].size) {
    // Built in place, after the record header and the table's room: write just those two (the
    // segment that follows is already there, whole words, so no padding either).
    std::byte* at = sendBuffer(packed_.index) + sizeof(WireHeader) + packed_.used;
    writeRecord(at, WireType::kFrameBegin, messageBytes, messageBytes, bulkBytes, message.first(1));
    lent_ = Lent{};
    packed_.used += sizeof(WireHeader) + messageBytes;
    if (bulkBytes) {
      writeRecord(at + sizeof(WireHeader) + messageBytes, WireType::kBulkInline, bulkBytes,
                  messageBytes, bulkBytes, bulk);
      packed_.used += bulkRecord;
    }
    queuedBytes_ += messageBytes + bulkBytes;
    stats_.framesPacked++;
    stats_.messagesSentInPlace++;
    stats_.bulkBytesSentInline += bulkBytes;
    return;
  }
  std::vector<std::byte> rescued;
  ConstBuffer whole{};
  if (lent_.active && lent_.queued) message = rescueLent(message, rescued, whole);
  size_t need = sizeof(WireHeader) + paddedRecordBytes(messageBytes) + bulkRecord;
  if (need > kRdmaSlotPayload || messageBytes % 8 != 0) {
    sendWhole(message, bulk);  // too big to share a SEND (flushes what is queued first)
    return;
  }
  if (packed_.index >= 0 && packed_.used + need > kRdmaSlotPayload) flushQueued();
  if (packed_.index < 0) openSlot(packed_, WireType::kPacked, false);
  std::byte* at = sendBuffer(packed_.index) + sizeof(WireHeader) + packed_.used;
  writeRecord(at, WireType::kFrameBegin, messageBytes, messageBytes, bulkBytes, message);
  if (bulkBytes) {
    writeRecord(at + sizeof(WireHeader) + paddedRecordBytes(messageBytes), WireType::kBulkInline,
                bulkBytes, messageBytes, bulkBytes, bulk);
  }
  packed_.used += need;
  queuedBytes_ += messageBytes + bulkBytes;
  stats_.framesPacked++;
  stats_.bulkBytesSentInline += bulkBytes;
}

void RdmaConnection::flush() {
  std::lock_guard lock(mutex_);
  flushQueued();
}

size_t RdmaConnection::queuedBytes() const {
  std::lock_guard lock(mutex_);
  return queuedBytes_;
}

void RdmaConnection::flushQueued() {
  if (packed_.index < 0) return;
  checkUsable();
  if (packed_.used == 0) {
    // Opened for a message that went another way: nothing to send. Give the (clean) buffer back
    // unless it is lent right now.
    if (!(lent_.active && lent_.queued)) {
      freeSendSlots_.push_back(std::exchange(packed_.index, -1));
      opened_--;
      wakeWaiters();  // a BulkDone of the receiving half may wait for this slot
    }
    return;
  }
  postSlot(packed_);
  queuedBytes_ = 0;
}

}  // namespace gpupool::transport::rdma
