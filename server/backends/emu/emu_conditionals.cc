// Conditional graph nodes on the emu: the handles kernels set with cudaGraphSetConditional, and the
// stream steps graph_handlers.cc queues to decide at a conditional node's place in the stream.
//
// A step runs on the stream's own worker. It queues the chosen body on the helper stream of its
// nesting level and drains that stream before the worker moves on, so the stream's later work
// waits for the body as it waits for any earlier operation; a nested conditional does the same one
// level down, on the next helper, so no worker ever waits for itself. Helper streams are
// non-blocking (the legacy stream's rules never make them wait or be waited for) and are not
// streams a client can name or destroy.
#include <mutex>
#include <string>

#include "common/hex.h"
#include "server/backends/emu/emu_context.h"

namespace gpupool::server::emu {
namespace {

// Handles carry a tag in their top byte, so a stray integer is unlikely to be taken for one.
constexpr uint64_t kConditionalTag = uint64_t{0xc0} << 56;
// A bound on what one context's client can make us keep.
constexpr uint64_t kMaxConditionalsPerContext = uint64_t{1} << 20;

}  // namespace

Status EmuContext::graphConditionalCreate(uint32_t defaultValue, bool assignDefault,
                                          uint64_t* handle) {
  std::lock_guard lock(conditionalMutex_);
  if (conditionals_.size() >= kMaxConditionalsPerContext) {
    return Status::error(CUDA_ERROR_OUT_OF_MEMORY, "too many conditional handles in this context");
  }
  *handle = kConditionalTag | ++nextConditional_;
  conditionals_[*handle] = {defaultValue, defaultValue, assignDefault};
  return Status::success();
}

EmuContext::ConditionalSlot* EmuContext::findConditional(uint64_t handle, Status* error) {
  auto it = conditionals_.find(handle);
  if (it != conditionals_.end()) return &it->second;
  if (error) {
    *error = Status::error(CUDA_ERROR_INVALID_VALUE,
                           "conditional handle " + hex(handle) + " is not this context's");
  }
  return nullptr;
}

Status EmuContext::graphConditionalValue(uint64_t handle, uint32_t* value) {
  std::lock_guard lock(conditionalMutex_);
  Status error = Status::success();
  ConditionalSlot* slot = findConditional(handle, &error);
  if (slot) *value = slot->value;
  return error;
}

Status EmuContext::graphConditionalAssignDefaults(std::span<const uint64_t> handles) {
  std::lock_guard lock(conditionalMutex_);
  for (uint64_t handle : handles) {
    Status error = Status::success();
    ConditionalSlot* slot = findConditional(handle, &error);
    if (!slot) return error;
    if (slot->assignDefault) slot->value = slot->defaultValue;
  }
  return Status::success();
}

bool EmuContext::setConditional(uint64_t handle, uint32_t value) {
  std::lock_guard lock(conditionalMutex_);
  ConditionalSlot* slot = findConditional(handle, nullptr);
  if (slot) slot->value = value;
  return slot != nullptr;
}

uint64_t EmuContext::conditionalHelperStream(unsigned depth) {
  uint64_t id = kConditionalHelperStreams + depth;
  std::lock_guard lock(tablesMutex_);
  auto& s = streams_[id];
  if (!s.queue) s = Stream{CU_STREAM_NON_BLOCKING, std::make_shared<StreamQueue>()};
  return id;
}

Status EmuContext::streamConditionalStep(uint64_t stream, unsigned depth,
                                         std::function<Status(uint64_t, bool*)> step) {
  if (depth >= kMaxConditionalDepth) {
    return Status::error(
        CUDA_ERROR_INVALID_VALUE,
        "conditional nodes nested more than " + std::to_string(kMaxConditionalDepth - 1) + " deep");
  }
  uint64_t helper = conditionalHelperStream(depth);
  std::shared_ptr<StreamQueue> helperQueue = findStream(helper).queue;
  return enqueue(stream, [this, helper, helperQueue, step = std::move(step)] {
    for (bool again = true; again;) {
      // A cancelled context (its client gone, or being destroyed) runs no more bodies: a while
      // node whose kernel never clears its condition ends here.
      if (cancelled_ || !sticky().ok()) return;
      again = false;
      Status st = step(helper, &again);
      helperQueue->drain();
      if (!st.ok()) {
        fail(st.code, "conditional node: " + st.message);
        return;
      }
    }
  });
}

}  // namespace gpupool::server::emu
