// CUDA arrays and 3D copies through the runtime API: cudaMemcpy3D between pitched regions with
// offsets; 1D, 2D, 3D, layered and cubemap arrays written and read back by sub-regions
// (host<->array, array<->array, device<->array); mipmap levels and their extents; descriptors
// (cudaArrayGetInfo); and regions outside an array refused with cudaErrorInvalidValue.
#include <cstdint>
#include <vector>

#include "self_check.h"

namespace {

unsigned char cell(size_t i, unsigned seed) {
  return static_cast<unsigned char>(i * 131 + seed * 29 + (i >> 8) + 1);
}

std::vector<unsigned char> pattern(size_t bytes, unsigned seed) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = cell(i, seed);
  return v;
}

// cudaMemcpy3D between pitched linear regions, with offsets on both sides.
void pitchedRegions() {
  const size_t W = 37, H = 11, D = 5;  // bytes, rows, slices of the allocations
  cudaPitchedPtr a{}, b{};
  CHECK_CUDA(cudaMalloc3D(&a, make_cudaExtent(W, H, D)));
  CHECK_CUDA(cudaMalloc3D(&b, make_cudaExtent(W, H, D)));
  CHECK_CUDA(cudaMemset3D(a, 0, make_cudaExtent(W, H, D)));
  CHECK_CUDA(cudaMemset3D(b, 0, make_cudaExtent(W, H, D)));
  std::vector<unsigned char> host = pattern(W * H * D, 1);
  cudaMemcpy3DParms up{};
  up.srcPtr = make_cudaPitchedPtr(host.data(), W, W, H);
  up.srcPos = make_cudaPos(2, 1, 1);
  up.dstPtr = a;
  up.dstPos = make_cudaPos(5, 2, 0);
  up.extent = make_cudaExtent(20, 7, 3);
  up.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&up));
  cudaMemcpy3DParms across{};
  across.srcPtr = a;
  across.srcPos = make_cudaPos(5, 2, 0);
  across.dstPtr = b;
  across.dstPos = make_cudaPos(1, 3, 2);
  across.extent = make_cudaExtent(20, 7, 3);
  across.kind = cudaMemcpyDeviceToDevice;
  CHECK_CUDA(cudaMemcpy3D(&across));
  std::vector<unsigned char> back(W * H * D, 0xEE);
  cudaMemcpy3DParms down{};
  down.srcPtr = b;
  down.dstPtr = make_cudaPitchedPtr(back.data(), W, W, H);
  down.extent = make_cudaExtent(W, H, D);
  down.kind = cudaMemcpyDeviceToHost;
  CHECK_CUDA(cudaMemcpy3D(&down));
  for (size_t z = 0; z < D; ++z) {
    for (size_t y = 0; y < H; ++y) {
      for (size_t x = 0; x < W; ++x) {
        bool inside = z >= 2 && z < 5 && y >= 3 && y < 10 && x >= 1 && x < 21;
        unsigned char want = inside ? host[((z - 2 + 1) * H + (y - 3 + 1)) * W + (x - 1 + 2)] : 0;
        CHECK(back[(z * H + y) * W + x] == want, "pitched 3D copy byte (%zu,%zu,%zu)", x, y, z);
      }
    }
  }
  cudaFree(a.ptr);
  cudaFree(b.ptr);
  std::printf("cudaMemcpy3D between pitched regions with offsets\n");
}

// A 2D float2 array: sub-rectangles host->array, device->array, array->array, array->device.
void array2D() {
  const size_t W = 19, H = 13, E = sizeof(float2);
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float2>();
  cudaArray_t a = nullptr, b = nullptr;
  CHECK_CUDA(cudaMallocArray(&a, &desc, W, H));
  CHECK_CUDA(cudaMallocArray(&b, &desc, W, H));
  std::vector<unsigned char> zero(W * H * E, 0);
  CHECK_CUDA(cudaMemcpy2DToArray(a, 0, 0, zero.data(), W * E, W * E, H, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy2DToArray(b, 0, 0, zero.data(), W * E, W * E, H, cudaMemcpyHostToDevice));
  std::vector<unsigned char> host = pattern(W * H * E, 2);
  // Host rows of pitch W*E, the sub-rectangle 9 x 6 elements at element (3, 4).
  CHECK_CUDA(
      cudaMemcpy2DToArray(a, 3 * E, 4, host.data(), W * E, 9 * E, 6, cudaMemcpyHostToDevice));
  CHECK_CUDA(
      cudaMemcpy2DArrayToArray(b, 1 * E, 2, a, 3 * E, 4, 9 * E, 6, cudaMemcpyDeviceToDevice));
  std::vector<unsigned char> back(W * H * E, 0xEE);
  CHECK_CUDA(cudaMemcpy2DFromArray(back.data(), W * E, b, 0, 0, W * E, H, cudaMemcpyDeviceToHost));
  for (size_t y = 0; y < H; ++y) {
    for (size_t x = 0; x < W * E; ++x) {
      bool inside = y >= 2 && y < 8 && x >= E && x < 10 * E;
      unsigned char want = inside ? host[(y - 2) * W * E + (x - E)] : 0;
      CHECK(back[y * W * E + x] == want, "2D array byte (%zu,%zu)", x, y);
    }
  }
  // Device <-> array through a pitched allocation.
  void* dev = nullptr;
  size_t pitch = 0;
  CHECK_CUDA(cudaMallocPitch(&dev, &pitch, W * E, H));
  CHECK_CUDA(cudaMemcpy2DFromArray(dev, pitch, b, 0, 0, W * E, H, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaMemcpy2DToArray(a, 0, 0, dev, pitch, W * E, H, cudaMemcpyDeviceToDevice));
  std::vector<unsigned char> again(W * H * E, 0xEE);
  CHECK_CUDA(cudaMemcpy2DFromArray(again.data(), W * E, a, 0, 0, W * E, H, cudaMemcpyDeviceToHost));
  CHECK(again == back, "array -> device -> array round trip");
  // Regions outside the array.
  EXPECT_CUDA_ERROR(
      cudaMemcpy2DToArray(a, 12 * E, 0, host.data(), W * E, 9 * E, 2, cudaMemcpyHostToDevice),
      cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(
      cudaMemcpy2DFromArray(back.data(), W * E, a, 0, 10, W * E, 4, cudaMemcpyDeviceToHost),
      cudaErrorInvalidValue);
  cudaChannelFormatDesc got{};
  cudaExtent extent{};
  unsigned flags = 99;
  CHECK_CUDA(cudaArrayGetInfo(&got, &extent, &flags, a));
  CHECK(got.x == 32 && got.y == 32 && got.z == 0 && got.f == cudaChannelFormatKindFloat,
        "2D array channel format");
  CHECK(extent.width == W && extent.height == H && extent.depth == 0 && flags == 0,
        "2D array extent %zu x %zu x %zu flags %u", extent.width, extent.height, extent.depth,
        flags);
  cudaFreeArray(a);
  cudaFreeArray(b);
  cudaFree(dev);
  std::printf("2D array: host, device and array copies of sub-rectangles\n");
}

// A 1D uchar4 array through the 2D copies (height 1).
void array1D() {
  const size_t W = 300, E = 4;
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<uchar4>();
  cudaArray_t a = nullptr;
  CHECK_CUDA(cudaMallocArray(&a, &desc, W));
  std::vector<unsigned char> host = pattern(W * E, 3);
  CHECK_CUDA(cudaMemcpy2DToArray(a, 0, 0, host.data(), W * E, W * E, 1, cudaMemcpyHostToDevice));
  std::vector<unsigned char> part(100 * E, 0);
  CHECK_CUDA(cudaMemcpy2DFromArray(part.data(), 100 * E, a, 150 * E, 0, 100 * E, 1,
                                   cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < part.size(); ++i) {
    CHECK(part[i] == host[150 * E + i], "1D array byte %zu", i);
  }
  EXPECT_CUDA_ERROR(cudaMemcpy2DFromArray(part.data(), 100 * E, a, 250 * E, 0, 100 * E, 1,
                                          cudaMemcpyDeviceToHost),
                    cudaErrorInvalidValue);
  cudaChannelFormatDesc got{};
  cudaExtent extent{};
  unsigned flags = 0;
  CHECK_CUDA(cudaArrayGetInfo(&got, &extent, &flags, a));
  CHECK(extent.width == W && extent.height == 0 && extent.depth == 0, "1D array extent");
  cudaFreeArray(a);
  std::printf("1D array\n");
}

// A 3D-like array (3D, layered or cubemap): a sub-box in, the whole array out.
void array3D(const char* what, cudaExtent extent, unsigned flags, unsigned seed) {
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<unsigned short>();
  const size_t E = 2;
  cudaArray_t a = nullptr;
  CHECK_CUDA(cudaMalloc3DArray(&a, &desc, extent, flags));
  size_t W = extent.width, H = extent.height ? extent.height : 1, D = extent.depth;
  std::vector<unsigned char> zero(W * H * D * E, 0);
  cudaMemcpy3DParms clear{};
  clear.srcPtr = make_cudaPitchedPtr(zero.data(), W * E, W, H);
  clear.dstArray = a;
  clear.extent = make_cudaExtent(W, H, D);
  clear.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&clear));
  // The box: elements [1, W-1) x [1 or 0, H) x [1, D).
  size_t y0 = H > 1 ? 1 : 0;
  cudaExtent box = make_cudaExtent(W - 2, H - y0, D - 1);
  std::vector<unsigned char> host = pattern(box.width * box.height * box.depth * E, seed);
  cudaMemcpy3DParms in{};
  in.srcPtr = make_cudaPitchedPtr(host.data(), box.width * E, box.width, box.height);
  in.dstArray = a;
  in.dstPos = make_cudaPos(1, y0, 1);  // elements, since an array is involved
  in.extent = box;
  in.kind = cudaMemcpyHostToDevice;
  CHECK_CUDA(cudaMemcpy3D(&in));
  std::vector<unsigned char> back(W * H * D * E, 0xEE);
  cudaMemcpy3DParms out{};
  out.srcArray = a;
  out.dstPtr = make_cudaPitchedPtr(back.data(), W * E, W, H);
  out.extent = make_cudaExtent(W, H, D);
  out.kind = cudaMemcpyDeviceToHost;
  CHECK_CUDA(cudaMemcpy3D(&out));
  for (size_t z = 0; z < D; ++z) {
    for (size_t y = 0; y < H; ++y) {
      for (size_t x = 0; x < W * E; ++x) {
        bool inside = z >= 1 && y >= y0 && x >= E && x < (W - 1) * E;
        unsigned char want =
            inside ? host[((z - 1) * box.height + (y - y0)) * box.width * E + (x - E)] : 0;
        CHECK(back[(z * H + y) * W * E + x] == want, "%s byte (%zu,%zu,%zu)", what, x, y, z);
      }
    }
  }
  // One slice past the end.
  in.dstPos = make_cudaPos(1, y0, 2);
  EXPECT_CUDA_ERROR(cudaMemcpy3D(&in), cudaErrorInvalidValue);
  cudaChannelFormatDesc got{};
  cudaExtent gotExtent{};
  unsigned gotFlags = 0;
  CHECK_CUDA(cudaArrayGetInfo(&got, &gotExtent, &gotFlags, a));
  CHECK(gotExtent.width == extent.width && gotExtent.height == extent.height &&
            gotExtent.depth == extent.depth && gotFlags == flags && got.x == 16,
        "%s descriptor", what);
  cudaFreeArray(a);
  std::printf("%s array\n", what);
}

void mipmapped() {
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaMipmappedArray_t m = nullptr;
  const unsigned levels = 4;
  CHECK_CUDA(cudaMallocMipmappedArray(&m, &desc, make_cudaExtent(32, 20, 0), levels));
  for (unsigned l = 0; l < levels; ++l) {
    cudaArray_t level = nullptr;
    CHECK_CUDA(cudaGetMipmappedArrayLevel(&level, m, l));
    cudaChannelFormatDesc got{};
    cudaExtent extent{};
    unsigned flags = 0;
    CHECK_CUDA(cudaArrayGetInfo(&got, &extent, &flags, level));
    size_t w = 32 >> l, h = 20 >> l > 0 ? 20 >> l : 1;
    CHECK(extent.width == w && extent.height == h, "level %u is %zu x %zu, want %zu x %zu", l,
          extent.width, extent.height, w, h);
    std::vector<float> host(w * h), back(w * h, -1.0f);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(l * 1000 + i);
    CHECK_CUDA(
        cudaMemcpy2DToArray(level, 0, 0, host.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
    CHECK_CUDA(
        cudaMemcpy2DFromArray(back.data(), w * 4, level, 0, 0, w * 4, h, cudaMemcpyDeviceToHost));
    CHECK(back == host, "mipmap level %u round trip", l);
  }
  // Level 0 kept its bytes while the others were written.
  cudaArray_t level0 = nullptr;
  CHECK_CUDA(cudaGetMipmappedArrayLevel(&level0, m, 0));
  float first[2] = {};
  CHECK_CUDA(cudaMemcpy2DFromArray(first, 8, level0, 0, 0, 8, 1, cudaMemcpyDeviceToHost));
  CHECK(first[0] == 0.0f && first[1] == 1.0f, "level 0 unchanged");
  cudaArray_t none = nullptr;
  EXPECT_CUDA_ERROR(cudaGetMipmappedArrayLevel(&none, m, levels), cudaErrorInvalidValue);
  CHECK_CUDA(cudaFreeMipmappedArray(m));
  std::printf("mipmapped array: %u levels\n", levels);
}

void invalidArrays() {
  cudaChannelFormatDesc desc = cudaCreateChannelDesc<float>();
  cudaArray_t a = nullptr;
  // A cubemap's faces are square and six.
  EXPECT_CUDA_ERROR(cudaMalloc3DArray(&a, &desc, make_cudaExtent(8, 9, 6), cudaArrayCubemap),
                    cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(cudaMalloc3DArray(&a, &desc, make_cudaExtent(8, 8, 5), cudaArrayCubemap),
                    cudaErrorInvalidValue);
  // Too wide for a 2D array.
  EXPECT_CUDA_ERROR(cudaMallocArray(&a, &desc, 1u << 20, 4), cudaErrorInvalidValue);
  // More mip levels than the extent has: accepted, the count clamped to 1 + log2(8) = 4
  // (documented; the acceptance observed on driver 580.159.04, H200). Only levels the extent has
  // are asked for.
  cudaMipmappedArray_t m = nullptr;
  CHECK_CUDA(cudaMallocMipmappedArray(&m, &desc, make_cudaExtent(8, 8, 0), 5));
  cudaArray_t last = nullptr;
  CHECK_CUDA(cudaGetMipmappedArrayLevel(&last, m, 3));
  cudaChannelFormatDesc got{};
  cudaExtent extent{};
  unsigned flags = 0;
  CHECK_CUDA(cudaArrayGetInfo(&got, &extent, &flags, last));
  CHECK(extent.width == 1 && extent.height == 1, "level 3 of 8x8 is %zux%zu", extent.width,
        extent.height);
  CHECK_CUDA(cudaFreeMipmappedArray(m));
  std::printf("invalid descriptors refused, mip levels clamped\n");
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  pitchedRegions();
  array1D();
  array2D();
  array3D("3D", make_cudaExtent(9, 7, 5), 0, 4);
  array3D("2D layered", make_cudaExtent(10, 6, 4), cudaArrayLayered, 5);
  array3D("1D layered", make_cudaExtent(12, 0, 3), cudaArrayLayered, 6);
  array3D("cubemap", make_cudaExtent(8, 8, 6), cudaArrayCubemap, 7);
  array3D("layered cubemap", make_cudaExtent(4, 4, 12), cudaArrayCubemap | cudaArrayLayered, 8);
  mipmapped();
  invalidArrays();
  return pass();
}
