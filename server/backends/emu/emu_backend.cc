#include "server/backends/emu/emu_backend.h"

#include <atomic>

#include "server/backends/emu/emu_context.h"
#include "server/backends/emu/emu_memory.h"

namespace gpupool::server::emu {
namespace {

// Reported by cuDriverGetVersion: cudart 13.0 refuses anything older than 13000.
constexpr int kEmuDriverVersion = 13000;

class EmuBackend final : public Backend {
 public:
  explicit EmuBackend(const EmuBackendOptions& options) : options_(options) {
    for (unsigned i = 0; i < options.devices; ++i) {
      devices_.push_back(describeEmuDevice(i, options.device));
      memories_.push_back(std::make_unique<EmuMemory>(
          options.addressSlot, i, options.device.memoryBytes, options.pinnedMemory));
    }
  }

  std::string kind() const override { return "emu"; }
  int driverVersion() const override { return kEmuDriverVersion; }
  const std::vector<DeviceDescription>& devices() const override { return devices_; }

  Status createContext(int device, unsigned /*flags*/,
                       std::unique_ptr<BackendContext>* context) override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) {
      return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device));
    }
    *context =
        std::make_unique<EmuContext>(*memories_[device], devices_[device], options_, nextOwner_++);
    return Status::success();
  }

  Status createGreenContext(int device, unsigned smCount,
                            std::unique_ptr<BackendContext>* context) override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) {
      return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device));
    }
    int sms = devices_[device].attributes[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
    if (smCount == 0 || smCount > static_cast<unsigned>(sms)) {
      return Status::error(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                           "green context of " + std::to_string(smCount) + " SMs on a device of " +
                               std::to_string(sms));
    }
    *context = std::make_unique<EmuContext>(*memories_[device], devices_[device], options_,
                                            nextOwner_++, smCount);
    return Status::success();
  }

  uint64_t deviceMemoryUsed(int device) const override {
    if (device < 0 || static_cast<size_t>(device) >= memories_.size()) return 0;
    return memories_[device]->used();
  }

  // Events are shared state any context may hold (EmuContext::ipcOpenEvent).
  bool sharesEventsBetweenSessions() const override { return true; }
  bool mapsHostFiles() const override { return true; }
  std::pair<uint64_t, uint64_t> deviceAddressWindow() const override {
    return {EmuMemory::windowOf(options_.addressSlot, 0),
            EmuMemory::kWindowStride * std::max(1u, options_.devices)};
  }

 private:
  EmuBackendOptions options_;
  std::vector<DeviceDescription> devices_;
  std::vector<std::unique_ptr<EmuMemory>> memories_;
  std::atomic<uint64_t> nextOwner_{1};
};

}  // namespace

std::unique_ptr<Backend> makeEmuBackend(const EmuBackendOptions& options) {
  return std::make_unique<EmuBackend>(options);
}

}  // namespace gpupool::server::emu
