// What the server's NVML says of each pooled GPU (temperature, power, current clocks, performance
// state, fan, utilization, ECC counts, BAR1, serial), for status replies and so for the clients'
// NVML (docs/nvml.md). Readings are cached for a second: a status request per client per second
// from many monitoring clients costs NVML one reading per device per second.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/device_sensor_figures.h"
#include "protocol/gpupool.capnp.h"
#include "server/nvml_queries.h"

namespace gpupool::server {

class DeviceSensors {
 public:
  // `gpus[i]` is the NVML handle of backend device i's GPU (the parent GPU of a MIG instance:
  // sensors and counters are the board's), or null when NVML does not list that device.
  DeviceSensors(std::unique_ptr<NvmlQueries> nvml, std::vector<NvmlHandle> gpus,
                std::chrono::milliseconds ttl = std::chrono::seconds(1));

  // The NVIDIA driver's version as NVML reports it; empty when it does not.
  const std::string& driverVersion() const { return driverVersion_; }

  // Writes device `index`'s reading (at most ttl old); leaves `out` at its defaults (unread) for
  // a device NVML does not know.
  void fill(unsigned index, wire::DeviceSensors::Builder out);

 private:
  struct Reading {
    protocol::SensorFigures figures;  // clocks by NvmlClock, ECC by [NvmlEccError][NvmlEccCounter]
    std::chrono::steady_clock::time_point at;
    bool valid = false;
  };
  Reading read(NvmlHandle gpu);

  std::unique_ptr<NvmlQueries> nvml_;
  std::vector<NvmlHandle> gpus_;
  std::chrono::milliseconds ttl_;
  std::string driverVersion_;
  std::mutex mutex_;
  std::vector<Reading> readings_;
};

}  // namespace gpupool::server
