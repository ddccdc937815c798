#include "protocol/outgoing_message.h"

#include <cstring>

namespace gpupool::protocol {

// Each thread's reusable first segment: zeroed (static storage), handed to one message at a time,
// and zeroed again where that message wrote, as capnp builds only in zeroed memory.
struct OutgoingMessage::ThreadSegment {
  capnp::word words[kFirstHeapSegmentWords];
  bool taken = false;
};

namespace {

thread_local OutgoingMessage::ThreadSegment threadSegment;

// The words capnp wrote into `first`, when it is the message's first segment: its used part.
size_t wordsWrittenInto(capnp::MessageBuilder& message, const capnp::word* first) {
  auto segments = message.getSegmentsForOutput();
  return segments.size() && segments[0].begin() == first ? segments[0].size() : 0;
}

}  // namespace

OutgoingMessage::OutgoingMessage(transport::Connection& connection, bool queued)
    : connection_(connection) {
  std::span<std::byte> space = connection.frameSpace(queued);
  if (space.size() >= sizeof(capnp::word)) {
    lent_ = kj::ArrayPtr<capnp::word>(reinterpret_cast<capnp::word*>(space.data()),
                                      space.size() / sizeof(capnp::word));
  }
}

OutgoingMessage::~OutgoingMessage() noexcept(false) {
  if (threadSegment_ != nullptr) {
    std::memset(threadSegment_->words, 0,
                wordsWrittenInto(*this, threadSegment_->words) * sizeof(capnp::word));
    threadSegment_->taken = false;
  }
  if (lent_.size() == 0) return;
  // What capnp wrote into the lent space: the used part of the first segment.
  size_t used = lentReturned_ ? wordsWrittenInto(*this, lent_.begin()) * sizeof(capnp::word) : 0;
  connection_.returnFrameSpace(used);
}

kj::ArrayPtr<capnp::word> OutgoingMessage::allocateSegment(uint minimumSize) {
  const bool first = !lentReturned_;
  lentReturned_ = true;  // the lent space (or the thread's segment) is only ever the first segment
  if (first && lent_.size() >= minimumSize && lent_.size() > 0) return lent_;
  if (first && lent_.size() == 0 && minimumSize <= kFirstHeapSegmentWords) {
    ThreadSegment* mine = &threadSegment;
    if (!mine->taken) {
      mine->taken = true;
      threadSegment_ = mine;
      return kj::ArrayPtr<capnp::word>(mine->words, kFirstHeapSegmentWords);
    }
  }
  return heap_.allocateSegment(minimumSize);
}

}  // namespace gpupool::protocol
