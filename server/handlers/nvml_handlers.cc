// NVML's questions that the status reply cannot answer for one tenant (client/nvml): a device's
// memory as the tenant sees it, without a context; its per-process accounting.
#include "server/handlers/request_table.h"
#include "server/pool_server.h"

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

// The accounting records of the asking tenant's driver sessions on the device (a connection
// without a tenant on a pool is refused; on a server without --config every session is the open
// tenant's). NVML reports each by the pid in its client name (client/nvml/accounting.cc).
Status nvmlAccounting(RequestContext& request, Request::Reader r) {
  uint32_t device = r.getNvmlAccounting();
  if (device >= request.session.backend.devices().size()) {
    return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device));
  }
  SessionState& session = request.session;
  std::string tenant = session.tenant ? session.tenant->tenant() : "";
  if (session.server.tenantPool() && !session.tenant) {
    return Status::error(CUDA_ERROR_NOT_PERMITTED,
                         "accounting is per tenant: connect with the tenant's GPU_POOL_TOKEN");
  }
  std::vector<AccountingRecord> records =
      session.server.accountingOn(static_cast<int>(device), tenant);
  auto out = request.reply.initAccounting();
  out.setBufferSize(AccountingHistory::kRecordsPerDevice);
  auto list = out.initRecords(static_cast<unsigned>(records.size()));
  for (unsigned i = 0; i < records.size(); ++i) {
    const AccountingRecord& from = records[i];
    list[i].setSessionId(from.sessionId);
    list[i].setClientName(from.clientName);
    list[i].setStartTimeUs(from.startUs);
    list[i].setEndTimeUs(from.endUs);
    list[i].setKernelSeconds(from.kernelSeconds);
    list[i].setPeakMemory(from.peakBytes);
  }
  return Status::success();
}

constexpr RequestHandlerRow kRows[] = {
    {Request::NVML_MEMORY_INFO, nvmlMemoryInfo},
    {Request::NVML_ACCOUNTING, nvmlAccounting},
};

}  // namespace

std::span<const RequestHandlerRow> nvmlHandlers() { return kRows; }

}  // namespace gpupool::server
