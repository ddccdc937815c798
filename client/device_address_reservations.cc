#include "device_address_reservations.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "client_log.h"
#include "remote_session.h"

namespace gpupool::client {
namespace {

// How many addresses an allocation asks for before it gives up on finding one that no host memory
// of this process holds.
constexpr int kDeviceAddressAttempts = 8;

class DeviceAddressReservations {
 public:
  // Reserves what this process has not yet of [address, address + bytes), in whole pages. False
  // when some of it is host memory of this process already (*why names where). What could be
  // reserved stays reserved.
  bool reserve(uint64_t address, uint64_t bytes, std::string* why);

 private:
  std::mutex mutex_;
  std::map<uint64_t, uint64_t> ranges_;  // start -> end, page-aligned, disjoint, merged
};

uint64_t pageBytes() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::string hexAddress(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// The first mapping of this process that overlaps [start, end), as /proc/self/maps shows it, for
// the refusal's words ("host memory at A-B (what)").
std::string occupantOf(uint64_t start, uint64_t end) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return "host memory";
  char line[512];
  std::string found = "host memory";
  while (std::fgets(line, sizeof line, maps)) {
    unsigned long long from = 0, to = 0;
    int consumed = 0;
    if (std::sscanf(line, "%llx-%llx %*s %*s %*s %*s%n", &from, &to, &consumed) < 2) continue;
    if (from >= end || to <= start) continue;
    std::string path = consumed > 0 ? std::string(line + consumed) : "";
    path.erase(0, path.find_first_not_of(" \t"));
    if (!path.empty() && path.back() == '\n') path.pop_back();
    found = "host memory at " + hexAddress(from) + "-" + hexAddress(to) +
            (path.empty() ? "" : " (" + path + ")");
    break;
  }
  std::fclose(maps);
  return found;
}

bool DeviceAddressReservations::reserve(uint64_t address, uint64_t bytes, std::string* why) {
  const uint64_t page = pageBytes();
  if (bytes == 0) bytes = 1;
  if (address > UINT64_MAX - bytes - page) {
    *why = "the device range " + hexAddress(address) + " + " + std::to_string(bytes) +
           " wraps around the address space";
    return false;
  }
  const uint64_t start = address & ~(page - 1);
  const uint64_t end = (address + bytes + page - 1) & ~(page - 1);
  std::lock_guard lock(mutex_);
  // The gaps of [start, end) that no reservation covers yet.
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t at = start;
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (before->second > at) at = std::min(before->second, end);
  }
  for (; at < end && it != ranges_.end() && it->first < end; ++it) {
    if (it->first > at) gaps.emplace_back(at, it->first);
    at = std::max(at, std::min(it->second, end));
  }
  if (at < end) gaps.emplace_back(at, end);
  bool apart = true;
  for (auto [from, to] : gaps) {
    void* want = reinterpret_cast<void*>(from);
    void* got = ::mmap(want, to - from, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == want) {
      // Merge with the neighbours it touches.
      uint64_t first = from, last = to;
      auto next = ranges_.lower_bound(from);
      if (next != ranges_.begin()) {
        auto prev = std::prev(next);
        if (prev->second == from) {
          first = prev->first;
          ranges_.erase(prev);
        }
      }
      next = ranges_.find(to);
      if (next != ranges_.end()) {
        last = next->second;
        ranges_.erase(next);
      }
      ranges_[first] = last;
      continue;
    }
    // A kernel without MAP_FIXED_NOREPLACE (before 4.17) treats it as a hint and maps elsewhere.
    if (got != MAP_FAILED) ::munmap(got, to - from);
    if (apart) {
      *why = "the device range " + hexAddress(address) + "-" + hexAddress(address + bytes) +
             " overlaps " + occupantOf(from, to) + " of this process";
    }
    apart = false;
  }
  return apart;
}

DeviceAddressReservations& deviceAddressReservations() {
  // One address space, one record of what is reserved in it.
  static DeviceAddressReservations reservations;
  return reservations;
}

}  // namespace

bool keepDeviceRangeApart(const RemoteSession& server, uint64_t address, uint64_t bytes,
                          std::string* why) {
  if (server.reservedWindowHolds(address, bytes)) return true;
  return deviceAddressReservations().reserve(address, bytes, why);
}

bool keepFixedDeviceRangeApart(const RemoteSession& server, const std::string& what,
                               uint64_t address, uint64_t bytes) {
  std::string why;
  if (keepDeviceRangeApart(server, address, bytes, &why)) return true;
  if (logLevel() >= 1) {
    logLine(what + ": " + why +
            "; the server fixed this address, so unified copies and pointer queries refuse "
            "pointers into it (explicit copies and kernels use it as device memory)");
  }
  return false;
}

CUresult requestDeviceRangeApart(
    const char* what, const RemoteSession& server,
    const std::function<CUresult(uint64_t* address, uint64_t* bytes)>& request,
    const std::function<void(const std::vector<uint64_t>& overlapping)>& release,
    uint64_t* address) {
  std::vector<uint64_t> overlapping;
  for (int attempt = 1;; ++attempt) {
    uint64_t bytes = 0;
    if (CUresult r = request(address, &bytes); r != CUDA_SUCCESS) {
      if (!overlapping.empty()) release(overlapping);
      return r;
    }
    std::string why;
    if (keepDeviceRangeApart(server, *address, bytes, &why)) break;
    overlapping.push_back(*address);
    if (attempt == kDeviceAddressAttempts) {
      release(overlapping);
      return refuseCall(CUDA_ERROR_OUT_OF_MEMORY,
                        std::string(what) + ": " + std::to_string(attempt) +
                            " device ranges in a row were host memory of this process too; the "
                            "last: " +
                            why);
    }
    if (logLevel() >= 1) {
      logLine(std::string(what) + ": " + why + "; asking the server for another address");
    }
  }
  if (!overlapping.empty()) release(overlapping);
  return CUDA_SUCCESS;
}

}  // namespace gpupool::client
