// A Cap'n Proto message built where it will be sent from.
//
// Where the connection lends frame space (a registered RDMA SEND buffer, Connection::frameSpace),
// the message's first segment is that memory, so sendMessage()/startMessage() send it without a
// copy; further segments, and every segment on connections that lend nothing (TCP copies into the
// kernel anyway), come from the heap as with capnp::MallocMessageBuilder. Build it just before it
// is sent on the same connection (`queued` when it will go with queueMessage) and send nothing else
// in between (expectBulkInto and received bulk are fine); a message that is dropped unsent gives
// the space back clean. Where nothing is lent, the first segment is a zeroed buffer of the
// building thread's, held by one message of that thread at a time and reused by the next, so a
// small message costs no allocation: calloc and free of that segment took a tenth of a launch
// posted over shm.
#pragma once

#include <capnp/message.h>

#include <span>

#include "transport/connection.h"

namespace gpupool::protocol {

class OutgoingMessage final : public capnp::MessageBuilder {
 public:
  static constexpr unsigned kFirstHeapSegmentWords = 128;
  struct ThreadSegment;  // each thread's reusable first segment (outgoing_message.cc)

  explicit OutgoingMessage(transport::Connection& connection, bool queued = false);
  ~OutgoingMessage() noexcept(false) override;
  OutgoingMessage(const OutgoingMessage&) = delete;
  OutgoingMessage& operator=(const OutgoingMessage&) = delete;

  kj::ArrayPtr<capnp::word> allocateSegment(uint minimumSize) override;

 private:
  transport::Connection& connection_;
  kj::ArrayPtr<capnp::word> lent_;  // the connection's frame space, when it lent any
  bool lentReturned_ = false;       // handed to capnp as the first segment
  // The building thread's segment, when this message has it as its first segment.
  ThreadSegment* threadSegment_ = nullptr;
  // Only its segment allocator is used. Requests and replies are a few dozen words; capnp's
  // default first segment (1024 words, zeroed at each message) cost a launch posted over shm
  // more than building it did. Larger messages grow into more segments.
  capnp::MallocMessageBuilder heap_{kFirstHeapSegmentWords};
};

}  // namespace gpupool::protocol
