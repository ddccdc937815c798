#include "client/nvml/visible_devices.h"

#include <array>
#include <cstring>

#include "client/visible_devices.h"

namespace gpupool::nvml {

std::string formatGpuUuid(const unsigned char (&uuid)[16]) {
  client::DeviceUuid bytes;
  std::memcpy(bytes.data(), uuid, bytes.size());
  std::string hex = client::uuidHex(bytes);
  return "GPU-" + hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

std::vector<VisibleDevice> selectVisibleDevices(const std::vector<VisibleDevice>& all,
                                                const char* visible) {
  std::vector<client::DeviceUuid> uuids;
  for (const VisibleDevice& device : all) {
    std::memcpy(uuids.emplace_back().data(), device.uuid, sizeof device.uuid);
  }
  std::vector<VisibleDevice> chosen;
  for (size_t index : client::visibleDeviceIndices(visible, uuids)) chosen.push_back(all[index]);
  return chosen;
}

}  // namespace gpupool::nvml
