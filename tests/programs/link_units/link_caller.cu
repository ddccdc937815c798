// The caller unit of link_driver: a kernel calling a device function and reading a device variable
// that only the callee unit defines (extern here, resolved when the two are linked).
extern "C" __device__ int offsetBias;
extern "C" __device__ int scaleAndOffset(int x);

extern "C" __global__ void applyScale(int* out, const int* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scaleAndOffset(in[i]) + offsetBias;
}
