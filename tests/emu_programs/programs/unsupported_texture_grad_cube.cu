// A kernel sampling a cubemap texture with gradients (texCubemapGrad: `tex.grad.cube` in PTX),
// which the emu device does not implement (it chooses levels of detail from gradients on 1D, 2D
// and 3D textures only): the module must fail to load with an error naming the instruction.
// Reports the first error of a launch-related call and exits with 44; exits 1 if the kernel runs.
#include <cstdio>
#include <cstring>

#include "self_check.h"

__global__ void textureKernel(cudaTextureObject_t texture, float4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = texCubemapGrad<float4>(texture, 1.0f, i * 0.01f, 0.5f, make_float4(0.1f, 0, 0, 0),
                                    make_float4(0, 0.1f, 0, 0));
  }
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
  float4* out;
  REPORT_IF_FAILED(cudaMalloc(&in, n * sizeof(float)));
  REPORT_IF_FAILED(cudaMalloc(&out, n * sizeof(float4)));
  cudaResourceDesc resource;
  std::memset(&resource, 0, sizeof(resource));
  resource.resType = cudaResourceTypePitch2D;
  resource.res.pitch2D.devPtr = in;
  resource.res.pitch2D.desc = cudaCreateChannelDesc<float>();
  resource.res.pitch2D.width = n;
  resource.res.pitch2D.height = 1;
  resource.res.pitch2D.pitchInBytes = n * sizeof(float);
  cudaTextureDesc description;
  std::memset(&description, 0, sizeof(description));
  description.readMode = cudaReadModeElementType;
  cudaTextureObject_t texture = 0;
  // The object is served; the launch must still fail at load.
  const cudaError_t created = cudaCreateTextureObject(&texture, &resource, &description, nullptr);
  std::printf("cudaCreateTextureObject: %s\n", cudaGetErrorName(created));
  (void)cudaGetLastError();  // so that the launch's own error is the one reported below
  textureKernel<<<1, n>>>(texture, out, n);
  REPORT_IF_FAILED(cudaGetLastError());
  REPORT_IF_FAILED(cudaDeviceSynchronize());
  FAIL("the texture kernel ran on a device that cannot execute it");
}
