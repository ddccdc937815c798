#include "server/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "server/backends/cuda/cuda_context.h"
#include "server/backends/cuda/cuda_driver.h"

namespace gpupool::server {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<CudaDriver> driver, std::vector<CUdevice> handles,
              std::vector<DeviceDescription> devices)
      : driver_(std::move(driver)), handles_(std::move(handles)), devices_(std::move(devices)) {
    for (size_t i = 0; i < devices_.size(); ++i) {
      memoryUsed_.push_back(std::make_shared<std::atomic<uint64_t>>(0));
    }
  }

  std::string kind() const override { return "cuda"; }
  int driverVersion() const override { return driver_->version(); }
  const std::vector<DeviceDescription>& devices() const override { return devices_; }

  Status createContext(int device, unsigned flags,
                       std::unique_ptr<BackendContext>* context) override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) {
      return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device) +
                                                          " (the server has " +
                                                          std::to_string(devices_.size()) + ")");
    }
    return CudaContext::create(driver_, handles_[device], flags, memoryUsed_[device], context);
  }

  uint64_t deviceMemoryUsed(int device) const override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return 0;
    return memoryUsed_[device]->load();
  }

  std::pair<uint64_t, uint64_t> deviceAddressWindow() const override { return {0, 0}; }

 private:
  std::shared_ptr<CudaDriver> driver_;
  std::vector<CUdevice> handles_;
  std::vector<DeviceDescription> devices_;
  // Shared with the contexts, so a context that outlives the backend still has a counter.
  std::vector<std::shared_ptr<std::atomic<uint64_t>>> memoryUsed_;
};

Status describeDevice(const CudaDriver& driver, CUdevice device, DeviceDescription* out) {
  char name[256] = {};
  if (Status s = driver.call(driver.deviceGetName, name, int{sizeof name - 1}, device); !s.ok()) {
    return s;
  }
  out->name = name;
  CUuuid uuid{};
  if (Status s = driver.call(driver.deviceGetUuid, &uuid, device); !s.ok()) return s;
  std::memcpy(out->uuid.data(), uuid.bytes, out->uuid.size());
  size_t total = 0;
  if (Status s = driver.call(driver.deviceTotalMem, &total, device); !s.ok()) return s;
  out->totalMemory = total;
  out->attributes.assign(CU_DEVICE_ATTRIBUTE_MAX, 0);
  for (int attribute = 1; attribute < CU_DEVICE_ATTRIBUTE_MAX; ++attribute) {
    int value = 0;
    if (driver
            .call(driver.deviceGetAttribute, &value, static_cast<CUdevice_attribute>(attribute),
                  device)
            .ok()) {
      out->attributes[attribute] = value;
    }
  }
  out->pciDomain = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
  out->pciBus = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
  out->pciDevice = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
  return Status::success();
}

}  // namespace

std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath, int maxDevices,
                                         std::string* error) {
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(driverPath, error);
  if (!driver) return nullptr;
  int count = 0;
  if (Status s = driver->call(driver->deviceGetCount, &count); !s.ok()) {
    *error = s.message;
    return nullptr;
  }
  if (maxDevices >= 0) count = std::min(count, maxDevices);
  std::vector<CUdevice> handles;
  std::vector<DeviceDescription> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice handle = 0;
    DeviceDescription description;
    Status s = driver->call(driver->deviceGet, &handle, ordinal);
    if (s.ok()) s = describeDevice(*driver, handle, &description);
    if (!s.ok()) {
      *error = "CUDA device " + std::to_string(ordinal) + ": " + s.message;
      return nullptr;
    }
    handles.push_back(handle);
    devices.push_back(std::move(description));
  }
  return std::make_unique<CudaBackend>(std::move(driver), std::move(handles), std::move(devices));
}

}  // namespace gpupool::server
