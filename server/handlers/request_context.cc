#include "server/handlers/request_context.h"

#include <string>

namespace gpupool::server {

std::shared_ptr<BackendContext> SessionContexts::find(uint64_t id) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second.backend;
}

uint64_t SessionContexts::add(int device, std::unique_ptr<BackendContext> backend) {
  std::lock_guard lock(mutex_);
  uint64_t id = next_++;
  entries_[id] = Entry{device, std::move(backend)};
  return id;
}

std::shared_ptr<BackendContext> SessionContexts::remove(uint64_t id, int* device) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  if (device) *device = it->second.device;
  std::shared_ptr<BackendContext> removed = std::move(it->second.backend);
  entries_.erase(it);
  return removed;
}

std::map<int, uint64_t> SessionContexts::peaksByDevice() const {
  std::lock_guard lock(mutex_);
  std::map<int, uint64_t> peaks;
  for (const auto& [id, entry] : entries_) {
    if (entry.backend) peaks[entry.device] += entry.backend->memoryPeak();
  }
  return peaks;
}

std::map<uint64_t, SessionContexts::Entry> SessionContexts::takeAll() {
  std::lock_guard lock(mutex_);
  return std::exchange(entries_, {});
}

Status RequestContext::context(uint64_t id, BackendContext** context) {
  session.hostGates.servingFor(id);
  contextId_ = id;
  context_ = session.contexts.find(id);
  *context = context_.get();
  if (!context_) {
    return Status::error(CUDA_ERROR_INVALID_CONTEXT, "unknown context " + std::to_string(id));
  }
  return Status::success();
}

void RequestContext::discardUnreadBulk() {
  if (bulkBytes_ == 0) return;  // nothing of this frame; a waiter must not touch the next one
  if (uint64_t left = session.connection.pendingBulk()) session.connection.discardBulk(left);
}

uint64_t RequestContext::replyBulkBytes() const {
  uint64_t bytes = 0;
  for (const auto& b : replyBulk) bytes += b.size;
  if (session.stagedReply) bytes += session.stagedReply->bytes();
  return bytes;
}

Status streamDrained(BackendContext& context, uint64_t stream) {
  return stream == 0 ? context.idle() : context.streamQuery(stream);
}

Status checkDeviceRange(BackendContext& context, uint64_t address, uint64_t width, const char* what,
                        uint64_t pitch, uint64_t height) {
  if (!width || !height) return Status::success();
  auto invalid = [&] {
    return Status::error(CUDA_ERROR_INVALID_VALUE, std::string("invalid device range for ") + what);
  };
  if (height > 1 && pitch && height - 1 > (UINT64_MAX - width) / pitch) return invalid();
  uint64_t extent = (height - 1) * pitch + width;
  uint64_t base = 0, size = 0;
  if (!context.memGetAddressRange(address, &base, &size).ok() || extent > size - (address - base))
    return invalid();
  return Status::success();
}

void settlePoolCharge(RequestContext& request, BackendContext& context, uint64_t contextId) {
  if (TenantSession* tenant = request.session.tenant.get()) {
    tenant->settlePoolIdle(contextId, context.memPoolIdleBytes());
  }
}

Status chargedAllocation(RequestContext& request, BackendContext& context, uint64_t bytes,
                         const std::function<Status(uint64_t* address)>& allocate,
                         uint64_t* address) {
  TenantSession* tenant = request.session.tenant.get();
  uint64_t contextId = request.namedContextId();
  if (tenant) {
    settlePoolCharge(request, context, contextId);
    if (Status st = tenant->reserve(contextId, bytes); !st.ok()) return st;
  }
  Status st = allocate(address);
  if (tenant) tenant->settle(contextId, context, bytes, st.ok(), *address);
  return st;
}

Status chargedFree(RequestContext& request, BackendContext& context, uint64_t contextId,
                   uint64_t address, const std::function<Status()>& free) {
  TenantSession* tenant = request.session.tenant.get();
  uint64_t freed = tenant ? TenantSession::allocationSize(context, address) : 0;
  Status st = free();
  if (tenant && st.ok()) tenant->freed(contextId, freed);
  return st;
}

}  // namespace gpupool::server
