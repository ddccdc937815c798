#include "server/backends/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "server/backends/cuda/cuda_context.h"
#include "server/backends/cuda/cuda_driver.h"
#include "server/device_uuid.h"

namespace gpupool::server {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<CudaDriver> driver, std::vector<CUdevice> handles,
              std::vector<DeviceDescription> devices, transport::PinnedMemory* pinnedMemory)
      : driver_(std::move(driver)),
        handles_(std::move(handles)),
        devices_(std::move(devices)),
        pinnedMemory_(pinnedMemory) {
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
    CudaDriver::setCaller(nullptr);  // the new context is not yet anyone's
    return CudaContext::create(driver_, handles_[device], flags, memoryUsed_[device], pinnedMemory_,
                               context);
  }

  Status createGreenContext(int device, unsigned smCount,
                            std::unique_ptr<BackendContext>* context) override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) {
      return Status::error(CUDA_ERROR_INVALID_DEVICE, "no device " + std::to_string(device) +
                                                          " (the server has " +
                                                          std::to_string(devices_.size()) + ")");
    }
    CudaDriver::setCaller(nullptr);
    return CudaContext::createGreen(driver_, handles_[device], smCount, memoryUsed_[device],
                                    pinnedMemory_, context);
  }

  uint64_t deviceMemoryUsed(int device) const override {
    if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return 0;
    return memoryUsed_[device]->load();
  }

  std::pair<uint64_t, uint64_t> deviceAddressWindow() const override { return {0, 0}; }

  void setDeviceFaultPolicy(std::string consequence,
                            std::function<void(const DeviceFault&)> handler) override {
    driver_->fault().setPolicy(
        std::move(consequence), [handler = std::move(handler)](const CudaFault& fault) {
          if (handler) {
            handler({fault.code, fault.errorName,
                     fault.call + " returned " + fault.described + " in " + fault.caller});
          }
        });
  }
  bool deviceFaulted() const override { return driver_->fault().faulted(); }

 private:
  std::shared_ptr<CudaDriver> driver_;
  std::vector<CUdevice> handles_;
  std::vector<DeviceDescription> devices_;
  transport::PinnedMemory* pinnedMemory_;
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
  // The capabilities the pool does not serve are withheld when clients are told (Welcome,
  // server/served_capabilities.cc); the description keeps what the device has.
  out->pciDomain = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID];
  out->pciBus = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID];
  out->pciDevice = out->attributes[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID];
  return Status::success();
}

// A driver device, snapshotted.
struct DriverDevice {
  CUdevice handle = 0;
  DeviceDescription description;
};

// Every device the driver shows, in ordinal order.
bool enumerate(const CudaDriver& driver, std::vector<DriverDevice>* out, std::string* error) {
  int count = 0;
  if (Status s = driver.call(driver.deviceGetCount, &count); !s.ok()) {
    *error = s.message;
    return false;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    DriverDevice device;
    Status s = driver.call(driver.deviceGet, &device.handle, ordinal);
    if (s.ok()) s = describeDevice(driver, device.handle, &device.description);
    if (!s.ok()) {
      *error = "CUDA device " + std::to_string(ordinal) + ": " + s.message;
      return false;
    }
    out->push_back(std::move(device));
  }
  return true;
}

std::string listOf(const std::vector<DriverDevice>& devices) {
  if (devices.empty()) return "the driver shows no devices";
  std::string out = "the driver has";
  for (size_t i = 0; i < devices.size(); ++i) {
    out += (i ? ", " : " ") + std::to_string(i) + " = " +
           formatDeviceUuid("GPU-", devices[i].description.uuid);
  }
  return out;
}

std::unique_ptr<Backend> makeBackend(std::shared_ptr<CudaDriver> driver,
                                     std::vector<DriverDevice> devices,
                                     transport::PinnedMemory* pinnedMemory) {
  std::vector<CUdevice> handles;
  std::vector<DeviceDescription> descriptions;
  for (auto& d : devices) {
    handles.push_back(d.handle);
    descriptions.push_back(std::move(d.description));
  }
  return std::make_unique<CudaBackend>(std::move(driver), std::move(handles),
                                       std::move(descriptions), pinnedMemory);
}

}  // namespace

std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath, int maxDevices,
                                         std::string* error,
                                         transport::PinnedMemory* pinnedMemory) {
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(driverPath, error);
  if (!driver) return nullptr;
  std::vector<DriverDevice> devices;
  if (!enumerate(*driver, &devices, error)) return nullptr;
  if (maxDevices >= 0 && devices.size() > static_cast<size_t>(maxDevices)) {
    devices.resize(static_cast<size_t>(maxDevices));
  }
  return makeBackend(std::move(driver), std::move(devices), pinnedMemory);
}

std::unique_ptr<Backend> makeCudaBackend(const std::string& driverPath,
                                         const std::vector<CudaDeviceSelection>& selections,
                                         std::string* error, int* failedSelection,
                                         transport::PinnedMemory* pinnedMemory) {
  *failedSelection = -1;
  auto fail = [&](size_t selection, std::string why) {
    *failedSelection = static_cast<int>(selection);
    *error = std::move(why);
    return nullptr;
  };
  // MIG instances are not CUDA devices of their own unless CUDA_VISIBLE_DEVICES names them: the
  // driver enumerates a GPU in MIG mode as nothing (or only its first instance), and reads the
  // variable once, in cuInit. So the selected UUIDs are made the visible devices before the driver
  // is loaded, and the devices are then found by UUID. Ordinals mean something else under that
  // variable, so every device must then be selected by UUID.
  std::string visible;
  size_t firstMig = selections.size();
  for (size_t i = selections.size(); i-- > 0;) {
    if (selections[i].uuid.rfind("MIG-", 0) == 0) firstMig = i;
  }
  bool mig = firstMig < selections.size();
  if (mig) {
    for (size_t i = 0; i < selections.size(); ++i) {
      if (selections[i].uuid.empty()) {
        return fail(i,
                    "with MIG instances in the pool, select every device by uuid "
                    "(CUDA_VISIBLE_DEVICES renumbers the driver's devices)");
      }
      visible += (i ? "," : "") + selections[i].uuid;
    }
    ::setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
  }
  std::shared_ptr<CudaDriver> driver = CudaDriver::load(driverPath, error);
  if (!driver) {
    // A driver that finds none of the MIG instances named fails cuInit with no device.
    if (mig) return fail(firstMig, *error + " (with CUDA_VISIBLE_DEVICES=" + visible + ")");
    return nullptr;
  }
  std::vector<DriverDevice> all;
  if (!enumerate(*driver, &all, error)) return nullptr;
  std::vector<DriverDevice> chosen;
  std::vector<size_t> chosenOrdinals;
  for (size_t i = 0; i < selections.size(); ++i) {
    const CudaDeviceSelection& s = selections[i];
    size_t ordinal = all.size();
    if (!s.uuid.empty()) {
      for (size_t d = 0; d < all.size(); ++d) {
        if (deviceUuidMatches(s.uuid, all[d].description.uuid)) ordinal = d;
      }
      if (ordinal == all.size()) {
        return fail(i, "no CUDA device has uuid " + s.uuid + " (" + listOf(all) +
                           (mig ? "; CUDA_VISIBLE_DEVICES=" + visible : std::string()) + ")");
      }
    } else {
      int index = s.index.value_or(static_cast<int>(i));
      if (index < 0 || static_cast<size_t>(index) >= all.size()) {
        return fail(i, "no CUDA device " + std::to_string(index) + " (" + listOf(all) + ")");
      }
      ordinal = static_cast<size_t>(index);
    }
    auto earlier = std::find(chosenOrdinals.begin(), chosenOrdinals.end(), ordinal);
    if (earlier != chosenOrdinals.end()) {
      return fail(i, "selects CUDA device " + std::to_string(ordinal) + ", as device[" +
                         std::to_string(earlier - chosenOrdinals.begin()) + "] does");
    }
    chosenOrdinals.push_back(ordinal);
    chosen.push_back(all[ordinal]);
  }
  return makeBackend(std::move(driver), std::move(chosen), pinnedMemory);
}

}  // namespace gpupool::server
