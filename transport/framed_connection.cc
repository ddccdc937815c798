#include "transport/framed_connection.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace gpupool::transport {
namespace {

constexpr size_t kInBufferBytes = 64 * 1024;

void checkHeader(const FrameHeader& header) {
  if (header.magic != kFrameMagic)
    throw TransportError(TransportError::Kind::kMalformed, "malformed frame (bad magic)");
  if (header.messageBytes > kMaxMessageBytes || header.messageBytes % 8 != 0) {
    throw TransportError(
        TransportError::Kind::kMalformed,
        "malformed frame (message size " + std::to_string(header.messageBytes) + ")");
  }
}

size_t totalSize(std::span<const ConstBuffer> parts) {
  size_t n = 0;
  for (auto& b : parts) n += b.size;
  return n;
}

}  // namespace

void FramedConnection::queueHead(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  size_t messageBytes = totalSize(message);
  if (messageBytes > kMaxMessageBytes)
    throw TransportError(TransportError::Kind::kMalformed, "message too large to send");
  FrameHeader header{kFrameMagic, static_cast<uint32_t>(messageBytes), bulkBytes};
  auto append = [this](const void* p, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    outbox_.insert(outbox_.end(), bytes, bytes + n);
  };
  append(&header, sizeof header);
  for (auto& b : message) append(b.data, b.size);
}

void FramedConnection::writeWithOutbox(std::span<const ConstBuffer> more) {
  parts_.clear();
  if (!outbox_.empty()) parts_.push_back({outbox_.data(), outbox_.size()});
  for (auto& b : more) {
    if (b.size) parts_.push_back(b);
  }
  // Emptied before writing: after a failed write the connection is unusable anyway.
  struct ClearOutbox {
    std::vector<uint8_t>& outbox;
    ~ClearOutbox() { outbox.clear(); }
  } clear{outbox_};
  writeAll(parts_);
}

void FramedConnection::requireNoBulkOwed() const {
  if (bulkOwed_ != 0)
    throw TransportError(TransportError::Kind::kMalformed,
                         "the previous frame's bulk bytes were not all sent");
}

void FramedConnection::sendFrame(std::span<const ConstBuffer> message,
                                 std::span<const ConstBuffer> bulk) {
  requireNoBulkOwed();
  // Queued frames, this header and message go in one write with the bulk, gathered in place.
  queueHead(message, totalSize(bulk));
  writeWithOutbox(bulk);
}

void FramedConnection::sendFrameLater(std::span<const ConstBuffer> message,
                                      std::span<const ConstBuffer> bulk) {
  requireNoBulkOwed();
  queueHead(message, totalSize(bulk));
  for (auto& b : bulk) {
    const auto* bytes = static_cast<const uint8_t*>(b.data);
    outbox_.insert(outbox_.end(), bytes, bytes + b.size);
  }
}

void FramedConnection::flush() {
  requireNoBulkOwed();
  if (!outbox_.empty()) writeWithOutbox({});
}

void FramedConnection::startFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes) {
  requireNoBulkOwed();
  // The head waits for the first piece of bulk, so the two leave in one write.
  queueHead(message, bulkBytes);
  bulkOwed_ = bulkBytes;
  if (bulkBytes == 0) writeWithOutbox({});
}

void FramedConnection::sendBulk(const void* data, size_t size) {
  if (size > bulkOwed_)
    throw TransportError(TransportError::Kind::kMalformed, "bulk sent past the end of the frame");
  bulkOwed_ -= size;
  ConstBuffer piece{data, size};
  writeWithOutbox(std::span(&piece, 1));
}

ReceivedFrame FramedConnection::receiveFrame() {
  if (pendingBulk_ != 0)
    throw TransportError(TransportError::Kind::kMalformed,
                         "previous frame's bulk bytes were not consumed");
  FrameHeader header;
  readExactly(&header, sizeof header);
  checkHeader(header);
  size_t words = header.messageBytes / 8;
  if (message_.size() < words) message_.resize(words);
  readExactly(message_.data(), header.messageBytes);
  pendingBulk_ = header.bulkBytes;
  return {std::as_bytes(std::span<const uint64_t>(message_.data(), words)), header.bulkBytes};
}

bool FramedConnection::frameArrived() {
  if (pendingBulk_ != 0)
    throw TransportError(TransportError::Kind::kMalformed,
                         "previous frame's bulk bytes were not consumed");
  for (;;) {
    size_t unread = inEnd_ - inBegin_;
    size_t needed = sizeof(FrameHeader);
    if (unread >= sizeof(FrameHeader)) {
      FrameHeader header;
      std::memcpy(&header, inBuffer_.get() + inBegin_, sizeof header);
      checkHeader(header);
      needed += header.messageBytes;
    }
    if (unread >= needed) return true;
    // One read usually takes in a whole frame. Past the usual size the buffer grows with what has
    // arrived (at most doubling), so a peer announcing a large message pays for it in bytes first.
    reserveInput(std::max(kInBufferBytes, std::min(needed, 2 * unread)));
    size_t n = readAvailable(inBuffer_.get() + inEnd_, inCapacity_ - inEnd_);
    if (n == 0) return false;
    inEnd_ += n;
  }
}

void FramedConnection::releaseIdleMemory() {
  if (inBegin_ != inEnd_ || pendingBulk_ != 0) return;
  inBuffer_.reset();
  inCapacity_ = inBegin_ = inEnd_ = 0;
  std::vector<uint64_t>().swap(message_);
}

void FramedConnection::receiveBulk(void* dst, size_t size) {
  if (size > pendingBulk_)
    throw TransportError(TransportError::Kind::kMalformed, "bulk read past the end of the frame");
  readExactly(dst, size);
  pendingBulk_ -= size;
}

void FramedConnection::discardBulk(size_t size) {
  if (size > pendingBulk_)
    throw TransportError(TransportError::Kind::kMalformed,
                         "bulk discard past the end of the frame");
  char scratch[64 * 1024];
  while (size > 0) {
    size_t n = std::min(size, sizeof scratch);
    readExactly(scratch, n);
    size -= n;
    pendingBulk_ -= n;
  }
}

// Reads through a small buffer so a frame's header and message usually cost one system call
// together; large reads (bulk) go straight into their destination.
void FramedConnection::readExactly(void* dst, size_t size) {
  if (size == 0) return;  // dst may be null for an empty read
  auto* out = static_cast<uint8_t*>(dst);
  if (size_t buffered = std::min(size, inEnd_ - inBegin_)) {
    std::memcpy(out, inBuffer_.get() + inBegin_, buffered);
    inBegin_ += buffered;
    out += buffered;
    size -= buffered;
  }
  if (size == 0) return;
  if (size >= kInBufferBytes / 2) {
    while (size > 0) {
      size_t n = readSome(out, size);
      out += n;
      size -= n;
    }
    return;
  }
  reserveInput(kInBufferBytes);  // empty now: from its start
  while (inEnd_ < size) inEnd_ += readSome(inBuffer_.get() + inEnd_, inCapacity_ - inEnd_);
  std::memcpy(out, inBuffer_.get(), size);
  inBegin_ = size;
}

void FramedConnection::reserveInput(size_t bytes) {
  if (inBegin_ == inEnd_) inBegin_ = inEnd_ = 0;
  if (inCapacity_ - inBegin_ >= bytes) return;
  size_t unread = inEnd_ - inBegin_;
  if (inCapacity_ >= bytes) {
    if (unread) std::memmove(inBuffer_.get(), inBuffer_.get() + inBegin_, unread);
  } else {
    auto grown = std::make_unique_for_overwrite<uint8_t[]>(bytes);
    if (unread) std::memcpy(grown.get(), inBuffer_.get() + inBegin_, unread);
    inBuffer_ = std::move(grown);
    inCapacity_ = bytes;
  }
  inBegin_ = 0;
  inEnd_ = unread;
}

}  // namespace gpupool::transport
