// NVML's questions that the status reply cannot answer for one tenant (client/nvml): a device's
// memory as the tenant sees it, without a context.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// Total and free as cuMemGetInfo reports them to this tenant: the device's memory and what all
// contexts hold of it, capped by the tenant's quota (TenantSession::memoryView, as memGetInfo).
Status nvmlMemoryInfo(RequestContext& request, Request::Reader r) {
  const auto& devices = request.session.backend.devices();
  uint32_t device = r.getNvmlMemoryInfo();
  if (device >= devices.size()) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device));
  }
  uint64_t totalBytes = devices[device].totalMemory;
  uint64_t used = request.session.backend.deviceMemoryUsed(static_cast<int>(device));
  uint64_t freeBytes = totalBytes > used ? totalBytes - used : 0;
  if (request.session.tenant) request.session.tenant->memoryView(&freeBytes, &totalBytes);
  auto out = request.reply.initMemInfo();
  out.setFree(freeBytes);
  out.setTotal(totalBytes);
  return Status::success();
}

constexpr RequestHandlerRow kRows[] = {
    {Request::NVML_MEMORY_INFO, nvmlMemoryInfo},
};

}  // namespace

std::span<const RequestHandlerRow> nvmlHandlers() { return kRows; }

}  // namespace gpupool::server
