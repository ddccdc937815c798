// Device code compiled by nvcc at build time into the images the cuda_image tests read.
// The parameter lists are what the tests check in .nv.info, so keep them as they are.

__global__ void vecAdd(const float* a, const float* b, float* c, int n, double scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i] * static_cast<float>(scale);
}

struct Blob100 {
  char data[100];
};

// A by-value struct: 100 bytes at offset 0, then a pointer aligned up to offset 104.
__global__ void structParam(Blob100 blob, char* out) { out[threadIdx.x] = blob.data[threadIdx.x]; }

__device__ int counter;

extern "C" __global__ void noParams() { atomicAdd(&counter, 1); }
