// Cap'n Proto messages on a transport::Connection.
//
// Sending writes the standard Cap'n Proto stream framing (segment table, then segments) gathered
// straight from the builder's segments; receiving reads the message in place from the connection's
// receive buffer with a FlatArrayMessageReader, with limits that bound what a hostile peer can
// make us traverse.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "transport/connection.h"

namespace gpupool::protocol {

// Reader limits: ~64 MiB of traversal and a modest nesting depth.
capnp::ReaderOptions readerOptions();

// Sends `message` followed by `bulk` as one frame. Throws transport::TransportError.
void sendMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                 std::span<const transport::ConstBuffer> bulk = {});

// Sends `message` as the head of a frame whose `bulkBytes` of bulk follow with
// Connection::sendBulk (where Connection::streamsBulk()). Throws transport::TransportError.
void startMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                  uint64_t bulkBytes);

// Queues `message` and `bulk` (copied) to leave with the next send or flush on `connection`.
void queueMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                  std::span<const transport::ConstBuffer> bulk = {});

// A received message. Valid until the next receive on the same connection.
class IncomingMessage {
 public:
  // Throws transport::TransportError on a channel failure and kj::Exception (caught by callers as
  // "malformed message") when the bytes are not a valid message.
  explicit IncomingMessage(transport::Connection& connection);

  // Decodes on first use: a malformed message throws kj::Exception here, after the frame itself
  // has been consumed, so the caller can answer it and go on.
  template <typename T>
  typename T::Reader root() {
    if (!reader_) reader_.emplace(words_, readerOptions());
    return reader_->getRoot<T>();
  }
  uint64_t bulkBytes() const { return bulkBytes_; }
  // The message's words, copied (to outlive the next receive).
  kj::Array<capnp::word> copyWords() const {
    // Words cannot be copied one by one (capnp::word is not copyable): copied as bytes.
    auto copy = kj::heapArray<capnp::word>(words_.size());
    if (words_.size())
      std::memcpy(copy.begin(), words_.begin(), words_.size() * sizeof(capnp::word));
    return copy;
  }

 private:
  kj::ArrayPtr<const capnp::word> words_;
  // In place, not on the heap: one is made per frame, and a posted launch is a frame.
  std::optional<capnp::FlatArrayMessageReader> reader_;
  uint64_t bulkBytes_;
};

}  // namespace gpupool::protocol
