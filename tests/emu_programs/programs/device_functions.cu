// Device functions: __noinline__ calls with many arguments, recursion (factorial, Fibonacci, a
// recursive flood count over a small grid kept on the device stack), function pointers chosen at
// run time, and __forceinline__ helpers.
#include <vector>

#include "self_check.h"

__device__ __noinline__ long long factorial(int n) { return n <= 1 ? 1 : n * factorial(n - 1); }

__device__ __noinline__ int fibonacci(int n) {
  return n < 2 ? n : fibonacci(n - 1) + fibonacci(n - 2);
}

__device__ __noinline__ float weighted(float a, float b, float c, float d, double e, int f, short g,
                                       char h) {
  return a * 1.0f + b * 2.0f + c * 3.0f + d * 4.0f + static_cast<float>(e) + f + g + h;
}

// Counts cells reachable from (x, y) over cells equal to 1 in an 8x8 grid, marking them.
__device__ __noinline__ int flood(char* grid, int x, int y) {
  if (x < 0 || y < 0 || x >= 8 || y >= 8 || grid[y * 8 + x] != 1) return 0;
  grid[y * 8 + x] = 2;
  return 1 + flood(grid, x + 1, y) + flood(grid, x - 1, y) + flood(grid, x, y + 1) +
         flood(grid, x, y - 1);
}

__device__ __forceinline__ int clampInt(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

__device__ int addOne(int x) { return x + 1; }
__device__ int timesThree(int x) { return x * 3; }
__device__ int xorMask(int x) { return x ^ 0x55; }

__global__ void recursion(long long* factorials, int* fibs) {
  const int t = threadIdx.x;
  factorials[t] = factorial(t);  // divergent recursion depth across lanes
  fibs[t] = fibonacci(t % 16);
}

__global__ void manyArguments(float* out) {
  const int t = threadIdx.x;
  out[t] = weighted(t, -t, 0.5f * t, 1.0f, 0.25 * t, t * 3, static_cast<short>(-t),
                    static_cast<char>(t % 7));
}

__global__ void floodKernel(const char* grids, int* counts) {
  char grid[64];
  for (int i = 0; i < 64; ++i) grid[i] = grids[threadIdx.x * 64 + i];
  counts[threadIdx.x] = flood(grid, 0, 0);
}

__global__ void pointers(const int* selector, int* out, int n) {
  int (*table[3])(int) = {addOne, timesThree, xorMask};
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = clampInt(table[selector[i] % 3](i), -1000, 200);
}

namespace {

int floodHost(std::vector<char>& grid, int x, int y) {
  if (x < 0 || y < 0 || x >= 8 || y >= 8 || grid[y * 8 + x] != 1) return 0;
  grid[y * 8 + x] = 2;
  return 1 + floodHost(grid, x + 1, y) + floodHost(grid, x - 1, y) + floodHost(grid, x, y + 1) +
         floodHost(grid, x, y - 1);
}

}  // namespace

int main() {
  // The flood fill recurses up to 64 deep: more than the default 1 KiB stack of a GPU thread.
  CHECK_CUDA(cudaDeviceSetLimit(cudaLimitStackSize, 32 * 1024));
  size_t stack = 0;
  CHECK_CUDA(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
  CHECK(stack >= 32 * 1024, "stack limit %zu after setting 32 KiB", stack);
  long long* dfact;
  int* dfib;
  CHECK_CUDA(cudaMalloc(&dfact, 32 * sizeof(long long)));
  CHECK_CUDA(cudaMalloc(&dfib, 32 * sizeof(int)));
  recursion<<<1, 21>>>(dfact, dfib);
  CHECK_CUDA(cudaGetLastError());
  long long fact[21];
  int fib[21];
  CHECK_CUDA(cudaMemcpy(fact, dfact, sizeof(fact), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(fib, dfib, sizeof(fib), cudaMemcpyDeviceToHost));
  long long f = 1;
  int a = 0, b = 1;
  std::vector<int> fibs;
  for (int i = 0; i < 16; ++i) {
    fibs.push_back(a);
    const int next = a + b;
    a = b;
    b = next;
  }
  for (int t = 0; t < 21; ++t) {
    if (t > 1) f *= t;
    CHECK(fact[t] == f, "factorial(%d) = %lld, expected %lld", t, fact[t], f);
    CHECK(fib[t] == fibs[t % 16], "fibonacci(%d) = %d, expected %d", t % 16, fib[t], fibs[t % 16]);
  }
  std::printf("recursion ok\n");

  float* dweighted;
  CHECK_CUDA(cudaMalloc(&dweighted, 64 * sizeof(float)));
  manyArguments<<<1, 64>>>(dweighted);
  CHECK_CUDA(cudaGetLastError());
  float weightedOut[64];
  CHECK_CUDA(cudaMemcpy(weightedOut, dweighted, sizeof(weightedOut), cudaMemcpyDeviceToHost));
  for (int t = 0; t < 64; ++t) {
    const float want = t * 1.0f + (-t) * 2.0f + 0.5f * t * 3.0f + 4.0f +
                       static_cast<float>(0.25 * t) + t * 3 + (-t) + t % 7;
    CHECK(weightedOut[t] == want, "weighted(%d) = %f, expected %f", t, weightedOut[t], want);
  }
  std::printf("eight-argument call ok\n");

  const int grids = 8;
  std::vector<char> cells(grids * 64);
  for (int g = 0; g < grids; ++g) {
    for (int i = 0; i < 64; ++i) cells[g * 64 + i] = ((i * (g + 3)) % 5 != 0 || i == 0) ? 1 : 0;
  }
  char* dcells;
  int* dcounts;
  CHECK_CUDA(cudaMalloc(&dcells, cells.size()));
  CHECK_CUDA(cudaMalloc(&dcounts, grids * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dcells, cells.data(), cells.size(), cudaMemcpyHostToDevice));
  floodKernel<<<1, grids>>>(dcells, dcounts);
  CHECK_CUDA(cudaGetLastError());
  int counts[grids];
  CHECK_CUDA(cudaMemcpy(counts, dcounts, sizeof(counts), cudaMemcpyDeviceToHost));
  for (int g = 0; g < grids; ++g) {
    std::vector<char> grid(cells.begin() + g * 64, cells.begin() + (g + 1) * 64);
    const int want = floodHost(grid, 0, 0);
    CHECK(counts[g] == want, "flood count of grid %d = %d, expected %d", g, counts[g], want);
  }
  std::printf("recursive flood fill ok\n");

  const int n = 300;
  std::vector<int> selector(n);
  for (int i = 0; i < n; ++i) selector[i] = (i * 7) % 11;
  int *dselector, *dout;
  CHECK_CUDA(cudaMalloc(&dselector, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
  CHECK_CUDA(cudaMemcpy(dselector, selector.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  pointers<<<(n + 127) / 128, 128>>>(dselector, dout, n);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> out(n);
  CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const int s = selector[i] % 3;
    int want = s == 0 ? i + 1 : s == 1 ? i * 3 : i ^ 0x55;
    want = want < -1000 ? -1000 : want > 200 ? 200 : want;
    CHECK(out[i] == want, "function pointer result %d = %d, expected %d", i, out[i], want);
  }
  std::printf("function pointers ok\n");
  CHECK_CUDA(cudaFree(dfact));
  CHECK_CUDA(cudaFree(dfib));
  CHECK_CUDA(cudaFree(dweighted));
  CHECK_CUDA(cudaFree(dcells));
  CHECK_CUDA(cudaFree(dcounts));
  CHECK_CUDA(cudaFree(dselector));
  CHECK_CUDA(cudaFree(dout));
  return pass();
}
