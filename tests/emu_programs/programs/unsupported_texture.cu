// A kernel reading through a texture object (`tex.1d` in PTX), which the emu device does not
// implement: the module must fail to load with an error naming the instruction. Reports the
// first error of a launch-related call and exits with 44; exits 1 if the kernel runs.
#include <cstdio>
#include <cstring>

#include "self_check.h"

__global__ void textureKernel(cudaTextureObject_t texture, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(texture, i) * 2.0f;
}

#define REPORT_IF_FAILED(call)                                             \
  do {                                                                     \
    const cudaError_t status_ = (call);                                    \
    if (status_ != cudaSuccess) {                                          \
      std::printf("%s failed: %s: %s\n", #call, cudaGetErrorName(status_), \
                  cudaGetErrorString(status_));                            \
      std::fflush(stdout);                                                 \
      return 44;                                                           \
    }                                                                      \
  } while (0)

int main() {
  const int n = 64;
  float* in;
  float* out;
  REPORT_IF_FAILED(cudaMalloc(&in, n * sizeof(float)));
  REPORT_IF_FAILED(cudaMalloc(&out, n * sizeof(float)));
  cudaResourceDesc resource;
  std::memset(&resource, 0, sizeof(resource));
  resource.resType = cudaResourceTypeLinear;
  resource.res.linear.devPtr = in;
  resource.res.linear.desc = cudaCreateChannelDesc<float>();
  resource.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureDesc description;
  std::memset(&description, 0, sizeof(description));
  description.readMode = cudaReadModeElementType;
  cudaTextureObject_t texture = 0;
  // A device without textures may refuse the object too; the launch must still fail at load.
  const cudaError_t created = cudaCreateTextureObject(&texture, &resource, &description, nullptr);
  std::printf("cudaCreateTextureObject: %s\n", cudaGetErrorName(created));
  (void)cudaGetLastError();  // so that the launch's own error is the one reported below
  textureKernel<<<1, n>>>(texture, out, n);
  REPORT_IF_FAILED(cudaGetLastError());
  REPORT_IF_FAILED(cudaDeviceSynchronize());
  FAIL("the texture kernel ran on a device that cannot execute it");
}
