// Stream memory operations on the emu (cuStreamWaitValue*, cuStreamWriteValue*,
// cuStreamBatchMemOp): they run on the stream's own worker, in stream order.
//
// A wait holds only that worker: it rereads the value, sleeping between reads with a backoff that
// grows to 1 ms, so a long wait costs no core and a write from another stream, a kernel or a host
// copy is seen within a millisecond. Every load and store goes through EmuMemory::accessLive, so a
// free on another stream never leaves a wait reading unmapped memory: the wait fails the context
// with CUDA_ERROR_ILLEGAL_ADDRESS instead, as a GPU faults on a freed page.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/hex.h"
#include "server/backends/emu/emu_context.h"

namespace gpupool::server::emu {
namespace {

// Device memory is shared between streams as a GPU's is: a wait polls, and a stream write stores,
// a word that another stream's copy or kernel reads or writes with plain accesses at the same
// time. Aligned 4- and 8-byte loads and stores do not tear on the hosts the emu runs on (x86-64,
// aarch64), and a wait reads again until its condition holds, so that race is the device's memory
// model rather than a bug: scripts/tsan.supp names these two functions (hence noinline).
[[gnu::noinline]] uint64_t pollDeviceWord(const void* p, bool wide) {
  return wide ? __atomic_load_n(static_cast<const uint64_t*>(p), __ATOMIC_SEQ_CST)
              : __atomic_load_n(static_cast<const uint32_t*>(p), __ATOMIC_SEQ_CST);
}

[[gnu::noinline]] void storeDeviceWord(void* p, uint64_t value, bool wide) {
  if (wide) {
    __atomic_store_n(static_cast<uint64_t*>(p), value, __ATOMIC_SEQ_CST);
  } else {
    __atomic_store_n(static_cast<uint32_t*>(p), static_cast<uint32_t>(value), __ATOMIC_SEQ_CST);
  }
}

// The condition CUstreamWaitValue_flags names, on values of `width` bits.
bool met(uint64_t current, uint64_t value, unsigned flags, bool wide) {
  const uint64_t mask = wide ? ~uint64_t{0} : 0xffffffffull;
  current &= mask;
  value &= mask;
  switch (flags & ~static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH)) {
    case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic: the difference, as signed, is not negative
      return wide ? static_cast<int64_t>(current - value) >= 0
                  : static_cast<int32_t>(static_cast<uint32_t>(current - value)) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return current == value;
    case CU_STREAM_WAIT_VALUE_AND:
      return (current & value) != 0;
    case CU_STREAM_WAIT_VALUE_NOR:
      return (~(current | value) & mask) != 0;
    default:
      return false;  // the handler refused other conditions
  }
}

}  // namespace

Status EmuContext::streamMemOps(uint64_t stream, std::span<const StreamMemOp> ops) {
  for (const StreamMemOp& op : ops) {
    if (op.kind == CU_STREAM_MEM_OP_BARRIER) continue;
    if (!view(op.address, op.wide() ? 8 : 4)) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "stream memory operation on " +
                                                         hex(op.address) +
                                                         ", which is not memory of this context");
    }
  }
  std::vector<StreamMemOp> queued(ops.begin(), ops.end());
  return enqueue(stream, [this, queued = std::move(queued)] {
    for (const StreamMemOp& op : queued) {
      if (!runMemOp(op)) return;
    }
  });
}

bool EmuContext::runMemOp(const StreamMemOp& op) {
  // The worker runs the stream's operations one after another and each store is sequentially
  // consistent, so a barrier has nothing left to order.
  if (op.kind == CU_STREAM_MEM_OP_BARRIER) return true;
  const bool wide = op.wide();
  const uint64_t bytes = wide ? 8 : 4;
  if (op.kind == CU_STREAM_MEM_OP_WRITE_VALUE_32 || op.kind == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
    bool live = memory_.accessLive(op.address, bytes, owner_,
                                   [&](void* p) { storeDeviceWord(p, op.value, wide); });
    if (!live) fail(CUDA_ERROR_ILLEGAL_ADDRESS, "stream write to freed memory " + hex(op.address));
    return live;
  }
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    uint64_t current = 0;
    bool live = memory_.accessLive(op.address, bytes, owner_,
                                   [&](void* p) { current = pollDeviceWord(p, wide); });
    if (!live) {
      fail(CUDA_ERROR_ILLEGAL_ADDRESS, "stream wait on freed memory " + hex(op.address));
      return false;
    }
    if (met(current, op.value, op.flags, wide)) return true;
    // The client gone or the context broken: nothing will run after this wait anyway.
    if (cancelled_ || !sticky().ok()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace gpupool::server::emu
