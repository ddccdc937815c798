// Several devices in one process, as a pool spanning servers presents them: each device computes on
// its own memory, and bytes move between devices with cudaMemcpy (device to device) and
// cudaMemcpyPeer; peer access is enabled exactly when the devices say they have it. Needs at least
// two devices; prints PASS.
#include <cstdio>
#include <vector>

#include "self_check.h"

__global__ void stamp(unsigned* data, size_t n, unsigned base) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) data[i] = base + static_cast<unsigned>(i);
}

int main() {
  int count = 0;
  CHECK_CUDA(cudaGetDeviceCount(&count));
  CHECK(count >= 2, "need at least two devices, found %d", count);
  const size_t n = 100003;
  std::vector<unsigned*> buffers(count);
  for (int d = 0; d < count; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaMalloc(&buffers[d], n * sizeof(unsigned)));
    stamp<<<(n + 255) / 256, 256>>>(buffers[d], n, 1000000u * (d + 1));
    CHECK_CUDA(cudaGetLastError());
  }
  std::vector<unsigned> host(n);
  for (int d = 0; d < count; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaMemcpy(host.data(), buffers[d], n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) {
      CHECK(host[i] == 1000000u * (d + 1) + i, "device %d element %zu is %u", d, i, host[i]);
    }
    std::printf("device %d computed its own data ok\n", d);
  }
  // Device 0's data to device 1 with a plain device-to-device copy, then back with cudaMemcpyPeer.
  CHECK_CUDA(cudaSetDevice(1));
  CHECK_CUDA(cudaMemcpy(buffers[1], buffers[0], n * sizeof(unsigned), cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy(host.data(), buffers[1], n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    CHECK(host[i] == 1000000u + i, "after copy 0->1, element %zu is %u", i, host[i]);
  }
  std::printf("device 0 -> device 1 copy ok\n");
  CHECK_CUDA(cudaSetDevice(0));
  stamp<<<(n + 255) / 256, 256>>>(buffers[0], n, 7);
  CHECK_CUDA(cudaMemcpyPeer(buffers[count - 1], count - 1, buffers[0], 0, n * sizeof(unsigned)));
  CHECK_CUDA(cudaSetDevice(count - 1));
  CHECK_CUDA(
      cudaMemcpy(host.data(), buffers[count - 1], n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    CHECK(host[i] == 7 + i, "after cudaMemcpyPeer 0->%d, element %zu is %u", count - 1, i, host[i]);
  }
  std::printf("cudaMemcpyPeer device 0 -> device %d ok\n", count - 1);

  // Peer access is what cudaDeviceCanAccessPeer says, and the link attributes agree with it.
  int canAccess = -1;
  CHECK_CUDA(cudaDeviceCanAccessPeer(&canAccess, 0, count - 1));
  int accessSupported = -1;
  CHECK_CUDA(
      cudaDeviceGetP2PAttribute(&accessSupported, cudaDevP2PAttrAccessSupported, 0, count - 1));
  CHECK(accessSupported == canAccess,
        "P2P attribute AccessSupported %d, cudaDeviceCanAccessPeer %d", accessSupported, canAccess);
  CHECK_CUDA(cudaSetDevice(0));
  const cudaError_t enabled = cudaDeviceEnablePeerAccess(count - 1, 0);
  if (canAccess) {
    CHECK_CUDA(enabled);
    CHECK_CUDA(cudaDeviceDisablePeerAccess(count - 1));
  } else {
    CHECK(enabled == cudaErrorPeerAccessUnsupported,
          "cudaDeviceEnablePeerAccess without peer access returned %s", cudaGetErrorName(enabled));
    CHECK(cudaGetLastError() == cudaErrorPeerAccessUnsupported, "the error was not recorded");
  }
  std::printf("peer access %d, consistent\n", canAccess);
  for (int d = 0; d < count; ++d) {
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaFree(buffers[d]));
  }
  std::printf("PASS\n");
  return 0;
}
