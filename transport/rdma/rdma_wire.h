// What one SEND carries on an RDMA connection: a fixed header, then up to kRdmaSlotPayload bytes.
//
// A frame is FrameBegin (+ MessageData ...) with the message bytes, then its bulk as BulkInline
// pieces and BulkRemote descriptors in order, or as one BulkWritten when the receiver offered a
// destination for it (BulkDestination). Small queued frames may share one Packed SEND. BulkDone,
// Credit and BulkDestination are control messages the transport consumes itself. Every header
// returns credits: `consumed` is how many of the peer's SENDs its sender has processed and
// re-posted receive buffers for, in total.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpupool::transport::rdma {

enum class WireType : uint32_t {
  kFrameBegin = 1,   // a = message bytes, b = bulk bytes; payload: the message's first bytes
  kMessageData = 2,  // payload: the next message bytes
  kBulkInline = 3,   // payload: the next bulk bytes
  kBulkRemote = 4,   // the next `b` bulk bytes are at remote address `a` under `rkey`
  kBulkDone = 5,     // the receiver has read one BulkRemote region: the sender may reuse it
  kCredit = 6,       // nothing but the credit return in `consumed`
  // Several small frames in one SEND (Connection::sendFrameLater): the payload is a sequence of
  // records, each a WireHeader (kFrameBegin carrying the whole message, or kBulkInline carrying
  // the frame's whole bulk) followed by its payload padded to 8 bytes.
  kPacked = 7,
  // The sender will read the bulk of the next frame it receives into `b` bytes at its address `a`,
  // registered for remote write under `rkey` (Connection::expectBulkInto).
  kBulkDestination = 8,
  // The frame's `b` bulk bytes were RDMA WRITTEN into the destination the receiver offered; the
  // WRITEs were posted before this SEND on the same RC queue pair, so they are placed before it.
  kBulkWritten = 9,
};

struct WireHeader {
  uint32_t type;
  uint32_t payloadBytes;
  uint64_t consumed;
  uint64_t a;
  uint64_t b;
  uint32_t rkey;
  uint32_t magic;
};
static_assert(sizeof(WireHeader) == 40);
static_assert(sizeof(WireHeader) % 8 == 0, "records in a Packed SEND stay 8-byte aligned");

// A record's payload rounded up to whole words, so the next record and every message stay aligned.
constexpr size_t paddedRecordBytes(size_t payload) { return (payload + 7) & ~size_t(7); }

constexpr uint32_t kWireMagic = 0x414d4452;  // "RDMA"
// Receive buffers each side posts; a sender never has more SENDs outstanding than this.
constexpr uint32_t kRdmaRecvSlots = 32;
constexpr uint32_t kRdmaSendSlots = 32;
constexpr size_t kRdmaSlotBytes = 16u << 10;
constexpr size_t kRdmaSlotPayload = kRdmaSlotBytes - sizeof(WireHeader);

// Exchanged as rdma_cm private data so mismatched builds refuse each other at connect time.
struct ConnectParams {
  uint32_t magic;
  uint32_t recvSlots;
  uint64_t slotBytes;
};

}  // namespace gpupool::transport::rdma
