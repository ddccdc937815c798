// gpupoold's pool configuration: the devices it serves and the tenants allowed to use them, read
// from a TOML file (`gpupoold --config FILE`). See docs/pool.md for the format.
//
// Contract: loadPoolConfig either returns a configuration that is complete and consistent (every
// key known, every value in range, names and tokens unique, quotas within the overcommitted
// capacity) or throws PoolConfigError whose message names the file, the line and the key at fault.
// Nothing is half-applied.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::server {

class PoolConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Strict order between classes: every queued launch of a higher class goes before a lower one
// (up to the starvation bound).
enum class PriorityClass { kHigh = 0, kNormal = 1, kLow = 2 };
constexpr int kPriorityClasses = 3;
const char* priorityName(PriorityClass priority);

struct DeviceConfig {
  std::string backend = "emu";  // "emu" or "cuda"
  uint64_t memoryBytes = 0;     // emu: the device's memory
  // cuda: which driver device. By ordinal, or by UUID ("GPU-…", or a MIG instance "MIG-…"); with
  // neither, the driver device whose ordinal is this entry's position in the list.
  std::optional<int> index;
  std::string uuid;
  // Where the entry and its keys are in the file (0 = unknown), so problems found only when the
  // driver is asked (no such device) still name the line.
  int line = 0, indexLine = 0, uuidLine = 0;
};

struct TenantConfig {
  std::string name;
  std::string token;
  uint64_t memoryQuota = 0;  // bytes across all devices; 0 = no quota (the devices' capacity)
  PriorityClass priority = PriorityClass::kNormal;
  double weight = 1;         // fair-share weight inside the priority class, > 0
  std::vector<int> devices;  // allowed pool devices; empty = all
  uint32_t maxSessions = 0;  // driver sessions open at once; 0 = no limit
};

// The [limits] table: connections before trust (docs/hardening.md). Unset keys leave gpupoold's
// defaults (and its command line) in force.
struct ConnectionLimits {
  std::optional<unsigned> handshakeDeadlineMs;
  std::optional<unsigned> maxUnauthenticated;
  std::optional<unsigned> maxUnauthenticatedPerSource;
};

struct PoolConfig {
  std::string path;  // where it was read from, for messages
  std::vector<DeviceConfig> devices;
  std::vector<TenantConfig> tenants;
  // Quotas may add up to this many times the pool's memory (>= 1). When devices are really full
  // the allocation that does not fit fails with CUDA_ERROR_OUT_OF_MEMORY; nothing else changes.
  double overcommit = 1.0;
  // A queued launch of a lower class waits at most this long behind higher classes.
  std::chrono::milliseconds starvationBound{500};
  // SQLite file for usage records; empty = beside the config file, "<config>.usage.db".
  std::string meteringDatabase;
  // How often usage accumulated in memory is written to the database.
  std::chrono::milliseconds meteringFlush{1000};
  ConnectionLimits connectionLimits;
};

// "FILE:LINE: device[N].KEY: problem" for a problem with device `device`'s `key` ("index",
// "uuid" or "backend") found after loading, e.g. by the backend.
std::string deviceConfigProblem(const PoolConfig& config, size_t device, const std::string& key,
                                const std::string& problem);

// Empty when the tenants' quotas fit `capacity` bytes times the overcommit factor, else the
// problem. Checked at load for emu pools and by gpupoold, once the devices are known, for cuda.
std::string quotaProblem(const PoolConfig& config, uint64_t capacity);

// Reads and checks `path`. Throws PoolConfigError ("FILE:LINE: KEY: problem").
PoolConfig loadPoolConfig(const std::string& path);
// The same for text already in memory; `path` is only used in messages.
PoolConfig parsePoolConfig(std::string_view text, const std::string& path);

// "4GiB", "512MiB", "64KiB", "1G", or a byte count. nullopt when it is not a size.
std::optional<uint64_t> parseByteSize(std::string_view text);

}  // namespace gpupool::server
