// Tensor memory access as NVIDIA's programming guide shows it: cuTensorMapEncodeTiled (reached
// through cudaGetDriverEntryPointByVersion, as PyTorch and CUTLASS reach it) describes a 2D
// float matrix; a kernel loads boxes of it into shared memory with cp.async.bulk.tensor on a
// cuda::barrier, changes them, and stores them back through the same map. Checked against the
// host: a box inside the matrix, one that hangs over its edge (out-of-bounds elements read as
// zero and are not stored), cuTensorMapReplaceAddress pointing the map at a second matrix, and a
// tensor reduction (cp.reduce.async.bulk.tensor .add) into a box over the edge.
// On a device below compute capability 9.0 (no TENSOR_MAP_ACCESS_SUPPORTED), or with the kernel
// built for an older target (the suite's flavours other than sm90), only the encoding and its
// argument checks run; the copies need sm_90.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdio>
#include <cuda/barrier>
#include <utility>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kWidth = 100, kHeight = 40;  // the matrix, row-major, floats
constexpr int kBoxWidth = 32, kBoxHeight = 8;

// The guide's barrier is a block-scope cuda::barrier in shared memory, initialized by the code.
#pragma nv_diag_suppress static_var_with_dynamic_init

// Each block moves the box at (x, y): loads it, negates every element and adds its index in the
// box, stores it back. Out-of-bounds elements arrive as zero and are dropped by the store.
__global__ void negateBox(const __grid_constant__ CUtensorMap map, int x, int y, float* seen) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cde = cuda::device::experimental;
  using barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ alignas(128) float box[kBoxHeight][kBoxWidth];
  __shared__ barrier ready;
  if (threadIdx.x == 0) {
    init(&ready, blockDim.x);
    cde::fence_proxy_async_shared_cta();
  }
  __syncthreads();
  barrier::arrival_token token;
  if (threadIdx.x == 0) {
    cde::cp_async_bulk_tensor_2d_global_to_shared(&box, &map, x, y, ready);
    token = cuda::device::barrier_arrive_tx(ready, 1, sizeof(box));
  } else {
    token = ready.arrive();
  }
  ready.wait(std::move(token));
  for (int i = threadIdx.x; i < kBoxWidth * kBoxHeight; i += blockDim.x) {
    float& v = box[i / kBoxWidth][i % kBoxWidth];
    seen[i] = v;
    v = -v + static_cast<float>(i);
  }
  cde::fence_proxy_async_shared_cta();
  __syncthreads();
  if (threadIdx.x == 0) {
    cde::cp_async_bulk_tensor_2d_shared_to_global(&map, x, y, &box);
    cde::cp_async_bulk_commit_group();
    cde::cp_async_bulk_wait_group_read<0>();
  }
#else
  (void)map, (void)x, (void)y, (void)seen;
#endif
}

// Each block adds 0.25 * (its index in the box) to the box at (x, y) with one tensor reduction
// (cp.reduce.async.bulk.tensor .add, as CUTLASS's SM90_TMA_REDUCE_ADD issues it); elements past
// the matrix's edge are dropped.
__global__ void addToBox(const __grid_constant__ CUtensorMap map, int x, int y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cde = cuda::device::experimental;
  __shared__ alignas(128) float box[kBoxHeight][kBoxWidth];
  for (int i = threadIdx.x; i < kBoxWidth * kBoxHeight; i += blockDim.x)
    box[i / kBoxWidth][i % kBoxWidth] = 0.25f * static_cast<float>(i);
  cde::fence_proxy_async_shared_cta();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned src = static_cast<unsigned>(__cvta_generic_to_shared(&box));
    asm volatile(
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], "
        "[%3];" ::"l"(reinterpret_cast<unsigned long long>(&map)),
        "r"(x), "r"(y), "r"(src)
        : "memory");
    cde::cp_async_bulk_commit_group();
    cde::cp_async_bulk_wait_group_read<0>();
  }
#else
  (void)map, (void)x, (void)y;
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 encodeTiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                              cudaEnableDefault, &found));
  CHECK(found == cudaDriverEntryPointSuccess && fn, "cuTensorMapEncodeTiled was not found");
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

PFN_cuTensorMapReplaceAddress_v12000 replaceAddress() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapReplaceAddress", &fn, 12000,
                                              cudaEnableDefault, &found));
  CHECK(found == cudaDriverEntryPointSuccess && fn, "cuTensorMapReplaceAddress was not found");
  return reinterpret_cast<PFN_cuTensorMapReplaceAddress_v12000>(fn);
}

CUresult encode(PFN_cuTensorMapEncodeTiled_v12000 fn, CUtensorMap* map, void* matrix,
                cuuint64_t rowBytes = kWidth * sizeof(float), cuuint32_t boxWidth = kBoxWidth,
                cuuint32_t rank = 2) {
  const cuuint64_t dims[2] = {kWidth, kHeight};
  const cuuint64_t strides[1] = {rowBytes};
  const cuuint32_t box[2] = {boxWidth, kBoxHeight};
  const cuuint32_t elementStrides[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, matrix, dims, strides, box, elementStrides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The matrix after negateBox at (x, y): returns false (and fails) on the first wrong element.
void checkMatrix(const std::vector<float>& before, const std::vector<float>& after, int x, int y,
                 const std::vector<float>& seen, const char* what) {
  for (int r = 0; r < kHeight; ++r)
    for (int c = 0; c < kWidth; ++c) {
      const int br = r - y, bc = c - x;
      const bool inBox = br >= 0 && br < kBoxHeight && bc >= 0 && bc < kBoxWidth;
      const float want = inBox ? -before[r * kWidth + c] + static_cast<float>(br * kBoxWidth + bc)
                               : before[r * kWidth + c];
      CHECK(after[r * kWidth + c] == want, "%s: element (%d, %d) is %g, expected %g", what, r, c,
            after[r * kWidth + c], want);
    }
  for (int br = 0; br < kBoxHeight; ++br)
    for (int bc = 0; bc < kBoxWidth; ++bc) {
      const int r = y + br, c = x + bc;
      const float want = r < kHeight && c < kWidth ? before[r * kWidth + c] : 0.0f;
      CHECK(seen[br * kBoxWidth + bc] == want, "%s: box element (%d, %d) read %g, expected %g",
            what, br, bc, seen[br * kBoxWidth + bc], want);
    }
}

void runBox(const CUtensorMap& map, float* matrix, int x, int y, const char* what) {
  std::vector<float> before(kWidth * kHeight), after(before.size());
  CHECK_CUDA(
      cudaMemcpy(before.data(), matrix, before.size() * sizeof(float), cudaMemcpyDeviceToHost));
  float* seen = nullptr;
  CHECK_CUDA(cudaMalloc(&seen, kBoxWidth * kBoxHeight * sizeof(float)));
  negateBox<<<1, 128>>>(map, x, y, seen);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> boxSeen(kBoxWidth * kBoxHeight);
  CHECK_CUDA(
      cudaMemcpy(boxSeen.data(), seen, boxSeen.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(
      cudaMemcpy(after.data(), matrix, after.size() * sizeof(float), cudaMemcpyDeviceToHost));
  checkMatrix(before, after, x, y, boxSeen, what);
  CHECK_CUDA(cudaFree(seen));
  std::printf("%s: box at (%d, %d) ok\n", what, x, y);
}

}  // namespace

int main() {
  std::vector<float> host(kWidth * kHeight);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 997) * 0.5f;
  float *first = nullptr, *second = nullptr;
  CHECK_CUDA(cudaMalloc(&first, host.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&second, host.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(first, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (auto& v : host) v += 1000.0f;
  CHECK_CUDA(cudaMemcpy(second, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));

  PFN_cuTensorMapEncodeTiled_v12000 encodeFn = encodeTiled();
  alignas(64) CUtensorMap map;
  CHECK(encode(encodeFn, &map, first) == CUDA_SUCCESS, "encoding a 100x40 float matrix failed");
  // The argument rules cuda.h gives: row strides are multiples of 16, a box is at most 256 wide,
  // the rank is 1 to 5, the address 16-byte aligned.
  alignas(64) CUtensorMap rejected;
  CHECK(encode(encodeFn, &rejected, first, 100 * sizeof(float) + 4) == CUDA_ERROR_INVALID_VALUE,
        "a row stride of 404 bytes was accepted");
  CHECK(encode(encodeFn, &rejected, first, kWidth * sizeof(float), 300) == CUDA_ERROR_INVALID_VALUE,
        "a box 300 wide was accepted");
  CHECK(encode(encodeFn, &rejected, first, kWidth * sizeof(float), kBoxWidth, 6) ==
            CUDA_ERROR_INVALID_VALUE,
        "rank 6 was accepted");
  CHECK(encode(encodeFn, &rejected, reinterpret_cast<char*>(first) + 4) == CUDA_ERROR_INVALID_VALUE,
        "a global address off 16 bytes was accepted");
  std::printf("cuTensorMapEncodeTiled: encoded, and the bad arguments refused\n");

  int device = 0, major = 0, tensorMaps = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  {
    CUdevice cuDevice = 0;
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &fn, 12000,
                                                cudaEnableDefault, &found));
    auto getAttribute = reinterpret_cast<PFN_cuDeviceGetAttribute_v2000>(fn);
    CHECK(getAttribute(&tensorMaps, CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, cuDevice) ==
              CUDA_SUCCESS,
          "cuDeviceGetAttribute(TENSOR_MAP_ACCESS_SUPPORTED) failed");
  }
  CHECK((major >= 9) == (tensorMaps == 1),
        "compute capability %d.x reports TENSOR_MAP_ACCESS_SUPPORTED %d", major, tensorMaps);
  // The copies need the device (9.0 and up) and a kernel built for it: PTX for an older target
  // compiles the kernel without them, whatever device runs it.
  cudaFuncAttributes kernel;
  CHECK_CUDA(cudaFuncGetAttributes(&kernel, negateBox));
  if (major < 9 || kernel.ptxVersion < 90) {
    std::printf("tensor copies skipped: compute capability %d.x, kernel built for %d\n", major,
                kernel.ptxVersion);
    return pass();
  }
  runBox(map, first, 16, 8, "inside");
  runBox(map, first, 80, 36, "over the edge");
  PFN_cuTensorMapReplaceAddress_v12000 replaceFn = replaceAddress();
  CHECK(replaceFn(&map, second) == CUDA_SUCCESS, "cuTensorMapReplaceAddress failed");
  runBox(map, second, 0, 0, "replaced address");
  {
    // A reduction into the box at (90, 30), which hangs over the right edge.
    const int x = 90, y = 30;
    std::vector<float> before(kWidth * kHeight), after(before.size());
    CHECK_CUDA(
        cudaMemcpy(before.data(), second, before.size() * sizeof(float), cudaMemcpyDeviceToHost));
    addToBox<<<1, 128>>>(map, x, y);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(
        cudaMemcpy(after.data(), second, after.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int r = 0; r < kHeight; ++r)
      for (int c = 0; c < kWidth; ++c) {
        const int br = r - y, bc = c - x;
        const bool inBox = br >= 0 && br < kBoxHeight && bc >= 0 && bc < kBoxWidth;
        const float want = before[r * kWidth + c] +
                           (inBox ? 0.25f * static_cast<float>(br * kBoxWidth + bc) : 0.0f);
        CHECK(after[r * kWidth + c] == want, "reduction: element (%d, %d) is %g, expected %g", r, c,
              after[r * kWidth + c], want);
      }
    std::printf("tensor reduction: box at (%d, %d) added\n", x, y);
  }
  CHECK_CUDA(cudaFree(first));
  CHECK_CUDA(cudaFree(second));
  return pass();
}
