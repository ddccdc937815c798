// More of CUB and Thrust, checked against the host: thrust::unique, stable_partition,
// set_union / set_intersection; cub::DeviceMergeSort (custom comparator), DeviceSegmentedReduce,
// DeviceSelect::If, DeviceHistogram::HistogramEven and DeviceRunLengthEncode::Encode.
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/partition.h>
#include <thrust/set_operations.h>
#include <thrust/unique.h>

#include <algorithm>
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <numeric>
#include <vector>

#include "self_check.h"

struct Positive {
  __host__ __device__ bool operator()(int x) const { return x > 0; }
};
struct Descending {
  __host__ __device__ bool operator()(int a, int b) const { return a > b; }
};

template <typename T>
std::vector<T> toHost(const T* device, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Runs a CUB call twice, the first time for its temporary-storage size.
template <typename Call>
void withTemp(Call call) {
  size_t bytes = 0;
  CHECK_CUDA(call(nullptr, bytes));
  void* temp;
  CHECK_CUDA(cudaMalloc(&temp, bytes));
  CHECK_CUDA(call(temp, bytes));
  CHECK_CUDA(cudaFree(temp));
}

int main() {
  const int n = 3000;
  std::vector<int> data(n);
  unsigned state = 11;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    data[i] = static_cast<int>((state >> 9) % 201) - 100;
  }
  std::vector<int> runs = data;  // runs of equal values for unique / run-length encode
  for (int i = 1; i < n; ++i)
    if ((data[i] & 3) != 0) runs[i] = runs[i - 1];

  thrust::device_vector<int> d(runs.begin(), runs.end());
  const int kept = static_cast<int>(thrust::unique(d.begin(), d.end()) - d.begin());
  std::vector<int> expectedUnique = runs;
  expectedUnique.erase(std::unique(expectedUnique.begin(), expectedUnique.end()),
                       expectedUnique.end());
  CHECK(kept == static_cast<int>(expectedUnique.size()), "unique kept %d, expected %zu", kept,
        expectedUnique.size());
  thrust::host_vector<int> h(d.begin(), d.begin() + kept);
  for (int i = 0; i < kept; ++i)
    CHECK(h[i] == expectedUnique[i], "unique[%d] = %d, expected %d", i, h[i], expectedUnique[i]);

  thrust::device_vector<int> p(data.begin(), data.end());
  thrust::stable_partition(p.begin(), p.end(), Positive());
  std::vector<int> expectedPartition = data;
  std::stable_partition(expectedPartition.begin(), expectedPartition.end(), Positive());
  h = p;
  for (int i = 0; i < n; ++i)
    CHECK(h[i] == expectedPartition[i], "stable_partition[%d] = %d, expected %d", i, h[i],
          expectedPartition[i]);

  std::vector<int> a(data.begin(), data.begin() + n / 2), b(data.begin() + n / 2, data.end());
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  thrust::device_vector<int> da(a.begin(), a.end()), db(b.begin(), b.end()), dr(n);
  std::vector<int> expectedSet;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(expectedSet));
  int count = static_cast<int>(
      thrust::set_union(da.begin(), da.end(), db.begin(), db.end(), dr.begin()) - dr.begin());
  h = dr;
  CHECK(count == static_cast<int>(expectedSet.size()), "set_union: %d, expected %zu", count,
        expectedSet.size());
  for (int i = 0; i < count; ++i) CHECK(h[i] == expectedSet[i], "set_union[%d]", i);
  expectedSet.clear();
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(expectedSet));
  count = static_cast<int>(
      thrust::set_intersection(da.begin(), da.end(), db.begin(), db.end(), dr.begin()) -
      dr.begin());
  h = dr;
  CHECK(count == static_cast<int>(expectedSet.size()), "set_intersection: %d, expected %zu", count,
        expectedSet.size());
  for (int i = 0; i < count; ++i) CHECK(h[i] == expectedSet[i], "set_intersection[%d]", i);
  std::printf("thrust unique, stable_partition, set operations ok\n");

  int *in, *out, *offsets, *selectedCount;
  CHECK_CUDA(cudaMalloc(&in, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&out, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&offsets, 8 * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&selectedCount, sizeof(int)));
  CHECK_CUDA(cudaMemcpy(in, data.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(out, data.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  withTemp([&](void* t, size_t& bytes) {
    return cub::DeviceMergeSort::SortKeys(t, bytes, out, n, Descending());
  });
  std::vector<int> expected = data;
  std::sort(expected.begin(), expected.end(), Descending());
  std::vector<int> got = toHost(out, n);
  for (int i = 0; i < n; ++i)
    CHECK(got[i] == expected[i], "DeviceMergeSort[%d] = %d, expected %d", i, got[i], expected[i]);

  const int segmentStarts[6] = {0, 10, 10, 700, 2999, n};  // an empty and a one-item segment
  CHECK_CUDA(cudaMemcpy(offsets, segmentStarts, sizeof(segmentStarts), cudaMemcpyHostToDevice));
  withTemp([&](void* t, size_t& bytes) {
    return cub::DeviceSegmentedReduce::Sum(t, bytes, in, out, 5, offsets, offsets + 1);
  });
  got = toHost(out, 5);
  for (int s = 0; s < 5; ++s) {
    const int sum =
        std::accumulate(data.begin() + segmentStarts[s], data.begin() + segmentStarts[s + 1], 0);
    CHECK(got[s] == sum, "segment %d sum %d, expected %d", s, got[s], sum);
  }

  withTemp([&](void* t, size_t& bytes) {
    return cub::DeviceSelect::If(t, bytes, in, out, selectedCount, n, Positive());
  });
  expected.clear();
  std::copy_if(data.begin(), data.end(), std::back_inserter(expected), Positive());
  const int selected = toHost(selectedCount, 1)[0];
  CHECK(selected == static_cast<int>(expected.size()), "DeviceSelect::If kept %d, expected %zu",
        selected, expected.size());
  got = toHost(out, selected);
  for (int i = 0; i < selected; ++i) CHECK(got[i] == expected[i], "DeviceSelect::If[%d]", i);

  withTemp([&](void* t, size_t& bytes) {
    return cub::DeviceHistogram::HistogramEven(t, bytes, in, out, 11, -100, 101, n);
  });
  got = toHost(out, 10);
  for (int bin = 0; bin < 10; ++bin) {
    // 10 even bins over [-100, 101): a sample's bin is (x + 100) * 10 / 201.
    int expectedCount = 0;
    for (int x : data) expectedCount += (x + 100) * 10 / 201 == bin;
    CHECK(got[bin] == expectedCount, "histogram bin %d: %d, expected %d", bin, got[bin],
          expectedCount);
  }

  int *uniqueOut, *lengths;
  CHECK_CUDA(cudaMalloc(&uniqueOut, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&lengths, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(in, runs.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  withTemp([&](void* t, size_t& bytes) {
    return cub::DeviceRunLengthEncode::Encode(t, bytes, in, uniqueOut, lengths, selectedCount, n);
  });
  const int runCount = toHost(selectedCount, 1)[0];
  CHECK(runCount == static_cast<int>(expectedUnique.size()), "%d runs, expected %zu", runCount,
        expectedUnique.size());
  std::vector<int> runValues = toHost(uniqueOut, runCount), runLengths = toHost(lengths, runCount);
  int at = 0;
  for (int r = 0; r < runCount; ++r) {
    CHECK(runValues[r] == runs[at], "run %d value %d, expected %d", r, runValues[r], runs[at]);
    int length = 0;
    while (at + length < n && runs[at + length] == runs[at]) ++length;
    CHECK(runLengths[r] == length, "run %d length %d, expected %d", r, runLengths[r], length);
    at += length;
  }
  std::printf("cub merge sort, segmented reduce, select, histogram, run-length encode ok\n");
  for (int* q : {in, out, offsets, selectedCount, uniqueOut, lengths}) CHECK_CUDA(cudaFree(q));
  return pass();
}
