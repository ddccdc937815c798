#include "client/nvml/visible_devices.h"

#include <cstdio>
#include <optional>

namespace gpupool::nvml {
namespace {

std::string uuidHex(const unsigned char (&uuid)[16]) {
  std::string hex;
  for (unsigned char c : uuid) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  return hex;
}

}  // namespace

std::string formatGpuUuid(const unsigned char (&uuid)[16]) {
  std::string hex = uuidHex(uuid);
  return "GPU-" + hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

std::vector<VisibleDevice> selectVisibleDevices(const std::vector<VisibleDevice>& all,
                                                const char* visible) {
  if (!visible) return all;
  std::vector<VisibleDevice> chosen;
  std::string list = visible;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string item =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::optional<size_t> index;
    if (item.rfind("GPU-", 0) == 0) {
      std::string prefix = item.substr(4);
      std::erase(prefix, '-');
      for (size_t i = 0; i < all.size(); ++i) {
        if (!prefix.empty() && uuidHex(all[i].uuid).rfind(prefix, 0) == 0) index = i;
      }
    } else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos &&
               item.size() < 6 && std::stoul(item) < all.size()) {
      index = std::stoul(item);
    }
    if (!index) break;
    chosen.push_back(all[*index]);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return chosen;
}

}  // namespace gpupool::nvml
