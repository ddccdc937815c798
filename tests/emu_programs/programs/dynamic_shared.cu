// Dynamic shared memory (extern __shared__) sized at launch, carved into two arrays of different
// types, next to a static __shared__ array; several launches of the same kernel with different
// sizes; and cudaFuncSetAttribute for a larger-than-default dynamic size where the device allows.
#include <vector>

#include "self_check.h"

// Each block reverses its chunk of `in` through shared memory and records per-element flags.
__global__ void reverseChunks(const int* in, int* out, int chunk) {
  extern __shared__ unsigned char pool[];
  __shared__ int staticCounter;
  int* values = reinterpret_cast<int*>(pool);
  char* flags = reinterpret_cast<char*>(values + chunk);
  if (threadIdx.x == 0) staticCounter = 0;
  __syncthreads();
  const int base = blockIdx.x * chunk;
  for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
    values[i] = in[base + i];
    flags[i] = static_cast<char>(values[i] & 1);
    atomicAdd(&staticCounter, 1);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < chunk; i += blockDim.x) {
    out[base + i] =
        values[chunk - 1 - i] * 2 + flags[chunk - 1 - i] + (staticCounter == chunk ? 0 : 1000000);
  }
}

int main() {
  for (int chunk : {32, 100, 1000, 4096}) {
    const int blocks = 3;
    const int n = blocks * chunk;
    std::vector<int> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = i * 3 + chunk;
    int *din, *dout;
    CHECK_CUDA(cudaMalloc(&din, n * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dout, n * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    const size_t shared = chunk * (sizeof(int) + 1);
    reverseChunks<<<blocks, 64, shared>>>(din, dout, chunk);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; ++b) {
      for (int i = 0; i < chunk; ++i) {
        const int source = in[b * chunk + chunk - 1 - i];
        const int want = source * 2 + (source & 1);
        CHECK(out[b * chunk + i] == want, "chunk %d block %d element %d = %d, expected %d", chunk,
              b, i, out[b * chunk + i], want);
      }
    }
    std::printf("chunk %d with %zu bytes of dynamic shared memory ok\n", chunk, shared);
    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
  }

  // Above 48 KiB needs an opt-in attribute, as on a GPU.
  int optin = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  const int chunk = 12000;  // 60000 bytes
  const size_t shared = chunk * (sizeof(int) + 1);
  if (optin >= static_cast<int>(shared) + 64) {
    CHECK_CUDA(cudaFuncSetAttribute(reverseChunks, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shared)));
    std::vector<int> in(chunk), out(chunk);
    for (int i = 0; i < chunk; ++i) in[i] = 7 * i - 5;
    int *din, *dout;
    CHECK_CUDA(cudaMalloc(&din, chunk * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&dout, chunk * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(din, in.data(), chunk * sizeof(int), cudaMemcpyHostToDevice));
    reverseChunks<<<1, 256, shared>>>(din, dout, chunk);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(out.data(), dout, chunk * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < chunk; ++i) {
      const int source = in[chunk - 1 - i];
      CHECK(out[i] == source * 2 + (source & 1), "large chunk element %d = %d", i, out[i]);
    }
    std::printf("%zu bytes of opt-in dynamic shared memory ok\n", shared);
    CHECK_CUDA(cudaFree(din));
    CHECK_CUDA(cudaFree(dout));
  } else {
    std::printf("device allows only %d bytes of opt-in shared memory; skipped the large case\n",
                optin);
  }
  return pass();
}
