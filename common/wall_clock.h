// Microseconds since the epoch by the system clock: NVML's accounting timestamps (a CPU
// timestamp, nvmlAccountingStats_t::startTime), kept by the server and read by the client.
#pragma once

#include <chrono>
#include <cstdint>

namespace gpupool {

inline uint64_t wallClockMicros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace gpupool
