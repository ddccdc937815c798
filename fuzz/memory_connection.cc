#include "fuzz/memory_connection.h"

#include <cstring>

#include "transport/tcp_transport.h"

namespace gpupool::fuzz {

using transport::TransportError;

MemoryConnection::MemoryConnection(std::span<const uint8_t> input, bool recordSent)
    : input_(input), recordSent_(recordSent) {}

std::span<const uint8_t> MemoryConnection::take(size_t size) {
  if (closed_) throw TransportError("connection shut down");
  if (size > input_.size() - position_) {
    position_ = input_.size();
    throw TransportError("connection closed by peer");
  }
  auto bytes = input_.subspan(position_, size);
  position_ += size;
  return bytes;
}

void MemoryConnection::sendFrame(std::span<const transport::ConstBuffer> message,
                                 std::span<const transport::ConstBuffer> bulk) {
  if (closed_) throw TransportError("connection shut down");
  transport::FrameHeader header{transport::kFrameMagic, 0, 0};
  size_t messageBytes = 0;
  for (auto& b : message) messageBytes += b.size;
  for (auto& b : bulk) header.bulkBytes += b.size;
  // Same refusal as the TCP transport, so an oversized reply is caught here too.
  if (messageBytes > transport::kMaxMessageBytes) throw TransportError("message too large to send");
  header.messageBytes = static_cast<uint32_t>(messageBytes);
  ++framesSent_;
  if (!recordSent_) return;
  auto append = [this](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    sent_.insert(sent_.end(), b, b + n);
  };
  append(&header, sizeof header);
  for (auto& b : message) append(b.data, b.size);
  for (auto& b : bulk) append(b.data, b.size);
}

transport::ReceivedFrame MemoryConnection::receiveFrame() {
  if (pendingBulk_ != 0) throw TransportError("previous frame's bulk bytes were not consumed");
  transport::FrameHeader header;
  std::memcpy(&header, take(sizeof header).data(), sizeof header);
  if (header.magic != transport::kFrameMagic) throw TransportError("malformed frame (bad magic)");
  if (header.messageBytes > transport::kMaxMessageBytes || header.messageBytes % 8 != 0) {
    throw TransportError("malformed frame (message size)");
  }
  auto bytes = take(header.messageBytes);
  size_t words = header.messageBytes / 8;
  message_.assign(words, 0);
  if (words) std::memcpy(message_.data(), bytes.data(), bytes.size());
  pendingBulk_ = header.bulkBytes;
  return {std::as_bytes(std::span<const uint64_t>(message_.data(), words)), header.bulkBytes};
}

void MemoryConnection::receiveBulk(void* dst, size_t size) {
  if (size > pendingBulk_) throw TransportError("bulk read past the end of the frame");
  auto bytes = take(size);
  if (size) std::memcpy(dst, bytes.data(), size);
  pendingBulk_ -= size;
}

void MemoryConnection::discardBulk(size_t size) {
  if (size > pendingBulk_) throw TransportError("bulk discard past the end of the frame");
  take(size);
  pendingBulk_ -= size;
}

}  // namespace gpupool::fuzz
