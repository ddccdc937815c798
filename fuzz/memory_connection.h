// An in-memory transport::Connection for fuzzing and replaying recorded traffic.
//
// The peer's side of the conversation is a fixed byte string in the TCP wire format (FrameHeader,
// message, bulk; see transport/tcp_transport.h), consumed as frames and bulk are received. When it
// runs out, receives throw TransportError exactly like a peer that closed the connection. Frames
// this side sends are appended to sent() in the same wire format, so a run can also be recorded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "transport/connection.h"

namespace gpupool::fuzz {

class MemoryConnection final : public transport::Connection {
 public:
  // `input` must outlive the connection.
  explicit MemoryConnection(std::span<const uint8_t> input, bool recordSent = false);

  void sendFrame(std::span<const transport::ConstBuffer> message,
                 std::span<const transport::ConstBuffer> bulk) override;
  transport::ReceivedFrame receiveFrame() override;
  void receiveBulk(void* dst, size_t size) override;
  void discardBulk(size_t size) override;
  uint64_t pendingBulk() const override { return pendingBulk_; }
  void shutdown() override { closed_ = true; }
  std::string kind() const override { return "memory"; }
  std::string peer() const override { return "memory"; }
  void setReceiveTimeoutMs(unsigned) override {}

  // Everything sent so far, as wire bytes (only when recordSent).
  const std::vector<uint8_t>& sent() const { return sent_; }
  // Frames sent so far.
  uint64_t framesSent() const { return framesSent_; }

 private:
  // Takes the next `size` input bytes; throws TransportError when fewer remain.
  std::span<const uint8_t> take(size_t size);

  std::span<const uint8_t> input_;
  size_t position_ = 0;
  bool closed_ = false;
  bool recordSent_;
  std::vector<uint8_t> sent_;
  uint64_t framesSent_ = 0;
  std::vector<uint64_t> message_;  // 8-byte aligned, as Cap'n Proto wants
  uint64_t pendingBulk_ = 0;
};

}  // namespace gpupool::fuzz
