#include "protocol/outgoing_message.h"

namespace gpupool::protocol {

OutgoingMessage::OutgoingMessage(transport::Connection& connection, bool queued)
    : connection_(connection) {
  std::span<std::byte> space = connection.frameSpace(queued);
  if (space.size() >= sizeof(capnp::word)) {
    lent_ = kj::ArrayPtr<capnp::word>(reinterpret_cast<capnp::word*>(space.data()),
                                      space.size() / sizeof(capnp::word));
  }
}

OutgoingMessage::~OutgoingMessage() noexcept(false) {
  if (lent_.size() == 0) return;
  // What capnp wrote into the lent space: the used part of the first segment.
  size_t used = 0;
  if (lentReturned_) {
    auto segments = getSegmentsForOutput();
    if (segments.size() && segments[0].begin() == lent_.begin()) {
      used = segments[0].size() * sizeof(capnp::word);
    }
  }
  connection_.returnFrameSpace(used);
}

kj::ArrayPtr<capnp::word> OutgoingMessage::allocateSegment(uint minimumSize) {
  if (!lentReturned_ && lent_.size() >= minimumSize && lent_.size() > 0) {
    lentReturned_ = true;
    return lent_;
  }
  lentReturned_ = true;  // the lent space is only ever the first segment
  return heap_.allocateSegment(minimumSize);
}

}  // namespace gpupool::protocol
