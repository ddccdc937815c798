#include "server/backends/cuda/cuda_fault.h"

#include <iostream>

namespace gpupool::server {

namespace {

struct FatalError {
  CUresult code;
  const char* name;
};

constexpr FatalError kFatalErrors[] = {
    // cuda.h says of each of these: "This leaves the process in an inconsistent state and any
    // further CUDA work will return the same error. To continue using CUDA, the process must be
    // terminated and relaunched."
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS"},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE"},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
    {CUDA_ERROR_TENSOR_MEMORY_LEAK, "CUDA_ERROR_TENSOR_MEMORY_LEAK"},
    {CUDA_ERROR_CONTAINED, "CUDA_ERROR_CONTAINED"},
    {CUDA_ERROR_MPS_CLIENT_TERMINATED, "CUDA_ERROR_MPS_CLIENT_TERMINATED"},
    {CUDA_ERROR_EXTERNAL_DEVICE, "CUDA_ERROR_EXTERNAL_DEVICE"},
    // cuda.h says only "the context cannot be used anymore", but on the H200 (driver 580.159.04) a
    // device-side assert poisoned every context of the process, new ones included.
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT"},
    // An uncorrectable ECC error: the device's memory is no longer trustworthy for anyone.
    {CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE"},
};

}  // namespace

bool isFatalDriverError(CUresult result) { return fatalErrorName(result) != nullptr; }

const char* fatalErrorName(CUresult result) {
  for (const FatalError& e : kFatalErrors) {
    if (e.code == result) return e.name;
  }
  return nullptr;
}

CudaFault CudaFaultState::fault() const {
  std::lock_guard lock(mutex_);
  return fault_;
}

void CudaFaultState::record(CUresult code, std::string errorName, std::string call,
                            std::string described,
                            const std::shared_ptr<const std::string>& caller) {
  CudaFault fault;
  Handler handler;
  {
    std::lock_guard lock(mutex_);
    if (code_.load(std::memory_order_relaxed) != CUDA_SUCCESS) return;
    fault_.code = code;
    fault_.errorName = std::move(errorName);
    fault_.call = std::move(call);
    fault_.caller = caller ? *caller : "an unknown session";
    fault_.described = std::move(described);
    faultCaller_ = caller;
    code_.store(code, std::memory_order_release);
    fault = fault_;
    handler = handler_;
  }
  std::cerr << "gpupoold: FATAL DEVICE FAULT: " << fault.call << " returned " << fault.described
            << " in " << fault.caller
            << "; the driver's state in this process is lost for every session, so every later "
               "cuda call is refused with "
            << fault.errorName << "\n";
  if (handler) handler(fault);
}

Status CudaFaultState::refusal(const char* call,
                               const std::shared_ptr<const std::string>& caller) const {
  std::lock_guard lock(mutex_);
  bool own = caller && faultCaller_ && *caller == *faultCaller_;
  return Status::error(fault_.code, std::string(call) +
                                        " refused: the GPU's CUDA state in this gpupoold was "
                                        "lost to a fatal fault (" +
                                        fault_.errorName + " at " + fault_.call + ") in " +
                                        (own ? "this session" : "another session") + "; " +
                                        consequence_);
}

void CudaFaultState::setPolicy(std::string consequence, Handler handler) {
  std::lock_guard lock(mutex_);
  consequence_ = std::move(consequence);
  handler_ = std::move(handler);
}

}  // namespace gpupool::server
