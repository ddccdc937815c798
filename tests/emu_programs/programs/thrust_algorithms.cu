// Thrust algorithms on device vectors, as a user writes them: sort, sort_by_key (stable on
// duplicate keys), reduce, inclusive and exclusive scan, transform_reduce and copy_if, each checked
// against the host's std:: result. Sizes span several CUB tiles so the multi-block paths run.
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform_reduce.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "self_check.h"

struct IsEven {
  __host__ __device__ bool operator()(int x) const { return x % 2 == 0; }
};
struct Square {
  __host__ __device__ long long operator()(int x) const { return static_cast<long long>(x) * x; }
};

int main() {
  const int n = 5000;
  std::vector<int> data(n);
  unsigned state = 7;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    data[i] = static_cast<int>(state >> 8) % 20001 - 10000;
  }

  thrust::device_vector<int> d(data.begin(), data.end());
  thrust::sort(d.begin(), d.end());
  std::vector<int> sorted = data;
  std::sort(sorted.begin(), sorted.end());
  thrust::host_vector<int> h = d;
  for (int i = 0; i < n; ++i)
    CHECK(h[i] == sorted[i], "sort[%d] = %d, expected %d", i, h[i], sorted[i]);
  std::printf("sort ok\n");

  std::vector<unsigned> keys(n);
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) {
    keys[i] = static_cast<unsigned>(data[i] + 10000) % 97u;  // many duplicates
    values[i] = i;
  }
  thrust::device_vector<unsigned> dk(keys.begin(), keys.end());
  thrust::device_vector<int> dv(values.begin(), values.end());
  thrust::sort_by_key(dk.begin(), dk.end(), dv.begin());
  std::vector<int> order(values);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  thrust::host_vector<unsigned> hk = dk;
  thrust::host_vector<int> hv = dv;
  for (int i = 0; i < n; ++i)
    CHECK(hk[i] == keys[order[i]] && hv[i] == order[i],
          "sort_by_key[%d] = (%u, %d), expected (%u, %d)", i, hk[i], hv[i], keys[order[i]],
          order[i]);
  std::printf("sort_by_key ok\n");

  thrust::device_vector<int> src(data.begin(), data.end());
  const long long sum = thrust::reduce(src.begin(), src.end(), 0LL);
  const long long expectedSum = std::accumulate(data.begin(), data.end(), 0LL);
  CHECK(sum == expectedSum, "reduce = %lld, expected %lld", sum, expectedSum);
  const int maximum = thrust::reduce(src.begin(), src.end(), -1000000, thrust::maximum<int>());
  CHECK(maximum == sorted.back(), "reduce max = %d, expected %d", maximum, sorted.back());
  const long long squares =
      thrust::transform_reduce(src.begin(), src.end(), Square(), 0LL, thrust::plus<long long>());
  long long expectedSquares = 0;
  for (int x : data) expectedSquares += static_cast<long long>(x) * x;
  CHECK(squares == expectedSquares, "transform_reduce = %lld, expected %lld", squares,
        expectedSquares);
  std::printf("reduce ok\n");

  thrust::device_vector<int> scanned(n);
  thrust::inclusive_scan(src.begin(), src.end(), scanned.begin());
  thrust::host_vector<int> hs = scanned;
  int running = 0;
  for (int i = 0; i < n; ++i) {
    running += data[i];
    CHECK(hs[i] == running, "inclusive_scan[%d] = %d, expected %d", i, hs[i], running);
  }
  thrust::exclusive_scan(src.begin(), src.end(), scanned.begin(), 5);
  hs = scanned;
  running = 5;
  for (int i = 0; i < n; ++i) {
    CHECK(hs[i] == running, "exclusive_scan[%d] = %d, expected %d", i, hs[i], running);
    running += data[i];
  }
  std::printf("scan ok\n");

  thrust::device_vector<int> evens(n);
  auto end = thrust::copy_if(src.begin(), src.end(), evens.begin(), IsEven());
  std::vector<int> expectedEvens;
  std::copy_if(data.begin(), data.end(), std::back_inserter(expectedEvens), IsEven());
  const int count = static_cast<int>(end - evens.begin());
  CHECK(count == static_cast<int>(expectedEvens.size()), "copy_if kept %d, expected %zu", count,
        expectedEvens.size());
  thrust::host_vector<int> he(evens.begin(), end);
  for (int i = 0; i < count; ++i)
    CHECK(he[i] == expectedEvens[i], "copy_if[%d] = %d, expected %d", i, he[i], expectedEvens[i]);
  std::printf("copy_if ok\n");
  return pass();
}
