// The attributes the pool sends clients: a device that can do everything is shown without the
// capabilities the client does not serve, and with everything else as the device reports it.
#include "server/served_capabilities.h"

#include <gtest/gtest.h>

namespace gpupool::server {
namespace {

TEST(ServedCapabilities, UnservedCapabilitiesReadAsUnsupported) {
  std::vector<int32_t> device(CU_DEVICE_ATTRIBUTE_MAX, 1);
  std::vector<int32_t> served = servedAttributes(device);
  ASSERT_EQ(served.size(), device.size());
  for (CUdevice_attribute withheld :
       {CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
        CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES,
        CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS,
        CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK,
        CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED}) {
    EXPECT_EQ(served[withheld], 0) << "attribute " << withheld;
  }
  EXPECT_EQ(served[CU_DEVICE_ATTRIBUTE_NUMA_ID], -1);
}

// Tensor maps are encoded by the backend (client/tensor_map_api.cc), and cluster launches and
// their occupancy go to the device's driver, so the device's answer holds.
TEST(ServedCapabilities, TensorMapAccessAndClusterLaunchAreTheDevicesAnswer) {
  for (int32_t value : {0, 1}) {
    std::vector<int32_t> device(CU_DEVICE_ATTRIBUTE_MAX, value);
    EXPECT_EQ(servedAttributes(device)[CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED], value);
    EXPECT_EQ(servedAttributes(device)[CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH], value);
  }
}

TEST(ServedCapabilities, IpcEventsAreServedOnlyWhereSessionsShareEvents) {
  std::vector<int32_t> device(CU_DEVICE_ATTRIBUTE_MAX, 1);
  EXPECT_EQ(servedAttributes(device)[CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED], 0);
  EXPECT_EQ(servedAttributes(device,
                             /*sessionsShareEvents=*/true)[CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED],
            1);
  std::vector<int32_t> none(CU_DEVICE_ATTRIBUTE_MAX, 0);
  EXPECT_EQ(servedAttributes(none, true)[CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED], 1);
}

TEST(ServedCapabilities, ManagedMemoryIsServedWhateverTheDeviceSays) {
  // The pool serves managed memory itself (device memory with a client-side mirror), without
  // concurrent access, on every device.
  std::vector<int32_t> device(CU_DEVICE_ATTRIBUTE_MAX, 0);
  std::vector<int32_t> served = servedAttributes(device);
  EXPECT_EQ(served[CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY], 1);
  EXPECT_EQ(served[CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS], 0);
  EXPECT_EQ(served[CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS], 0);
}

TEST(ServedCapabilities, ServedAttributesPassThrough) {
  std::vector<int32_t> device(CU_DEVICE_ATTRIBUTE_MAX, 7);
  std::vector<int32_t> served = servedAttributes(device);
  size_t unchanged = 0;
  for (size_t a = 0; a < served.size(); ++a) unchanged += served[a] == 7;
  EXPECT_EQ(unchanged, device.size() - withheldCapabilities().size());
  // What the pool does serve keeps the device's value.
  for (CUdevice_attribute kept :
       {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
        CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED}) {
    EXPECT_EQ(served[kept], 7) << "attribute " << kept;
  }
}

TEST(ServedCapabilities, EachAttributeIsListedOnceWithAReason) {
  std::vector<bool> seen(CU_DEVICE_ATTRIBUTE_MAX, false);
  for (const WithheldCapability& w : withheldCapabilities()) {
    ASSERT_LT(static_cast<int>(w.attribute), CU_DEVICE_ATTRIBUTE_MAX);
    EXPECT_FALSE(seen[w.attribute]) << "attribute " << w.attribute << " listed twice";
    seen[w.attribute] = true;
    EXPECT_NE(std::string(w.reason), "");
  }
}

}  // namespace
}  // namespace gpupool::server
