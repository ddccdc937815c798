// Cooperative launches through the runtime API (cudaLaunchCooperativeKernel) with grid-wide
// synchronization from cooperative groups:
// - the device says it can (cudaDevAttrCooperativeLaunch);
// - a kernel passes values between blocks across grid.sync(): each round every thread reads what
//   a thread of another block wrote in the round before, so a missing or leaky barrier shows up as
//   a wrong value; 20 rounds reuse the barrier many times;
// - a grid-wide reduction (per-block partial sums, grid.sync(), block 0 adds them);
// - grid.is_valid() is true in a cooperative launch and in an ordinary one after it;
// - a grid larger than the device can hold at once fails with cudaErrorCooperativeLaunchTooLarge
//   at the launch, and the context stays usable.
#include <cooperative_groups.h>

#include <vector>

#include "self_check.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kBlocks = 6;
constexpr int kThreads = 64;
constexpr int kCount = kBlocks * kThreads;
constexpr int kRounds = 20;

// ping[i] starts as i; each round, thread i writes ping[(i + kThreads) % n] + 1 into pong[i] (a
// value another block wrote), then the buffers swap. After r rounds element i holds
// ((i + r * kThreads) % n) + r.
__global__ void rotate(int* ping, int* pong, int rounds) {
  cg::grid_group grid = cg::this_grid();
  const int n = static_cast<int>(grid.size());
  const int i = static_cast<int>(grid.thread_rank());
  ping[i] = i;
  grid.sync();
  for (int r = 0; r < rounds; ++r) {
    pong[i] = ping[(i + kThreads) % n] + 1;
    grid.sync();
    int* t = ping;
    ping = pong;
    pong = t;
  }
}

__global__ void gridSum(const int* in, int* partial, long long* total) {
  cg::grid_group grid = cg::this_grid();
  __shared__ int blockSum;
  if (threadIdx.x == 0) blockSum = 0;
  __syncthreads();
  atomicAdd(&blockSum, in[grid.thread_rank()]);
  __syncthreads();
  if (threadIdx.x == 0) partial[blockIdx.x] = blockSum;
  grid.sync();
  if (grid.thread_rank() == 0) {
    long long sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
    *total = sum;
  }
}

__global__ void gridValid(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = cg::this_grid().is_valid() ? 1 : 0;
}

}  // namespace

int main() {
  int device = 0, cooperative = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  CHECK(cooperative == 1, "cudaDevAttrCooperativeLaunch is %d", cooperative);
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));

  int *ping = nullptr, *pong = nullptr;
  CHECK_CUDA(cudaMalloc(&ping, kCount * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&pong, kCount * sizeof(int)));
  int rounds = kRounds;
  void* rotateArgs[] = {&ping, &pong, &rounds};
  CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(rotate), kBlocks, kThreads,
                                         rotateArgs, 0, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> got(kCount);
  CHECK_CUDA(cudaMemcpy(got.data(), kRounds % 2 ? pong : ping, kCount * sizeof(int),
                        cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) {
    int want = (i + kRounds * kThreads) % kCount + kRounds;
    CHECK(got[i] == want, "after %d grid-synced rounds element %d is %d, expected %d", kRounds, i,
          got[i], want);
  }
  std::printf("%d rounds across %d blocks with grid.sync()\n", kRounds, kBlocks);

  std::vector<int> values(kCount);
  long long want = 0;
  for (int i = 0; i < kCount; ++i) want += values[i] = 3 * i + 1;
  int* partial = nullptr;
  long long* total = nullptr;
  CHECK_CUDA(cudaMemcpy(ping, values.data(), kCount * sizeof(int), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMalloc(&partial, kBlocks * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&total, sizeof(long long)));
  CHECK_CUDA(cudaMemset(total, 0, sizeof(long long)));
  void* sumArgs[] = {&ping, &partial, &total};
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(gridSum), kBlocks, kThreads,
                                         sumArgs, 0, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  long long sum = 0;
  CHECK_CUDA(cudaMemcpy(&sum, total, sizeof sum, cudaMemcpyDeviceToHost));
  CHECK(sum == want, "grid-wide sum %lld, expected %lld", sum, want);
  std::printf("grid-wide reduction on a stream: %lld\n", sum);

  int* valid = nullptr;
  CHECK_CUDA(cudaMalloc(&valid, 2 * sizeof(int)));
  void* validArgs[] = {&valid};
  CHECK_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(gridValid), 2, 32, validArgs,
                                         0, nullptr));
  int flags[2] = {0, 0};
  CHECK_CUDA(cudaMemcpy(flags, valid, sizeof flags, cudaMemcpyDeviceToHost));
  CHECK(flags[0] == 1 && flags[1] == 1, "grid.is_valid() in a cooperative launch: %d %d", flags[0],
        flags[1]);
  // is_valid() is whether the driver gave the launch a grid workspace. An ordinary launch after
  // the context's cooperative ones has one too (observed on driver 580.159.04, H200, natively and
  // pooled); before any cooperative launch it has none (emu_programs/grid_group.cu).
  CHECK_CUDA(cudaMemset(valid, 0, 2 * sizeof(int)));
  gridValid<<<2, 32>>>(valid);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(flags, valid, sizeof flags, cudaMemcpyDeviceToHost));
  CHECK(flags[0] == 1 && flags[1] == 1,
        "grid.is_valid() in an ordinary launch after cooperative ones: %d %d", flags[0], flags[1]);
  std::printf("grid.is_valid(): true when cooperative, and in later ordinary launches\n");

  int perSm = 0;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &perSm, reinterpret_cast<const void*>(rotate), kThreads, 0));
  CHECK(perSm > 0, "occupancy says %d blocks per multiprocessor", perSm);
  unsigned tooMany = static_cast<unsigned>(perSm * sms + 1);
  EXPECT_CUDA_ERROR(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(rotate), tooMany,
                                                kThreads, rotateArgs, 0, nullptr),
                    cudaErrorCooperativeLaunchTooLarge);
  const cudaError_t last = cudaGetLastError();
  CHECK(last == cudaErrorCooperativeLaunchTooLarge, "cudaGetLastError() after it: %s",
        cudaGetErrorName(last));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("a grid of %u blocks (%d per SM x %d SMs + 1) is refused at the launch\n", tooMany,
              perSm, sms);

  for (void* p : {static_cast<void*>(ping), static_cast<void*>(pong), static_cast<void*>(partial),
                  static_cast<void*>(total), static_cast<void*>(valid)}) {
    CHECK_CUDA(cudaFree(p));
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  return pass();
}
