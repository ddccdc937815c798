// RdmaConnection, part 3 of 4: one-sided bulk: RDMA WRITE into a destination the peer offered,
// RDMA READ of what the peer announced, and the staging rings for pageable client memory.
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
// Keys for every part, for local access only: on the WRITE path the peer never gets a key to our
// memory. False when some part cannot be registered.
bool RdmaConnection::registerForWrite(std::span<const ConstBuffer> bulk,
                                      std::vector<RegistrationLease>& leases) {
  for (auto& part : bulk) {
    if (part.size == 0) {
      leases.emplace_back();
      continue;
    }
    auto lease = registrations_->acquire(part.data, part.size, 0);
    if (!lease) return false;
    leases.push_back(std::move(*lease));
  }
  return true;
}

// Posts RDMA WRITEs of the parts, one after another, to the offer from `offset` on, at most
// kMaxReadBytes each and kMaxWritesInFlight at once; leases[i] holds the keys of parts[i].
void RdmaConnection::postWrites(std::span<const ConstBuffer> parts,
                                const std::vector<RegistrationLease>& leases,
                                const BulkOffer& offer, uint64_t offset) {
  for (size_t i = 0; i < parts.size(); ++i) {
    auto* bytes = static_cast<const std::byte*>(parts[i].data);
    for (uint64_t done = 0; done < parts[i].size;) {
      if (writesPosted_ - writesDone_ >= kMaxWritesInFlight) {
        waitUntil([&] { return writesPosted_ - writesDone_ < kMaxWritesInFlight; },
                  receiveTimeoutMs_, "RDMA WRITE");
      }
      uint64_t n = std::min<uint64_t>(kMaxReadBytes, parts[i].size - done);
      postOneSided(IBV_WR_RDMA_WRITE, bytes + done, n, leases[i].lkey(),
                   offer.address + offset + done, offer.rkey);
      writesPosted_++;
      done += n;
    }
    offset += parts[i].size;
  }
}

void RdmaConnection::awaitWrites() {
  // A completed WRITE was acknowledged by the peer: our buffer is free for the caller again.
  waitUntil([&] { return writesDone_ == writesPosted_; }, receiveTimeoutMs_, "RDMA WRITE");
}

// Announces the frame's written bulk. Posted after the WRITEs on the same RC queue pair, so the
// peer sees it only once they are placed.
void RdmaConnection::finishWrites(uint64_t bulkBytes) {
  OutSlot out;
  openSlot(out, WireType::kBulkWritten, false);
  out.b = bulkBytes;
  postSlot(out);
  stats_.bulkBytesSentByWrite += bulkBytes;
  awaitWrites();
}
void RdmaConnection::expectBulkInto(void* dst, size_t size) {
  std::lock_guard lock(mutex_);
  checkUsable();
  offer_ = BulkOffer{};
  // Only pinned memory: its registration is cached for the range's life, so the key we hand out
  // stays valid until the reply has landed, and pageable pages are never exposed to the peer.
  if (!dst || size < kRdmaRendezvousBytes || !pinned_.find(dst, size)) return;
  auto lease = registrations_->acquire(dst, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!lease || !lease->cached()) return;
  OutSlot out;
  openSlot(out, WireType::kBulkDestination, false);
  out.a = reinterpret_cast<uintptr_t>(dst);
  out.b = size;
  out.rkey = lease->rkey();
  postSlot(out);
  offer_ = BulkOffer{true, static_cast<std::byte*>(dst), 0, size, 0};
}
// One signaled RDMA READ or WRITE of `n` bytes between local and remote memory.
void RdmaConnection::postOneSided(ibv_wr_opcode opcode, const std::byte* local, uint64_t n,
                                  uint32_t lkey, uint64_t remote, uint32_t rkey) {
  bool read = opcode == IBV_WR_RDMA_READ;
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), uint32_t(n), lkey};
  ibv_send_wr wr{};
  wr.wr_id = read ? kWrRead : kWrWrite;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int ret = ibv_post_send(id_->qp, &wr, &bad)) {
    // ibv_post_send returns the errno value; errno itself is not set.
    fail(Kind::kDisconnected, std::string("posting RDMA ") + (read ? "READ" : "WRITE") +
                                  " failed: " + std::strerror(ret));
  }
}

void RdmaConnection::postRead(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey,
                              uint64_t size) {
  uint64_t offset = 0;
  while (offset < size) {
    if (readsPosted_ - readsDone_ >= maxReadsInFlight_) {
      waitUntil([&] { return readsPosted_ - readsDone_ < maxReadsInFlight_; }, receiveTimeoutMs_,
                "RDMA READ");
    }
    uint64_t n = std::min(kMaxReadBytes, size - offset);
    postOneSided(IBV_WR_RDMA_READ, dst + offset, n, lkey, remote + offset, rkey);
    readsPosted_++;
    offset += n;
  }
}

void RdmaConnection::readRemote(std::byte* dst, uint32_t lkey, uint64_t remote, uint32_t rkey,
                                uint64_t size) {
  postRead(dst, lkey, remote, rkey, size);
  waitUntil([&] { return readsDone_ == readsPosted_; }, receiveTimeoutMs_, "RDMA READ");
}

RdmaConnection::StagingRing& RdmaConnection::ring(StagingRing& r, int access) {
  if (!r.mr) {
    r.bytes.resize(kRdmaStagingChunks * kRdmaStagingChunkBytes);
    r.mr.reset(ibv_reg_mr(pd_.get(), r.bytes.data(), r.bytes.size(), access));
    if (!r.mr)
      fail(Kind::kUnavailable,
           std::string("registering the staging ring: ") + std::strerror(errno));
  }
  return r;
}

bool RdmaConnection::staged(const void* p, size_t size) const {
  return stagePageable_ && !pinned_.find(p, size);
}

void RdmaConnection::sendStaged(OutSlot& out, const std::byte* bytes, size_t size) {
  StagingRing& r = ring(sendRing_, IBV_ACCESS_REMOTE_READ);
  for (size_t offset = 0; offset < size; offset += kRdmaStagingChunkBytes) {
    size_t n = std::min(kRdmaStagingChunkBytes, size - offset);
    uint64_t slot = sendRingNext_++ % kRdmaStagingChunks;
    // The chunk is free once the peer has read what was last announced from it.
    if (sendRingUsed_[slot]) {
      uint64_t needed = sendRingAnnounced_[slot] + 1;
      waitUntil([&] { return remoteBulkDone_ >= needed; }, receiveTimeoutMs_, "staging chunk");
    }
    std::byte* chunk = r.chunk(slot);
    std::memcpy(chunk, bytes + offset, n);
    openSlot(out, WireType::kBulkRemote, false);
    out.a = reinterpret_cast<uintptr_t>(chunk);
    out.b = n;
    out.rkey = r.mr->rkey;
    postSlot(out);
    sendRingUsed_[slot] = true;
    sendRingAnnounced_[slot] = remoteBulkAnnounced_++;
    stats_.bulkBytesSentStaged += n;
  }
}

void RdmaConnection::readStaged(std::byte* dst, uint64_t remote, uint32_t rkey, uint64_t size) {
  StagingRing& r = ring(receiveRing_, IBV_ACCESS_LOCAL_WRITE);
  uint64_t chunks = (size + kRdmaStagingChunkBytes - 1) / kRdmaStagingChunkBytes;
  auto length = [&](uint64_t i) {
    return std::min<uint64_t>(kRdmaStagingChunkBytes, size - i * kRdmaStagingChunkBytes);
  };
  // READs complete in the order they were posted (one RC send queue), so chunk i is in once
  // readsDone_ passes the ordinal of its READ.
  uint64_t firstRead = readsPosted_;
  uint64_t posted = 0;
  for (uint64_t copied = 0; copied < chunks; ++copied) {
    while (posted < chunks && posted - copied < kRdmaStagingChunks) {
      postRead(r.chunk(posted), r.mr->lkey, remote + posted * kRdmaStagingChunkBytes, rkey,
               length(posted));
      posted++;
    }
    waitUntil([&] { return readsDone_ > firstRead + copied; }, receiveTimeoutMs_, "RDMA READ");
    std::memcpy(dst + copied * kRdmaStagingChunkBytes, r.chunk(copied), length(copied));
  }
}

}  // namespace gpupool::transport::rdma
