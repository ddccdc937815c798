// CUB device-wide algorithms with their two-phase temporary-storage protocol: DeviceRadixSort
// (keys, and pairs with duplicate keys: stable), DeviceReduce (Sum, Max) and DeviceScan
// (ExclusiveSum), checked against the host.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <numeric>
#include <vector>

#include "self_check.h"

template <typename T>
T* toDevice(const std::vector<T>& host) {
  T* device;
  CHECK_CUDA(cudaMalloc(&device, host.size() * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <typename T>
std::vector<T> toHost(const T* device, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

int main() {
  const int n = 6000;
  std::vector<unsigned> keys(n);
  std::vector<int> values(n);
  unsigned state = 99;
  for (int i = 0; i < n; ++i) {
    state = state * 1103515245u + 12345u;
    keys[i] = (state >> 4) % 1500u;
    values[i] = i;
  }
  unsigned *dkeysIn = toDevice(keys), *dkeysOut;
  int *dvaluesIn = toDevice(values), *dvaluesOut;
  CHECK_CUDA(cudaMalloc(&dkeysOut, n * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&dvaluesOut, n * sizeof(int)));

  size_t tempBytes = 0;
  CHECK_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, tempBytes, dkeysIn, dkeysOut, dvaluesIn,
                                             dvaluesOut, n));
  void* temp;
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, tempBytes, dkeysIn, dkeysOut, dvaluesIn,
                                             dvaluesOut, n));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> order(values);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  auto sortedKeys = toHost(dkeysOut, n);
  auto sortedValues = toHost(dvaluesOut, n);
  for (int i = 0; i < n; ++i)
    CHECK(sortedKeys[i] == keys[order[i]] && sortedValues[i] == order[i],
          "SortPairs[%d] = (%u, %d), expected (%u, %d)", i, sortedKeys[i], sortedValues[i],
          keys[order[i]], order[i]);
  CHECK_CUDA(cudaFree(temp));

  tempBytes = 0;
  CHECK_CUDA(cub::DeviceRadixSort::SortKeysDescending(nullptr, tempBytes, dkeysIn, dkeysOut, n));
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceRadixSort::SortKeysDescending(temp, tempBytes, dkeysIn, dkeysOut, n));
  std::vector<unsigned> descending(keys);
  std::sort(descending.begin(), descending.end(), std::greater<unsigned>());
  sortedKeys = toHost(dkeysOut, n);
  for (int i = 0; i < n; ++i)
    CHECK(sortedKeys[i] == descending[i], "SortKeysDescending[%d] = %u, expected %u", i,
          sortedKeys[i], descending[i]);
  CHECK_CUDA(cudaFree(temp));
  std::printf("DeviceRadixSort ok\n");

  std::vector<int> data(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<int>(keys[i]) - 700;
  int* ddata = toDevice(data);
  int *dsum, *dmax;
  CHECK_CUDA(cudaMalloc(&dsum, sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dmax, sizeof(int)));
  tempBytes = 0;
  CHECK_CUDA(cub::DeviceReduce::Sum(nullptr, tempBytes, ddata, dsum, n));
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceReduce::Sum(temp, tempBytes, ddata, dsum, n));
  CHECK_CUDA(cudaFree(temp));
  tempBytes = 0;
  CHECK_CUDA(cub::DeviceReduce::Max(nullptr, tempBytes, ddata, dmax, n));
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceReduce::Max(temp, tempBytes, ddata, dmax, n));
  CHECK_CUDA(cudaFree(temp));
  const int sum = toHost(dsum, 1)[0], maximum = toHost(dmax, 1)[0];
  const int expectedSum = std::accumulate(data.begin(), data.end(), 0);
  const int expectedMax = *std::max_element(data.begin(), data.end());
  CHECK(sum == expectedSum, "DeviceReduce::Sum = %d, expected %d", sum, expectedSum);
  CHECK(maximum == expectedMax, "DeviceReduce::Max = %d, expected %d", maximum, expectedMax);
  std::printf("DeviceReduce ok\n");

  int* dscan;
  CHECK_CUDA(cudaMalloc(&dscan, n * sizeof(int)));
  tempBytes = 0;
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, tempBytes, ddata, dscan, n));
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceScan::ExclusiveSum(temp, tempBytes, ddata, dscan, n));
  CHECK_CUDA(cudaFree(temp));
  auto scanned = toHost(dscan, n);
  int running = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(scanned[i] == running, "ExclusiveSum[%d] = %d, expected %d", i, scanned[i], running);
    running += data[i];
  }
  std::printf("DeviceScan ok\n");
  for (void* p :
       {static_cast<void*>(dkeysIn), static_cast<void*>(dkeysOut), static_cast<void*>(dvaluesIn),
        static_cast<void*>(dvaluesOut), static_cast<void*>(ddata), static_cast<void*>(dsum),
        static_cast<void*>(dmax), static_cast<void*>(dscan)})
    CHECK_CUDA(cudaFree(p));
  return pass();
}
