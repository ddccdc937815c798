// Tensor memory access in im2col mode, as a convolution's implicit GEMM uses it (CUTLASS, Triton):
// cuTensorMapEncodeIm2col (reached through cudaGetDriverEntryPointByVersion) describes an NHWC
// float image batch with the bounding box of a 3x3 filter at padding 1, at stride 1 and at stride 2
// (the traversal strides); each block loads, with cp.async.bulk.tensor .im2col, 32 output pixels'
// inputs under one filter tap (the im2col offsets), and writes them out. Checked against the
// im2col matrix computed on the host: rows running from one image row and one image into the
// next, padding read as zero, and the last rows, past the batch, zero. The argument rules cuda.h
// gives are checked too. On a device below compute capability 9.0, or with the kernel built for an
// older target (the suite's flavours other than sm90), only the encoding and its checks run.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdio>
#include <cuda/barrier>
#include <utility>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kBatch = 2, kHeight = 5, kWidth = 6, kChannels = 8;  // NHWC floats
constexpr int kFilter = 3, kPad = 1;
constexpr int kPixelsPerColumn = 32;

// A convolution's output: at stride 1 the input's size, at stride 2 about half of it.
struct Output {
  int stride, height, width;
  int pixels() const { return kBatch * height * width; }
  int tiles() const { return (pixels() + kPixelsPerColumn - 1) / kPixelsPerColumn; }
};
Output outputAt(int stride) {
  return {stride, (kHeight + 2 * kPad - kFilter) / stride + 1,
          (kWidth + 2 * kPad - kFilter) / stride + 1};
}

#pragma nv_diag_suppress static_var_with_dynamic_init

// Block (tile, tap): the inputs of output pixels tile * 32 .. + 31 under filter tap (r, s) =
// (tap / 3, tap % 3), as rows of 8 channels, to out[tile][tap].
__global__ void loadColumns(const __grid_constant__ CUtensorMap map, Output o, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ alignas(128) float box[kPixelsPerColumn][kChannels];
  __shared__ barrier ready;
  const int tile = blockIdx.x, tap = blockIdx.y;
  if (threadIdx.x == 0) {
    init(&ready, blockDim.x);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  barrier::arrival_token token;
  if (threadIdx.x == 0) {
    // The tile's first output pixel, at its place in the bounding box: stride * position - padding.
    const int m = tile * kPixelsPerColumn;
    const int n = m / (o.height * o.width), h = m / o.width % o.height, w = m % o.width;
    const unsigned short offsetW = tap % kFilter, offsetH = tap / kFilter;
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&box));
    const unsigned bar =
        static_cast<unsigned>(__cvta_generic_to_shared(cuda::device::barrier_native_handle(ready)));
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(&map)), "r"(0), "r"(w * o.stride - kPad),
        "r"(h * o.stride - kPad), "r"(n), "r"(bar), "h"(offsetW), "h"(offsetH)
        : "memory");
    token = cuda::device::barrier_arrive_tx(ready, 1, sizeof(box));
  } else {
    token = ready.arrive();
  }
  ready.wait(std::move(token));
  float* column = out + (tile * kFilter * kFilter + tap) * kPixelsPerColumn * kChannels;
  for (int i = threadIdx.x; i < kPixelsPerColumn * kChannels; i += blockDim.x)
    column[i] = box[i / kChannels][i % kChannels];
#else
  (void)map, (void)o, (void)out;
#endif
}

PFN_cuTensorMapEncodeIm2col_v12000 encodeIm2col() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeIm2col", &fn, 12000,
                                              cudaEnableDefault, &found));
  CHECK(found == cudaDriverEntryPointSuccess && fn, "cuTensorMapEncodeIm2col was not found");
  return reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(fn);
}

// The box of a 3x3 filter at padding 1, corners in globalDim's order (W, then H), walked at the
// convolution's stride.
CUresult encode(PFN_cuTensorMapEncodeIm2col_v12000 fn, CUtensorMap* map, float* images,
                cuuint32_t stride = 1, cuuint32_t rank = 4, int lowerW = -kPad,
                cuuint32_t pixelsPerColumn = 32) {
  const cuuint64_t dims[4] = {kChannels, kWidth, kHeight, kBatch};
  const cuuint64_t strides[3] = {kChannels * sizeof(float), kWidth * kChannels * sizeof(float),
                                 kHeight * kWidth * kChannels * sizeof(float)};
  const int lower[2] = {lowerW, -kPad};
  const int upper[2] = {kPad - (kFilter - 1), kPad - (kFilter - 1)};
  const cuuint32_t elementStrides[4] = {1, stride, stride, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, images, dims, strides, lower, upper,
            kChannels, pixelsPerColumn, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

float input(const std::vector<float>& images, int n, int h, int w, int c) {
  if (n >= kBatch || h < 0 || h >= kHeight || w < 0 || w >= kWidth) return 0.0f;
  return images[((n * kHeight + h) * kWidth + w) * kChannels + c];
}

// Loads every tile's columns under every tap through `map` and checks them against the im2col
// matrix: row m (output pixel n, h, w) under tap (r, s) reads input (n, stride * h - 1 + r,
// stride * w - 1 + s), zero outside the images.
void checkColumns(const CUtensorMap& map, const std::vector<float>& images, Output o) {
  const size_t outFloats = size_t{1} * o.tiles() * kFilter * kFilter * kPixelsPerColumn * kChannels;
  float* out = nullptr;
  CHECK_CUDA(cudaMalloc(&out, outFloats * sizeof(float)));
  CHECK_CUDA(cudaMemset(out, 0xff, outFloats * sizeof(float)));  // NaN: every element is written
  loadColumns<<<dim3(o.tiles(), kFilter * kFilter), 128>>>(map, o, out);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> columns(outFloats);
  CHECK_CUDA(cudaMemcpy(columns.data(), out, outFloats * sizeof(float), cudaMemcpyDeviceToHost));
  int padded = 0;
  for (int tile = 0; tile < o.tiles(); ++tile)
    for (int tap = 0; tap < kFilter * kFilter; ++tap)
      for (int p = 0; p < kPixelsPerColumn; ++p) {
        const int m = tile * kPixelsPerColumn + p;
        const int n = m / (o.height * o.width), h = m / o.width % o.height, w = m % o.width;
        const int r = tap / kFilter, s = tap % kFilter;
        for (int c = 0; c < kChannels; ++c) {
          const float want = input(images, n, o.stride * h - kPad + r, o.stride * w - kPad + s, c);
          const float got =
              columns[((tile * kFilter * kFilter + tap) * kPixelsPerColumn + p) * kChannels + c];
          CHECK(got == want,
                "stride %d tile %d tap (%d, %d) pixel %d (n %d h %d w %d) channel %d: %g, want %g",
                o.stride, tile, r, s, p, n, h, w, c, got, want);
          padded += want == 0.0f;
        }
      }
  std::printf("im2col columns at stride %d: %d output pixels x 9 taps ok (%d zero-filled)\n",
              o.stride, o.pixels(), padded);
  CHECK_CUDA(cudaFree(out));
}

}  // namespace

int main() {
  std::vector<float> images(kBatch * kHeight * kWidth * kChannels);
  for (size_t i = 0; i < images.size(); ++i) images[i] = 1.0f + static_cast<float>(i);
  float* device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, images.size() * sizeof(float)));
  CHECK_CUDA(
      cudaMemcpy(device, images.data(), images.size() * sizeof(float), cudaMemcpyHostToDevice));

  PFN_cuTensorMapEncodeIm2col_v12000 encodeFn = encodeIm2col();
  alignas(64) CUtensorMap map;
  CHECK(encode(encodeFn, &map, device) == CUDA_SUCCESS, "encoding the image batch failed");
  alignas(64) CUtensorMap rejected;
  CHECK(encode(encodeFn, &rejected, device, 1, 2) == CUDA_ERROR_INVALID_VALUE,
        "an im2col map of rank 2 was accepted");
  CHECK(encode(encodeFn, &rejected, device, 1, 4, -200) == CUDA_ERROR_INVALID_VALUE,
        "a rank-4 corner of -200 was accepted (the range is -128 to 127)");
  CHECK(encode(encodeFn, &rejected, device, 1, 4, -kPad, 2048) == CUDA_ERROR_INVALID_VALUE,
        "2048 pixels per column were accepted (at most 1024)");
  CHECK(encode(encodeFn, &rejected, device, 9) == CUDA_ERROR_INVALID_VALUE,
        "a traversal stride of 9 was accepted (at most 8)");
  std::printf("cuTensorMapEncodeIm2col: encoded, and the bad arguments refused\n");

  int deviceIndex = 0, major = 0;
  CHECK_CUDA(cudaGetDevice(&deviceIndex));
  CHECK_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, deviceIndex));
  cudaFuncAttributes kernel;
  CHECK_CUDA(cudaFuncGetAttributes(&kernel, loadColumns));
  if (major < 9 || kernel.ptxVersion < 90) {
    std::printf("im2col copies skipped: compute capability %d.x, kernel built for %d\n", major,
                kernel.ptxVersion);
    return pass();
  }
  checkColumns(map, images, outputAt(1));
  alignas(64) CUtensorMap strided;
  CHECK(encode(encodeFn, &strided, device, 2) == CUDA_SUCCESS,
        "encoding the image batch at traversal stride 2 failed");
  checkColumns(strided, images, outputAt(2));
  CHECK_CUDA(cudaFree(device));
  return pass();
}
