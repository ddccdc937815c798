// The callee unit of link_driver: a device function and a device variable that the caller unit
// uses as externs, and a kernel of its own. Built with -rdc (as PTX, fatbin and object), so its
// symbols stay visible to the linker.
extern "C" __device__ int offsetBias = 7;

extern "C" __device__ int scaleAndOffset(int x) { return 3 * x + offsetBias; }

extern "C" __global__ void fillSquares(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * i;
}
