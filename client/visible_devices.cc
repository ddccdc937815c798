#include "client/visible_devices.h"

#include <cstdio>
#include <optional>

namespace gpupool::client {

std::string uuidHex(const DeviceUuid& uuid) {
  std::string hex;
  for (unsigned char c : uuid) {
    char digits[3];
    std::snprintf(digits, sizeof digits, "%02x", c);
    hex += digits;
  }
  return hex;
}

std::vector<size_t> visibleDeviceIndices(const char* visible,
                                         const std::vector<DeviceUuid>& uuids) {
  std::vector<size_t> chosen;
  if (!visible) {
    for (size_t i = 0; i < uuids.size(); ++i) chosen.push_back(i);
    return chosen;
  }
  std::string list = visible;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::optional<size_t> index;
    // A MIG instance is named by its own UUID ("MIG-…", as nvidia-smi -L and the pool's status
    // show it); its bytes are what the server reports for the instance.
    if (item.rfind("GPU-", 0) == 0 || item.rfind("MIG-", 0) == 0) {
      std::string prefix = item.substr(4);
      std::erase(prefix, '-');
      for (size_t i = 0; i < uuids.size(); ++i) {
        if (!prefix.empty() && uuidHex(uuids[i]).rfind(prefix, 0) == 0) index = i;
      }
    } else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos &&
               item.size() < 6 && std::stoul(item) < uuids.size()) {
      index = std::stoul(item);
    }
    if (!index) break;
    chosen.push_back(*index);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return chosen;
}

}  // namespace gpupool::client
