#include "protocol/device_sensor_figures.h"

namespace gpupool::protocol {

void writeSensorFigures(const SensorFigures& f, wire::DeviceSensors::Builder out) {
  out.setTemperatureC(f.temperatureC);
  out.setPowerUsageMw(f.powerUsageMw);
  out.setPowerLimitMw(f.powerLimitMw);
  out.setPowerManagementLimitMw(f.powerManagementLimitMw);
  out.setGraphicsClockMhz(f.clockMhz[0]);
  out.setSmClockMhz(f.clockMhz[1]);
  out.setMemoryClockMhz(f.clockMhz[2]);
  out.setVideoClockMhz(f.clockMhz[3]);
  out.setPerformanceState(f.performanceState);
  out.setFanSpeedPercent(f.fanSpeedPercent);
  out.setGpuUtilization(f.gpuUtilization);
  out.setMemoryUtilization(f.memoryUtilization);
  out.setEccCorrectedVolatile(f.ecc[0][0]);
  out.setEccCorrectedAggregate(f.ecc[0][1]);
  out.setEccUncorrectedVolatile(f.ecc[1][0]);
  out.setEccUncorrectedAggregate(f.ecc[1][1]);
  out.setBar1Total(f.bar1Total);
  out.setBar1Used(f.bar1Used);
  out.setSerial(f.serial);
}

SensorFigures readSensorFigures(wire::DeviceSensors::Reader in) {
  SensorFigures f;
  f.temperatureC = in.getTemperatureC();
  f.powerUsageMw = in.getPowerUsageMw();
  f.powerLimitMw = in.getPowerLimitMw();
  f.powerManagementLimitMw = in.getPowerManagementLimitMw();
  f.clockMhz[0] = in.getGraphicsClockMhz();
  f.clockMhz[1] = in.getSmClockMhz();
  f.clockMhz[2] = in.getMemoryClockMhz();
  f.clockMhz[3] = in.getVideoClockMhz();
  f.performanceState = in.getPerformanceState();
  f.fanSpeedPercent = in.getFanSpeedPercent();
  f.gpuUtilization = in.getGpuUtilization();
  f.memoryUtilization = in.getMemoryUtilization();
  f.ecc[0][0] = in.getEccCorrectedVolatile();
  f.ecc[0][1] = in.getEccCorrectedAggregate();
  f.ecc[1][0] = in.getEccUncorrectedVolatile();
  f.ecc[1][1] = in.getEccUncorrectedAggregate();
  f.bar1Total = in.getBar1Total();
  f.bar1Used = in.getBar1Used();
  f.serial = in.getSerial();
  return f;
}

}  // namespace gpupool::protocol
