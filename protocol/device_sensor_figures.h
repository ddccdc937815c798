// A GPU's sensor figures as the server's NVML read them (the status reply's DeviceSensors), in
// one struct the server fills and the client's NVML answers from, and its one conversion each way.
// -1 (or empty text) is a figure that was not read.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/gpupool.capnp.h"

namespace gpupool::protocol {

struct SensorFigures {
  int64_t temperatureC = -1, powerUsageMw = -1, powerLimitMw = -1, powerManagementLimitMw = -1;
  int64_t clockMhz[4] = {-1, -1, -1, -1};  // graphics, SM, memory, video (NVML's clock types)
  int64_t performanceState = -1, fanSpeedPercent = -1;
  int64_t gpuUtilization = -1, memoryUtilization = -1;
  int64_t ecc[2][2] = {{-1, -1}, {-1, -1}};  // [corrected, uncorrected][volatile, aggregate]
  int64_t bar1Total = -1, bar1Used = -1;
  std::string serial;
};

void writeSensorFigures(const SensorFigures& figures, wire::DeviceSensors::Builder out);
SensorFigures readSensorFigures(wire::DeviceSensors::Reader in);

}  // namespace gpupool::protocol
