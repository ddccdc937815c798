#include "protocol/message_codec.h"

namespace gpupool::protocol {

capnp::ReaderOptions readerOptions() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = transport::kMaxMessageBytes / 8;
  options.nestingLimit = 32;
  return options;
}

namespace {

// Calls send(parts) with the standard Cap'n Proto stream framing of `message`: the segment table
// (count-1, then each size in words, padded to a whole word), then the segments themselves.
template <typename Send>
void withFraming(capnp::MessageBuilder& message, Send send) {
  auto segments = message.getSegmentsForOutput();
  std::vector<uint32_t> table;
  table.reserve(segments.size() + 2);
  table.push_back(static_cast<uint32_t>(segments.size() - 1));
  for (auto& s : segments) table.push_back(static_cast<uint32_t>(s.size()));
  if (table.size() % 2) table.push_back(0);
  std::vector<transport::ConstBuffer> parts;
  parts.reserve(segments.size() + 1);
  parts.push_back({table.data(), table.size() * sizeof(uint32_t)});
  for (auto& s : segments) parts.push_back({s.begin(), s.size() * sizeof(capnp::word)});
  send(parts);
}

}  // namespace

void sendMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                 std::span<const transport::ConstBuffer> bulk) {
  withFraming(message, [&](auto& parts) { connection.sendFrame(parts, bulk); });
}

void startMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                  uint64_t bulkBytes) {
  withFraming(message, [&](auto& parts) { connection.startFrame(parts, bulkBytes); });
}

void queueMessage(transport::Connection& connection, capnp::MessageBuilder& message,
                  std::span<const transport::ConstBuffer> bulk) {
  withFraming(message, [&](auto& parts) { connection.sendFrameLater(parts, bulk); });
}

IncomingMessage::IncomingMessage(transport::Connection& connection) {
  auto frame = connection.receiveFrame();
  bulkBytes_ = frame.bulkBytes;
  words_ =
      kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(frame.message.data()),
                                      frame.message.size() / sizeof(capnp::word));
}

}  // namespace gpupool::protocol
