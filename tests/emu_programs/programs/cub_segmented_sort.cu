// CUB's segmented sorts, checked against std::sort per segment: DeviceSegmentedSort::SortKeys and
// StableSortPairsDescending (segments of every size class: empty, one item, warp-sized, block-
// sized, large), and DeviceSegmentedRadixSort::SortPairs over begin and end offsets that leave
// gaps between segments (the items in the gaps must not move).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <random>
#include <vector>

#include "self_check.h"

namespace {

template <typename T>
T* toDevice(const std::vector<T>& host) {
  T* device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, host.size() * sizeof(T) + 1));
  CHECK_CUDA(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <typename T>
std::vector<T> toHost(const T* device, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Segment sizes across CUB's size classes (small, medium, large segments take different kernels).
std::vector<int> segmentOffsets() {
  const int sizes[] = {0, 1, 7, 32, 33, 150, 0, 511, 1200, 3, 4000, 64, 2};
  std::vector<int> offsets{0};
  for (int s : sizes) offsets.push_back(offsets.back() + s);
  return offsets;
}

void checkSortKeys(std::mt19937& random) {
  std::vector<int> offsets = segmentOffsets();
  const int items = offsets.back(), segments = static_cast<int>(offsets.size()) - 1;
  std::vector<uint32_t> keys(items);
  for (auto& k : keys) k = random() % 1000;  // repeats, so stability matters below
  uint32_t* in = toDevice(keys);
  uint32_t* out = toDevice(std::vector<uint32_t>(items));
  int* dOffsets = toDevice(offsets);
  size_t tempBytes = 0;
  CHECK_CUDA(cub::DeviceSegmentedSort::SortKeys(nullptr, tempBytes, in, out, items, segments,
                                                dOffsets, dOffsets + 1));
  void* temp = nullptr;
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceSegmentedSort::SortKeys(temp, tempBytes, in, out, items, segments, dOffsets,
                                                dOffsets + 1));
  std::vector<uint32_t> got = toHost(out, items);
  std::vector<uint32_t> expected = keys;
  for (int s = 0; s < segments; ++s)
    std::sort(expected.begin() + offsets[s], expected.begin() + offsets[s + 1]);
  for (int i = 0; i < items; ++i)
    CHECK(got[i] == expected[i], "SortKeys: item %d is %u, expected %u", i, got[i], expected[i]);
  std::printf("DeviceSegmentedSort::SortKeys: %d items in %d segments ok\n", items, segments);
  CHECK_CUDA(cudaFree(temp));
  CHECK_CUDA(cudaFree(in));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(dOffsets));
}

void checkStablePairsDescending(std::mt19937& random) {
  std::vector<int> offsets = segmentOffsets();
  const int items = offsets.back(), segments = static_cast<int>(offsets.size()) - 1;
  std::vector<float> keys(items);
  std::vector<int> values(items);
  for (int i = 0; i < items; ++i) {
    keys[i] = static_cast<float>(random() % 50) - 25.0f;
    values[i] = i;  // the original position: stability is checked through it
  }
  float* keysIn = toDevice(keys);
  float* keysOut = toDevice(std::vector<float>(items));
  int* valuesIn = toDevice(values);
  int* valuesOut = toDevice(std::vector<int>(items));
  int* dOffsets = toDevice(offsets);
  size_t tempBytes = 0;
  CHECK_CUDA(cub::DeviceSegmentedSort::StableSortPairsDescending(
      nullptr, tempBytes, keysIn, keysOut, valuesIn, valuesOut, items, segments, dOffsets,
      dOffsets + 1));
  void* temp = nullptr;
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceSegmentedSort::StableSortPairsDescending(temp, tempBytes, keysIn, keysOut,
                                                                 valuesIn, valuesOut, items,
                                                                 segments, dOffsets, dOffsets + 1));
  std::vector<float> gotKeys = toHost(keysOut, items);
  std::vector<int> gotValues = toHost(valuesOut, items);
  std::vector<int> order(items);
  for (int i = 0; i < items; ++i) order[i] = i;
  for (int s = 0; s < segments; ++s)
    std::stable_sort(order.begin() + offsets[s], order.begin() + offsets[s + 1],
                     [&](int a, int b) { return keys[a] > keys[b]; });
  for (int i = 0; i < items; ++i) {
    CHECK(gotValues[i] == order[i] && gotKeys[i] == keys[order[i]],
          "StableSortPairsDescending: item %d is (%g, %d), expected (%g, %d)", i, gotKeys[i],
          gotValues[i], keys[order[i]], order[i]);
  }
  std::printf("DeviceSegmentedSort::StableSortPairsDescending: %d items ok\n", items);
  CHECK_CUDA(cudaFree(temp));
  for (void* p :
       {static_cast<void*>(keysIn), static_cast<void*>(keysOut), static_cast<void*>(valuesIn),
        static_cast<void*>(valuesOut), static_cast<void*>(dOffsets)})
    CHECK_CUDA(cudaFree(p));
}

void checkRadixPairsWithGaps(std::mt19937& random) {
  // Segments [begin, end) with unsorted gaps between them, which must come out as they went in.
  const std::vector<int> begins = {0, 300, 310, 2000};
  const std::vector<int> ends = {250, 300, 1900, 2600};
  const int items = 2700, segments = static_cast<int>(begins.size());
  std::vector<uint64_t> keys(items);
  std::vector<uint16_t> values(items);
  for (int i = 0; i < items; ++i) {
    keys[i] = (static_cast<uint64_t>(random()) << 32) | random();
    values[i] = static_cast<uint16_t>(i);
  }
  uint64_t* keysIn = toDevice(keys);
  uint64_t* keysOut = toDevice(keys);  // the gaps start equal to the input
  uint16_t* valuesIn = toDevice(values);
  uint16_t* valuesOut = toDevice(values);
  int* dBegins = toDevice(begins);
  int* dEnds = toDevice(ends);
  size_t tempBytes = 0;
  CHECK_CUDA(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, tempBytes, keysIn, keysOut, valuesIn,
                                                      valuesOut, items, segments, dBegins, dEnds));
  void* temp = nullptr;
  CHECK_CUDA(cudaMalloc(&temp, tempBytes));
  CHECK_CUDA(cub::DeviceSegmentedRadixSort::SortPairs(temp, tempBytes, keysIn, keysOut, valuesIn,
                                                      valuesOut, items, segments, dBegins, dEnds));
  std::vector<uint64_t> gotKeys = toHost(keysOut, items);
  std::vector<uint16_t> gotValues = toHost(valuesOut, items);
  std::vector<int> order(items);
  for (int i = 0; i < items; ++i) order[i] = i;
  for (int s = 0; s < segments; ++s)
    std::sort(order.begin() + begins[s], order.begin() + ends[s],
              [&](int a, int b) { return keys[a] < keys[b]; });
  for (int i = 0; i < items; ++i) {
    CHECK(gotKeys[i] == keys[order[i]] && gotValues[i] == values[order[i]],
          "SegmentedRadixSort::SortPairs: item %d is (%llx, %u), expected (%llx, %u)", i,
          static_cast<unsigned long long>(gotKeys[i]), gotValues[i],
          static_cast<unsigned long long>(keys[order[i]]), values[order[i]]);
  }
  std::printf("DeviceSegmentedRadixSort::SortPairs: %d segments with gaps ok\n", segments);
  CHECK_CUDA(cudaFree(temp));
  for (void* p :
       {static_cast<void*>(keysIn), static_cast<void*>(keysOut), static_cast<void*>(valuesIn),
        static_cast<void*>(valuesOut), static_cast<void*>(dBegins), static_cast<void*>(dEnds)})
    CHECK_CUDA(cudaFree(p));
}

}  // namespace

int main() {
  std::mt19937 random(20261203);
  checkSortKeys(random);
  checkStablePairsDescending(random);
  checkRadixPairsWithGaps(random);
  return pass();
}
