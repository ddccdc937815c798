#include "server/device_sensors.h"

namespace gpupool::server {

DeviceSensors::DeviceSensors(std::unique_ptr<NvmlQueries> nvml, std::vector<NvmlHandle> gpus,
                             std::chrono::milliseconds ttl)
    : nvml_(std::move(nvml)), gpus_(std::move(gpus)), ttl_(ttl), readings_(gpus_.size()) {
  if (nvml_->driverVersion(&driverVersion_) != kNvmlSuccess) driverVersion_.clear();
}

DeviceSensors::Reading DeviceSensors::read(NvmlHandle gpu) {
  Reading reading;
  protocol::SensorFigures& r = reading.figures;
  // Each figure NVML answers; the others stay unread (-1), which clients report as not supported.
  auto take = [](int64_t* into, auto&& ask) {
    unsigned value = 0;
    if (ask(&value) == kNvmlSuccess) *into = value;
  };
  take(&r.temperatureC, [&](unsigned* v) { return nvml_->temperature(gpu, v); });
  take(&r.powerUsageMw, [&](unsigned* v) { return nvml_->powerUsage(gpu, v); });
  take(&r.powerLimitMw, [&](unsigned* v) { return nvml_->enforcedPowerLimit(gpu, v); });
  take(&r.powerManagementLimitMw, [&](unsigned* v) { return nvml_->powerManagementLimit(gpu, v); });
  for (unsigned c = 0; c < 4; ++c) {
    take(&r.clockMhz[c],
         [&](unsigned* v) { return nvml_->clock(gpu, static_cast<NvmlClock>(c), v); });
  }
  take(&r.performanceState, [&](unsigned* v) { return nvml_->performanceState(gpu, v); });
  take(&r.fanSpeedPercent, [&](unsigned* v) { return nvml_->fanSpeed(gpu, v); });
  unsigned gpuBusy = 0, memoryBusy = 0;
  if (nvml_->utilization(gpu, &gpuBusy, &memoryBusy) == kNvmlSuccess) {
    r.gpuUtilization = gpuBusy;
    r.memoryUtilization = memoryBusy;
  }
  for (unsigned e = 0; e < 2; ++e) {
    for (unsigned c = 0; c < 2; ++c) {
      uint64_t count = 0;
      if (nvml_->eccErrors(gpu, static_cast<NvmlEccError>(e), static_cast<NvmlEccCounter>(c),
                           &count) == kNvmlSuccess) {
        r.ecc[e][c] = static_cast<int64_t>(count);
      }
    }
  }
  uint64_t total = 0, used = 0;
  if (nvml_->bar1Memory(gpu, &total, &used) == kNvmlSuccess) {
    r.bar1Total = static_cast<int64_t>(total);
    r.bar1Used = static_cast<int64_t>(used);
  }
  if (nvml_->serial(gpu, &r.serial) != kNvmlSuccess) r.serial.clear();
  reading.at = std::chrono::steady_clock::now();
  reading.valid = true;
  return reading;
}

void DeviceSensors::fill(unsigned index, wire::DeviceSensors::Builder out) {
  if (index >= gpus_.size() || !gpus_[index]) return;
  std::lock_guard lock(mutex_);
  Reading& r = readings_[index];
  if (!r.valid || std::chrono::steady_clock::now() - r.at >= ttl_) r = read(gpus_[index]);
  protocol::writeSensorFigures(r.figures, out);
}

}  // namespace gpupool::server
