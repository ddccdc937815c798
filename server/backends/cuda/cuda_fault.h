// Fatal ("sticky") driver errors and the fault state of one cuda backend.
//
// On NVIDIA's driver a fatal error poisons the whole process's CUDA state, not just the context
// that hit it: on an H200 (driver 580.159.04) a device-side assert in one session made every later
// driver call of that gpupoold, in every other session and in brand-new contexts, fail with
// CUDA_ERROR_ASSERT. The only recovery is a new process (docs/architecture.md, Fatal device
// faults). The backend's CudaDriver holds one CudaFaultState, shared with every context through
// the driver: the first fatal error recorded marks the backend faulted, and from then on every
// call but the releases is refused with that error's code and a message that names the fault,
// instead of whatever confused error the driver would give. The server is told once (a handler it
// sets), and restarts or refuses (gpupoold --on-device-fault).
#pragma once

#include <cuda.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

namespace gpupool::server {

// Whether `result` leaves the process's CUDA state unusable.
bool isFatalDriverError(CUresult result);
// Its name ("CUDA_ERROR_ASSERT") when it is fatal, else null: for drivers that cannot name it.
const char* fatalErrorName(CUresult result);

// What the server learns of a fault, once.
struct CudaFault {
  CUresult code = CUDA_SUCCESS;
  std::string errorName;  // e.g. "CUDA_ERROR_ASSERT"
  std::string call;       // the driver call that returned it, e.g. "cuCtxSynchronize"
  std::string caller;     // "session 3 (tenant alice)", or "an unknown session"
  std::string described;  // the driver's description of the error
};

class CudaFaultState {
 public:
  using Handler = std::function<void(const CudaFault&)>;

  bool faulted() const { return code_.load(std::memory_order_acquire) != CUDA_SUCCESS; }
  CUresult code() const { return static_cast<CUresult>(code_.load(std::memory_order_acquire)); }
  // The recorded fault (code CUDA_SUCCESS when none).
  CudaFault fault() const;

  // Records a fatal error; the first one marks the state faulted, is logged on stderr and handed
  // to the handler. Later ones are ignored.
  void record(CUresult code, std::string errorName, std::string call, std::string described,
              const std::shared_ptr<const std::string>& caller);
  // The error a call refused after the fault returns: the fault's code, and a message naming it,
  // `call` and whether the fault was `caller`'s own session's.
  Status refusal(const char* call, const std::shared_ptr<const std::string>& caller) const;

  // What the server does about a fault: `consequence` ends the refusals' message ("gpupoold is
  // restarting"), `handler` runs once, on the thread that recorded the fault (it must not block).
  void setPolicy(std::string consequence, Handler handler);

 private:
  std::atomic<int> code_{CUDA_SUCCESS};
  mutable std::mutex mutex_;
  CudaFault fault_;
  std::shared_ptr<const std::string> faultCaller_;
  std::string consequence_ = "gpupoold must be restarted";
  Handler handler_;
};

}  // namespace gpupool::server
