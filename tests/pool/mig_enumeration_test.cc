// MIG enumeration against NVML answers recorded on real machines (an A100 with MIG enabled and two
// instances plus an empty slot, an H100 with MIG disabled but pending, a T4 without MIG support),
// replayed through NvmlQueries.
#include "server/mig_enumeration.h"

#include <gtest/gtest.h>

#include <map>

#include "server/device_uuid.h"

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
  int gpuInstanceId(NvmlHandle device, unsigned* id) override { return instanceIds(device, id, 0); }
  int computeInstanceId(NvmlHandle device, unsigned* id) override {
    return instanceIds(device, id, 1);
  }
  std::string errorString(int code) override { return code == 999 ? "Unknown Error" : "error"; }

 private:
  // The recorded A100's instances: GPU instances 1 and 9, compute instance 0 of each.
  int instanceIds(NvmlHandle device, unsigned* id, int which) {
    for (size_t i = 0; i < instances.size(); ++i) {
      if (device == &instances[i]) {
        *id = which == 0 ? (i == 0 ? 1u : 9u) : 0u;
        return kNvmlSuccess;
      }
    }
    return kNvmlNotSupported;
  }
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
  // Where each instance sits: what the client's NVML lists under the GPU.
  EXPECT_EQ(devices[0].mig.parentName, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(devices[0].mig.parentMemoryBytes, 40ull << 30);
  EXPECT_EQ(devices[0].mig.index, 0u);
  EXPECT_EQ(devices[1].mig.index, 2u);
  EXPECT_EQ(devices[1].mig.maxDevices, 3u);
  EXPECT_EQ(devices[0].mig.gpuInstanceId, 1);
  EXPECT_EQ(devices[1].mig.gpuInstanceId, 9);
  EXPECT_EQ(devices[1].mig.computeInstanceId, 0);
  EXPECT_FALSE(devices[1].mig.modeChangePending);
  EXPECT_EQ(devices[2].uuid, "GPU-0d7e1f2a-3b4c-5d6e-7f80-91a2b3c4d5e6");
  EXPECT_TRUE(devices[2].parentUuid.empty());
  EXPECT_TRUE(devices[2].migPending);  // MIG turns on at the next GPU reset
  EXPECT_EQ(devices[3].name, "Tesla T4");
  EXPECT_EQ(devices[3].gpuIndex, 2u);
}

TEST(MigEnumerationTest, DriverUuidsFindTheirInstanceWithParentAndProfile) {
  RecordedNvml nvml = recordedCluster();
  std::string error;
  auto devices = enumeratePoolDevices(nvml, &error);
  ASSERT_EQ(error, "");
  // cuDeviceGetUuid's bytes for the 1g.5gb instance (visible through CUDA_VISIBLE_DEVICES).
  std::array<uint8_t, 16> mig = {0x9f, 0x8e, 0x7d, 0x6c, 0x11, 0x11, 0x4b, 0x3a,
                                 0x8c, 0x2d, 0x1e, 0x0f, 0x9a, 0x8b, 0x7c, 0x6d};
  const PoolDeviceCandidate* instance = findPoolDevice(devices, mig);
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(instance->uuid, "MIG-9f8e7d6c-1111-4b3a-8c2d-1e0f9a8b7c6d");
  EXPECT_EQ(instance->parentUuid, "GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11");
  EXPECT_EQ(instance->profile, "1g.5gb");
  EXPECT_EQ(formatDeviceUuid("MIG-", mig), instance->uuid);
  // A whole GPU is itself, without parent or profile.
  std::array<uint8_t, 16> t4 = {0xaa, 0x11, 0xbb, 0x22, 0xcc, 0x33, 0xdd, 0x44,
                                0xee, 0x55, 0xff, 0x66, 0x77, 0x88, 0x99, 0x00};
  const PoolDeviceCandidate* gpu = findPoolDevice(devices, t4);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->name, "Tesla T4");
  EXPECT_TRUE(gpu->parentUuid.empty());
  EXPECT_TRUE(gpu->profile.empty());
  // The A100 in MIG mode is offered only as its instances; an unknown UUID is not found.
  std::array<uint8_t, 16> a100 = {0x5c, 0x2a, 0x9d, 0x0e, 0x7a, 0x36, 0x2e, 0x1c,
                                  0x7d, 0x0b, 0x0f, 0x1f, 0x5e, 0x3d, 0x8a, 0x11};
  EXPECT_EQ(findPoolDevice(devices, a100), nullptr);
  EXPECT_EQ(findPoolDevice(devices, {}), nullptr);
}

TEST(MigEnumerationTest, UuidTextIsMatchedWhateverItsCaseAndDashes) {
  std::array<uint8_t, 16> bytes = {0x5c, 0x2a, 0x9d, 0x0e, 0x7a, 0x36, 0x2e, 0x1c,
                                   0x7d, 0x0b, 0x0f, 0x1f, 0x5e, 0x3d, 0x8a, 0x11};
  EXPECT_TRUE(deviceUuidMatches("GPU-5C2A9D0E-7A36-2E1C-7D0B-0F1F5E3D8A11", bytes));
  EXPECT_TRUE(deviceUuidMatches("MIG-5c2a9d0e7a362e1c7d0b0f1f5e3d8a11", bytes));
  EXPECT_FALSE(deviceUuidMatches("GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a12", bytes));
  EXPECT_FALSE(deviceUuidMatches("GPU-5c2a9d0e", bytes));
  EXPECT_EQ(deviceUuidDigits("MIG-GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11/1/0"), "");
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
  auto nvml = openNvml("libnvidia-ml.so.1", &error);
  if (nvml) GTEST_SKIP() << "this machine has NVML";
  EXPECT_NE(error.find("libnvidia-ml.so.1"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpupool::server
