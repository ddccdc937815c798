// DeviceSensors against a scripted NVML: each answered figure reaches the status reply, each
// refused one stays unread (-1), a device NVML does not know shows nothing, and readings are cached
// for the TTL.
#include "server/device_sensors.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <thread>

namespace gpupool::server {
namespace {

class ScriptedNvml final : public NvmlQueries {
 public:
  int readings = 0;
  unsigned temperatureNow = 40;

  int deviceCount(unsigned* count) override {
    *count = 1;
    return kNvmlSuccess;
  }
  int deviceHandle(unsigned, NvmlHandle* device) override {
    *device = this;
    return kNvmlSuccess;
  }
  int uuid(NvmlHandle, std::string*) override { return kNvmlNotSupported; }
  int name(NvmlHandle, std::string*) override { return kNvmlNotSupported; }
  int memoryTotal(NvmlHandle, uint64_t*) override { return kNvmlNotSupported; }
  int migMode(NvmlHandle, unsigned*, unsigned*) override { return kNvmlNotSupported; }
  int maxMigDeviceCount(NvmlHandle, unsigned*) override { return kNvmlNotSupported; }
  int migDeviceHandle(NvmlHandle, unsigned, NvmlHandle*) override { return kNvmlNotSupported; }
  std::string errorString(int) override { return "error"; }

  int driverVersion(std::string* out) override {
    *out = "550.54.15";
    return kNvmlSuccess;
  }
  int temperature(NvmlHandle, unsigned* celsius) override {
    ++readings;
    *celsius = temperatureNow;
    return kNvmlSuccess;
  }
  int clock(NvmlHandle, NvmlClock type, unsigned* mhz) override {
    if (type == NvmlClock::video) return kNvmlNotSupported;
    *mhz = 1000 + static_cast<unsigned>(type);
    return kNvmlSuccess;
  }
  int eccErrors(NvmlHandle, NvmlEccError error, NvmlEccCounter counter, uint64_t* n) override {
    *n = static_cast<uint64_t>(error) * 10 + static_cast<uint64_t>(counter);
    return kNvmlSuccess;
  }
};

TEST(DeviceSensorsTest, ReportsWhatNvmlAnswersAndNothingElse) {
  auto owned = std::make_unique<ScriptedNvml>();
  ScriptedNvml* nvml = owned.get();
  DeviceSensors sensors(std::move(owned), {nvml, nullptr}, std::chrono::milliseconds(200));
  EXPECT_EQ(sensors.driverVersion(), "550.54.15");

  capnp::MallocMessageBuilder message;
  auto device = message.initRoot<wire::DeviceSensors>();
  sensors.fill(0, device);
  EXPECT_EQ(device.getTemperatureC(), 40);
  EXPECT_EQ(device.getGraphicsClockMhz(), 1000);
  EXPECT_EQ(device.getSmClockMhz(), 1001);
  EXPECT_EQ(device.getMemoryClockMhz(), 1002);
  EXPECT_EQ(device.getVideoClockMhz(), -1);
  EXPECT_EQ(device.getEccCorrectedVolatile(), 0);
  EXPECT_EQ(device.getEccCorrectedAggregate(), 1);
  EXPECT_EQ(device.getEccUncorrectedVolatile(), 10);
  EXPECT_EQ(device.getEccUncorrectedAggregate(), 11);
  EXPECT_EQ(device.getPowerUsageMw(), -1);  // refused by this NVML: unread, not zero
  EXPECT_EQ(device.getFanSpeedPercent(), -1);
  EXPECT_EQ(device.getBar1Total(), -1);
  EXPECT_EQ(device.getSerial().size(), 0u);

  // The second device is not NVML's: nothing is filled in.
  capnp::MallocMessageBuilder other;
  auto unknown = other.initRoot<wire::DeviceSensors>();
  sensors.fill(1, unknown);
  sensors.fill(7, unknown);
  EXPECT_EQ(unknown.getTemperatureC(), -1);
  EXPECT_EQ(unknown.getSmClockMhz(), -1);
}

TEST(DeviceSensorsTest, CachesReadingsForTheirTtl) {
  auto owned = std::make_unique<ScriptedNvml>();
  ScriptedNvml* nvml = owned.get();
  DeviceSensors sensors(std::move(owned), {nvml}, std::chrono::milliseconds(300));
  capnp::MallocMessageBuilder message;
  auto device = message.initRoot<wire::DeviceSensors>();
  for (int i = 0; i < 20; ++i) sensors.fill(0, device);
  EXPECT_EQ(nvml->readings, 1);
  nvml->temperatureNow = 55;
  sensors.fill(0, device);
  EXPECT_EQ(device.getTemperatureC(), 40);  // still the cached reading
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  sensors.fill(0, device);
  EXPECT_EQ(nvml->readings, 2);
  EXPECT_EQ(device.getTemperatureC(), 55);
}

}  // namespace
}  // namespace gpupool::server
