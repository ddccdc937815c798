// A session's view of its tenant: what the Session asks before and after the requests that the
// pool's policy touches (device access, allocations, memory info, kernels, metering).
//
// Contract: every byte charged to the tenant through allocated() is given back by freed(),
// contextDestroyed() or the destructor, so a session that ends any way leaves the tenant's ledger
// as it found it. One thread at a time (the session's).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "server/backend.h"
#include "server/session_accounting.h"
#include "server/tenant_pool.h"

namespace gpupool::server {

class TenantSession {
 public:
  TenantSession(TenantPool& pool, std::shared_ptr<TenantAccount> account);
  ~TenantSession();

  const std::string& tenant() const { return account_->name(); }

  // A driver session counts against the tenant's max_sessions until this object goes. False, with
  // the reason, when the tenant is at its limit.
  bool admitDriverSession(std::string* why);

  // CUDA_ERROR_INVALID_DEVICE with the reason when the tenant may not use `device`.
  Status checkDevice(int device) const;
  // Whether attachContext gives a context on `device` a launch gate (which measures kernel time).
  bool gatesDevice(int device) const;
  // Routes a new context's kernels through the device's scheduler and the meter; the gate also
  // adds each kernel's time to `kernelClock` (NVML accounting) when given.
  void attachContext(uint64_t context, int device, BackendContext& backend,
                     std::shared_ptr<KernelClock> kernelClock = nullptr);
  void contextDestroyed(uint64_t context);

  // Before an allocation of `bytes`: CUDA_ERROR_OUT_OF_MEMORY when past the quota.
  Status reserve(uint64_t context, uint64_t bytes);
  // After it: `ok` says whether the backend allocated at `address` (else the reservation is
  // dropped). The charge becomes the allocation's real size.
  void settle(uint64_t context, BackendContext& backend, uint64_t reserved, bool ok,
              uint64_t address);
  // Size of the allocation starting at `address` (0 if none), asked before freeing it.
  static uint64_t allocationSize(BackendContext& backend, uint64_t address);
  void freed(uint64_t context, uint64_t bytes);
  // The context's memory pools now keep `bytes` idle (freed blocks not yet given back to the
  // device): the charge follows, so memory a pool holds counts against the quota too.
  void settlePoolIdle(uint64_t context, uint64_t bytes);
  // Narrows the device's answer to what the tenant may still take.
  void memoryView(uint64_t* freeBytes, uint64_t* totalBytes) const;

  // One request served: bytes each way, on the context's device (-1 when none), and its result.
  void recordCall(uint64_t context, uint64_t bytesIn, uint64_t bytesOut, CUresult result);

 private:
  struct Held {
    int device = 0;
    uint64_t bytes = 0;     // everything charged, poolIdle included
    uint64_t poolIdle = 0;  // of which idle pool memory
  };

  TenantPool& pool_;
  std::shared_ptr<TenantAccount> account_;
  std::map<uint64_t, Held> contexts_;
  bool countedSession_ = false;
};

}  // namespace gpupool::server
