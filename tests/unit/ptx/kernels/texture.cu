// Texture and surface objects as kernels use them (tex, suld, sust), for program_test.cc.
#include <cuda_runtime.h>

extern "C" __global__ void fetchAndSample(cudaTextureObject_t linear, cudaTextureObject_t array2D,
                                          float* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  out[i] = tex1Dfetch<float>(linear, i - 1);                         // zeros out of range
  out[n + i] = tex2D<float>(array2D, i + 0.75f, 0.5f);               // linear filter
  out[2 * n + i] = tex2DLayered<float>(array2D, i + 0.5f, 0.5f, 0);  // wrong geometry if used
}

extern "C" __global__ void sampleOnly(cudaTextureObject_t linear, cudaTextureObject_t array2D,
                                      float* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  out[i] = tex1Dfetch<float>(linear, i - 1);
  out[n + i] = tex2D<float>(array2D, i + 0.75f, 0.5f);
}

extern "C" __global__ void surfaceIncrement(cudaSurfaceObject_t s, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  int v = surf1Dread<int>(s, i * 4);
  surf1Dwrite(v + 1, s, i * 4);
  surf1Dwrite(-1, s, (n + i) * 4, cudaBoundaryModeZero);  // dropped
}
