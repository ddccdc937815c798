// MIG enumeration against NVML answers recorded on real machines (an A100 with MIG enabled and two
// instances plus an empty slot, an H100 with MIG disabled but pending, a T4 without MIG support),
// replayed through NvmlQueries.
#include "server/mig_enumeration.h"

#include <gtest/gtest.h>

#include <map>

namespace gpupool::server {
namespace {

struct RecordedDevice {
  std::string uuid, name;
  uint64_t memory = 0;
  int migModeResult = kNvmlSuccess;
  unsigned migCurrent = 0, migPending = 0;
  std::vector<int> slots;  // per MIG slot: the index into `instances`, or -1 for NOT_FOUND
};

class RecordedNvml final : public NvmlQueries {
 public:
  std::vector<RecordedDevice> gpus;
  std::vector<RecordedDevice> instances;
  int failUuidOfInstance = -1;

  int deviceCount(unsigned* count) override {
    *count = static_cast<unsigned>(gpus.size());
    return kNvmlSuccess;
  }
  int deviceHandle(unsigned index, NvmlHandle* device) override {
    *device = &gpus.at(index);
    return kNvmlSuccess;
  }
  int uuid(NvmlHandle device, std::string* out) override {
    auto* d = static_cast<RecordedDevice*>(device);
    if (failUuidOfInstance >= 0 && d == &instances[failUuidOfInstance]) return 999;
    *out = d->uuid;
    return kNvmlSuccess;
  }
  int name(NvmlHandle device, std::string* out) override {
    *out = static_cast<RecordedDevice*>(device)->name;
    return kNvmlSuccess;
  }
  int memoryTotal(NvmlHandle device, uint64_t* bytes) override {
    *bytes = static_cast<RecordedDevice*>(device)->memory;
    return kNvmlSuccess;
  }
  int migMode(NvmlHandle device, unsigned* current, unsigned* pending) override {
    auto* d = static_cast<RecordedDevice*>(device);
    *current = d->migCurrent;
    *pending = d->migPending;
    return d->migModeResult;
  }
  int maxMigDeviceCount(NvmlHandle device, unsigned* count) override {
    *count = static_cast<unsigned>(static_cast<RecordedDevice*>(device)->slots.size());
    return kNvmlSuccess;
  }
  int migDeviceHandle(NvmlHandle device, unsigned index, NvmlHandle* mig) override {
    int slot = static_cast<RecordedDevice*>(device)->slots.at(index);
    if (slot < 0) return kNvmlNotFound;
    *mig = &instances.at(static_cast<size_t>(slot));
    return kNvmlSuccess;
  }
  std::string errorString(int code) override { return code == 999 ? "Unknown Error" : "error"; }
};

RecordedNvml recordedCluster() {
  RecordedNvml nvml;
  nvml.instances = {
      {"MIG-1a2b3c4d-0000-5e6f-8a9b-0c1d2e3f4a5b",
       "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
       20ull << 30,
       kNvmlSuccess,
       0,
       0,
       {}},
      {"MIG-9f8e7d6c-1111-4b3a-8c2d-1e0f9a8b7c6d",
       "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
       5ull << 30,
       kNvmlSuccess,
       0,
       0,
       {}},
  };
  nvml.gpus = {
      {"GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11",
       "NVIDIA A100-SXM4-40GB",
       40ull << 30,
       kNvmlSuccess,
       1,
       1,
       {0, -1, 1}},
      {"GPU-0d7e1f2a-3b4c-5d6e-7f80-91a2b3c4d5e6",
       "NVIDIA H100 80GB HBM3",
       80ull << 30,
       kNvmlSuccess,
       0,
       1,
       {}},
      {"GPU-aa11bb22-cc33-dd44-ee55-ff6677889900",
       "Tesla T4",
       15ull << 30,
       kNvmlNotSupported,
       0,
       0,
       {}},
  };
  return nvml;
}

TEST(MigEnumerationTest, OffersMigInstancesInsteadOfTheirParentAndWholeGpusOtherwise) {
  RecordedNvml nvml = recordedCluster();
  std::string error;
  auto devices = enumeratePoolDevices(nvml, &error);
  EXPECT_EQ(error, "");
  ASSERT_EQ(devices.size(), 4u);
  EXPECT_EQ(devices[0].uuid, "MIG-1a2b3c4d-0000-5e6f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(devices[0].parentUuid, "GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11");
  EXPECT_EQ(devices[0].profile, "3g.20gb");
  EXPECT_EQ(devices[0].memoryBytes, 20ull << 30);
  EXPECT_EQ(devices[1].profile, "1g.5gb");  // the empty slot between them is skipped
  EXPECT_EQ(devices[1].gpuIndex, 0u);
  EXPECT_EQ(devices[2].uuid, "GPU-0d7e1f2a-3b4c-5d6e-7f80-91a2b3c4d5e6");
  EXPECT_TRUE(devices[2].parentUuid.empty());
  EXPECT_TRUE(devices[2].migPending);  // MIG turns on at the next GPU reset
  EXPECT_EQ(devices[3].name, "Tesla T4");
  EXPECT_EQ(devices[3].gpuIndex, 2u);
}

TEST(MigEnumerationTest, AFailingNvmlCallIsNamed) {
  RecordedNvml nvml = recordedCluster();
  nvml.failUuidOfInstance = 1;
  std::string error;
  EXPECT_TRUE(enumeratePoolDevices(nvml, &error).empty());
  EXPECT_EQ(error, "GPU 0 MIG slot 2: uuid: Unknown Error");
}

TEST(MigEnumerationTest, ReadsProfilesFromInstanceNames) {
  EXPECT_EQ(migProfileFromName("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), "1g.10gb");
  EXPECT_EQ(migProfileFromName("NVIDIA A100-PCIE-40GB"), "");
}

TEST(MigEnumerationTest, OpenNvmlSaysWhyWhereThereIsNoDriver) {
  std::string error;
  auto nvml = openNvml(&error);
  if (nvml) GTEST_SKIP() << "this machine has NVML";
  EXPECT_NE(error.find("libnvidia-ml.so.1"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpupool::server
