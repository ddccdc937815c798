// The frame format of the byte-stream transports (TCP, TLS), written once: frame header, message,
// bulk; frames queued for one write; buffered receive of small parts; bulk read straight into its
// destination; bulk sent in pieces (startFrame/sendBulk).
//
// Frame layout on the wire: FrameHeader (16 bytes, little endian), message bytes, bulk bytes.
// A transport derives from FramedConnection and supplies the byte stream: writeAll and readSome.
// The send side (writeAll, outbox_, parts_, bulkOwed_) and the receive side (readSome, message_,
// pendingBulk_, inBuffer_) share no state, so the connection is full duplex when writeAll and
// readSome may run at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/connection.h"

namespace gpupool::transport {

struct FrameHeader {
  uint32_t magic;
  uint32_t messageBytes;
  uint64_t bulkBytes;
};
static_assert(sizeof(FrameHeader) == 16);
constexpr uint32_t kFrameMagic = 0x4c505047;  // "GPPL"

class FramedConnection : public Connection {
 public:
  void sendFrame(std::span<const ConstBuffer> message, std::span<const ConstBuffer> bulk) override;
  void sendFrameLater(std::span<const ConstBuffer> message,
                      std::span<const ConstBuffer> bulk) override;
  void flush() override;
  size_t queuedBytes() const override { return outbox_.size(); }

  bool streamsBulk() const override { return true; }
  void startFrame(std::span<const ConstBuffer> message, uint64_t bulkBytes) override;
  void sendBulk(const void* data, size_t size) override;

  ReceivedFrame receiveFrame() override;
  void receiveBulk(void* dst, size_t size) override;
  void discardBulk(size_t size) override;
  uint64_t pendingBulk() const override { return pendingBulk_; }
  bool frameArrived() override;
  void releaseIdleMemory() override;

 protected:
  // Writes every byte of `parts`, in order. Throws TransportError.
  virtual void writeAll(std::span<const ConstBuffer> parts) = 0;
  // Reads between 1 and `max` bytes into `dst`, waiting as the transport's receive timeout says.
  // Throws TransportError (peer gone, timeout).
  virtual size_t readSome(void* dst, size_t max) = 0;
  // Reads up to `max` bytes that have already arrived, without waiting: 0 when none have. Throws
  // TransportError when the peer is gone.
  virtual size_t readAvailable(void* dst, size_t max) = 0;

 private:
  // Appends a header for `message` and `bulkBytes`, then `message`, to the outbox.
  void queueHead(std::span<const ConstBuffer> message, uint64_t bulkBytes);
  // Writes the outbox followed by `more`, then empties the outbox.
  void writeWithOutbox(std::span<const ConstBuffer> more);
  void requireNoBulkOwed() const;
  void readExactly(void* dst, size_t size);
  // Makes inBuffer_ hold at least `bytes` from inBegin_ on, moving unread bytes to its start.
  void reserveInput(size_t bytes);

  std::vector<uint8_t> outbox_;     // queued frames (and the head of a streamed frame)
  std::vector<ConstBuffer> parts_;  // gather list, reused across sends
  uint64_t bulkOwed_ = 0;           // bulk bytes a streamed frame still has to send

  std::vector<uint64_t> message_;  // 8-byte aligned receive buffer, reused across frames
  uint64_t pendingBulk_ = 0;
  // Small reads land here. Allocated when needed and given back when the connection is idle, so a
  // server holding thousands of idle connections does not hold a buffer for each.
  std::unique_ptr<uint8_t[]> inBuffer_;
  size_t inCapacity_ = 0;
  size_t inBegin_ = 0, inEnd_ = 0;  // unread bytes of inBuffer_
};

}  // namespace gpupool::transport
