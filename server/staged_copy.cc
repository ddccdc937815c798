#include "server/staged_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "protocol/message_codec.h"

namespace gpupool::server {
namespace {

constexpr unsigned kSlots = BackendContext::kStagingSlots;
constexpr uint64_t kChunk = BackendContext::kStagingBytes;

// Waits until every slot a copy used has finished its transfer.
Status drainSlots(BackendContext& context, unsigned slotsUsed) {
  for (unsigned slot = 0; slot < slotsUsed; ++slot) {
    void* buffer = nullptr;
    if (Status s = context.stagingBuffer(slot, &buffer); !s.ok()) return s;
  }
  return Status::success();
}

// The chunks of [dst, dst + bytes), each filled into its slot by fill(slot buffer, offset, size)
// while the device copies the one before.
template <typename Fill>
std::optional<Status> stageChunksToDevice(BackendContext& context, uint64_t dst, uint64_t bytes,
                                          uint64_t stream, bool async, Fill&& fill) {
  unsigned slotsUsed = 0;
  for (uint64_t done = 0, chunk = 0; done < bytes; ++chunk) {
    unsigned slot = static_cast<unsigned>(chunk % kSlots);
    void* buffer = nullptr;
    if (Status s = context.stagingBuffer(slot, &buffer); !s.ok()) return s;
    if (!buffer) return std::nullopt;  // the backend has no staging (known at the first chunk)
    uint64_t n = std::min(bytes - done, kChunk);
    fill(buffer, done, n);
    if (Status s = context.stageToDevice(slot, dst + done, n, stream); !s.ok()) return s;
    slotsUsed = std::max(slotsUsed, slot + 1);
    done += n;
  }
  if (async) return Status::success();
  return drainSlots(context, slotsUsed);
}

}  // namespace

std::optional<Status> stagedHostToDevice(transport::Connection& connection, BackendContext& context,
                                         uint64_t dst, uint64_t bytes, uint64_t stream,
                                         bool async) {
  return stageChunksToDevice(
      context, dst, bytes, stream, async,
      [&](void* buffer, uint64_t, uint64_t n) { connection.receiveBulk(buffer, n); });
}

std::optional<Status> stagedHostToDevice(const std::byte* src, BackendContext& context,
                                         uint64_t dst, uint64_t bytes, uint64_t stream,
                                         bool async) {
  return stageChunksToDevice(
      context, dst, bytes, stream, async,
      [&](void* buffer, uint64_t offset, uint64_t n) { std::memcpy(buffer, src + offset, n); });
}

std::optional<Status> StagedDeviceRead::start(transport::Connection& connection,
                                              BackendContext& context, uint64_t src, uint64_t bytes,
                                              uint64_t stream,
                                              std::optional<StagedDeviceRead>* read) {
  if (!connection.streamsBulk()) return std::nullopt;
  void* buffer = nullptr;
  if (Status s = context.stagingBuffer(0, &buffer); !s.ok()) return s;
  if (!buffer) return std::nullopt;
  StagedDeviceRead staged(connection, context, src, bytes, stream);
  staged.chunks_ = (bytes + kChunk - 1) / kChunk;
  for (uint64_t chunk = 0; chunk < kSlots; ++chunk) {
    if (Status s = staged.stage(chunk); !s.ok()) return s;
  }
  if (Status s = context.stagingBuffer(0, &buffer); !s.ok()) {
    // Chunks still in flight finish on their own; the next use of their slots waits for them.
    return s;
  }
  read->emplace(staged);
  return Status::success();
}

uint64_t StagedDeviceRead::chunkBytes(uint64_t chunk) const {
  return std::min(kChunk, bytes_ - chunk * kChunk);
}

Status StagedDeviceRead::stage(uint64_t chunk) {
  if (chunk >= chunks_) return Status::success();
  unsigned slot = static_cast<unsigned>(chunk % kSlots);
  void* buffer = nullptr;
  if (Status s = context_.stagingBuffer(slot, &buffer); !s.ok()) return s;
  return context_.stageFromDevice(slot, src_ + chunk * kChunk, chunkBytes(chunk), stream_);
}

Status StagedDeviceRead::send(capnp::MessageBuilder& reply) {
  protocol::startMessage(connection_, reply, bytes_);
  Status failure;
  std::vector<uint8_t> zeros;
  for (uint64_t chunk = 0; chunk < chunks_; ++chunk) {
    unsigned slot = static_cast<unsigned>(chunk % kSlots);
    uint64_t n = chunkBytes(chunk);
    void* buffer = nullptr;
    if (failure.ok()) failure = context_.stagingBuffer(slot, &buffer);
    if (!failure.ok()) {
      zeros.resize(n);
      connection_.sendBulk(zeros.data(), n);
      continue;
    }
    connection_.sendBulk(buffer, n);
    // The send has copied the slot's bytes out: the slot takes the chunk after the next one.
    failure = stage(chunk + kSlots);
  }
  return failure;
}

}  // namespace gpupool::server
