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
// (count-1, then each size in words, padded to a whole word), then the segments themselves. The
// table and the parts live on the stack for up to kStackSegments segments (every request and
// reply but the largest), sparing each posted launch two heap allocations.
template <typename Send>
void withFraming(capnp::MessageBuilder& message, Send send) {
  constexpr size_t kStackSegments = 6;
  auto segments = message.getSegmentsForOutput();
  const size_t tableWords = (segments.size() + 2) / 2;  // count-1 and sizes, padded to a word
  uint32_t stackTable[kStackSegments + 2];
  transport::ConstBuffer stackParts[kStackSegments + 1];
  std::vector<uint32_t> heapTable;
  std::vector<transport::ConstBuffer> heapParts;
  uint32_t* table = stackTable;
  transport::ConstBuffer* parts = stackParts;
  if (segments.size() > kStackSegments) {
    heapTable.resize(tableWords * 2);
    heapParts.resize(segments.size() + 1);
    table = heapTable.data();
    parts = heapParts.data();
  }
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  for (size_t i = 0; i < segments.size(); ++i)
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
  if (segments.size() % 2 == 0) table[segments.size() + 1] = 0;
  parts[0] = {table, tableWords * 2 * sizeof(uint32_t)};
  for (size_t i = 0; i < segments.size(); ++i) {
    parts[i + 1] = {segments[i].begin(), segments[i].size() * sizeof(capnp::word)};
  }
  std::span<const transport::ConstBuffer> framed(parts, segments.size() + 1);
  send(framed);
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
