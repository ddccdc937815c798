// CUDA arrays and 3D copies through the driver API: cuArrayCreate/cuArray3DCreate and their
// descriptors, cuMemcpyHtoA/AtoH/AtoA/AtoD/DtoA (+Async) with offsets, cuMemcpy3D and
// cuMemcpy3DAsync between host, pitched device memory and a 3D array, cuMemcpy3DPeer,
// cuMemcpy2D with an array end, cuMipmappedArray* levels, cuMemcpyBatchAsync and
// cuMemcpy3DBatchAsync, and the driver's errors for invalid descriptors and regions.
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "driver_check.h"

#define EXPECT_CU_ERROR(call, expected) expectError((call), (expected), #call)

namespace {

std::vector<unsigned char> pattern(size_t bytes, unsigned seed) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(i * 7 + seed * 31 + 3);
  return v;
}

void linearCopies(CUstream stream) {
  CUDA_ARRAY_DESCRIPTOR d{};
  d.Width = 256;
  d.Height = 0;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  d.NumChannels = 1;
  CUarray a, b;
  CHECK_CU(cuArrayCreate(&a, &d));
  CHECK_CU(cuArrayCreate(&b, &d));
  CUDA_ARRAY_DESCRIPTOR got{};
  CHECK_CU(cuArrayGetDescriptor(&got, a));
  CHECK(got.Width == 256 && got.Height == 0 && got.Format == CU_AD_FORMAT_UNSIGNED_INT32 &&
            got.NumChannels == 1,
        "1D descriptor");
  std::vector<unsigned char> host = pattern(1024, 1);
  CHECK_CU(cuMemcpyHtoA(a, 0, host.data(), 1024));
  CHECK_CU(cuMemcpyAtoA(b, 100, a, 40, 600));
  CUdeviceptr dev;
  CHECK_CU(cuMemAlloc(&dev, 1024));
  CHECK_CU(cuMemsetD8(dev, 0, 1024));
  CHECK_CU(cuMemcpyAtoD(dev + 8, b, 100, 600));
  std::vector<unsigned char> back(1024);
  CHECK_CU(cuMemcpyDtoH(back.data(), dev, 1024));
  for (size_t i = 0; i < 600; ++i) CHECK(back[8 + i] == host[40 + i], "AtoA/AtoD byte %zu", i);
  CHECK_CU(cuMemcpyDtoA(a, 512, dev + 8, 256));
  std::vector<unsigned char> part(256);
  CHECK_CU(cuMemcpyAtoH(part.data(), a, 512, 256));
  CHECK(std::memcmp(part.data(), host.data() + 40, 256) == 0, "DtoA/AtoH");
  CHECK_CU(cuMemcpyHtoAAsync(a, 4, host.data() + 900, 100, stream));
  CHECK_CU(cuMemcpyAtoHAsync(part.data(), a, 4, 100, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK(std::memcmp(part.data(), host.data() + 900, 100) == 0, "async HtoA/AtoH");
  // Past the end of the array.
  EXPECT_CU_ERROR(cuMemcpyHtoA(a, 1000, host.data(), 100), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_ERROR(cuMemcpyAtoH(part.data(), a, 1020, 8), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuArrayDestroy(a));
  CHECK_CU(cuArrayDestroy(b));
  CHECK_CU(cuMemFree(dev));
  std::printf("1D array copies\n");
}

void copies3D(CUstream stream) {
  const size_t W = 6, H = 5, D = 4, E = 8;  // float2
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = W;
  d.Height = H;
  d.Depth = D;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 2;
  CUarray a;
  CHECK_CU(cuArray3DCreate(&a, &d));
  CUDA_ARRAY3D_DESCRIPTOR got{};
  CHECK_CU(cuArray3DGetDescriptor(&got, a));
  CHECK(got.Width == W && got.Height == H && got.Depth == D && got.NumChannels == 2 &&
            got.Format == CU_AD_FORMAT_FLOAT && got.Flags == 0,
        "3D descriptor");
  // Memory requirements are only for arrays created with CUDA_ARRAY3D_DEFERRED_MAPPING: an
  // ordinary array gets CUDA_ERROR_INVALID_VALUE (observed on driver 580.159.04, H200).
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  expectError(cuArrayGetMemoryRequirements(&req, a, 0), CUDA_ERROR_INVALID_VALUE,
              "cuArrayGetMemoryRequirements(an ordinary array)");
  std::vector<unsigned char> host = pattern(W * H * D * E, 2);
  CUDA_MEMCPY3D in{};
  in.srcMemoryType = CU_MEMORYTYPE_HOST;
  in.srcHost = host.data();
  in.srcPitch = W * E;
  in.srcHeight = H;
  in.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  in.dstArray = a;
  in.WidthInBytes = W * E;
  in.Height = H;
  in.Depth = D;
  CHECK_CU(cuMemcpy3D(&in));
  // A sub-box of the array into pitched device memory at an offset, async.
  size_t pitch = 0;
  CUdeviceptr dev;
  CHECK_CU(cuMemAllocPitch(&dev, &pitch, 8 * E, 6 * 5, 16));
  CHECK_CU(cuMemsetD8(dev, 0, pitch * 30));
  CUDA_MEMCPY3D out{};
  out.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  out.srcArray = a;
  out.srcXInBytes = 2 * E;
  out.srcY = 1;
  out.srcZ = 1;
  out.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  out.dstDevice = dev;
  out.dstXInBytes = E;
  out.dstY = 2;
  out.dstZ = 1;
  out.dstPitch = pitch;
  out.dstHeight = 6;
  out.WidthInBytes = 3 * E;
  out.Height = 3;
  out.Depth = 2;
  CHECK_CU(cuMemcpy3DAsync(&out, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  std::vector<unsigned char> back(pitch * 30);
  CHECK_CU(cuMemcpyDtoH(back.data(), dev, back.size()));
  for (size_t z = 0; z < 5; ++z) {
    for (size_t y = 0; y < 6; ++y) {
      for (size_t x = 0; x < 8 * E; ++x) {
        bool inside = z >= 1 && z < 3 && y >= 2 && y < 5 && x >= E && x < 4 * E;
        unsigned char want =
            inside ? host[((z - 1 + 1) * H + (y - 2 + 1)) * W * E + (x - E + 2 * E)] : 0;
        CHECK(back[(z * 6 + y) * pitch + x] == want, "3D sub-box byte (%zu,%zu,%zu)", x, y, z);
      }
    }
  }
  // cuMemcpy2D from the array (slice 0) and cuMemcpy3DPeer back.
  std::vector<unsigned char> slice(W * H * E);
  CUDA_MEMCPY2D two{};
  two.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  two.srcArray = a;
  two.dstMemoryType = CU_MEMORYTYPE_HOST;
  two.dstHost = slice.data();
  two.dstPitch = W * E;
  two.WidthInBytes = W * E;
  two.Height = H;
  CHECK_CU(cuMemcpy2D(&two));
  CHECK(std::memcmp(slice.data(), host.data(), slice.size()) == 0, "cuMemcpy2D from an array");
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CUDA_MEMCPY3D_PEER peer{};
  peer.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  peer.srcArray = a;
  peer.srcZ = 3;
  peer.srcContext = ctx;
  peer.dstMemoryType = CU_MEMORYTYPE_HOST;
  peer.dstHost = slice.data();
  peer.dstPitch = W * E;
  peer.dstHeight = H;
  peer.dstContext = ctx;
  peer.WidthInBytes = W * E;
  peer.Height = H;
  peer.Depth = 1;
  CHECK_CU(cuMemcpy3DPeer(&peer));
  CHECK(std::memcmp(slice.data(), host.data() + 3 * W * H * E, slice.size()) == 0,
        "cuMemcpy3DPeer from slice 3");
  // Regions outside the array, and an unknown memory type.
  out.srcZ = 3;
  EXPECT_CU_ERROR(cuMemcpy3D(&out), CUDA_ERROR_INVALID_VALUE);
  out.srcZ = 1;
  out.srcXInBytes = 4 * E;
  EXPECT_CU_ERROR(cuMemcpy3D(&out), CUDA_ERROR_INVALID_VALUE);
  out.srcXInBytes = 0;
  out.srcMemoryType = static_cast<CUmemorytype>(0x77);
  EXPECT_CU_ERROR(cuMemcpy3D(&out), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuArrayDestroy(a));
  CHECK_CU(cuMemFree(dev));
  std::printf("3D copies\n");
}

void mipmaps() {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 16;
  d.Height = 8;
  d.Depth = 4;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  d.NumChannels = 4;
  CUmipmappedArray m;
  CHECK_CU(cuMipmappedArrayCreate(&m, &d, 5));
  // As for cuArrayGetMemoryRequirements, NVIDIA documents this call for mipmapped arrays created
  // with CUDA_ARRAY3D_DEFERRED_MAPPING only; an ordinary one gets CUDA_ERROR_INVALID_VALUE.
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  expectError(cuMipmappedArrayGetMemoryRequirements(&req, m, 0), CUDA_ERROR_INVALID_VALUE,
              "cuMipmappedArrayGetMemoryRequirements(an ordinary mipmapped array)");
  for (unsigned l = 0; l < 5; ++l) {
    CUarray level;
    CHECK_CU(cuMipmappedArrayGetLevel(&level, m, l));
    CUDA_ARRAY3D_DESCRIPTOR got{};
    CHECK_CU(cuArray3DGetDescriptor(&got, level));
    size_t w = 16 >> l ? 16 >> l : 1, h = 8 >> l ? 8 >> l : 1, dd = 4 >> l ? 4 >> l : 1;
    CHECK(got.Width == w && got.Height == h && got.Depth == dd, "level %u extent", l);
    std::vector<unsigned char> host = pattern(w * h * dd * 4, l), back(host.size());
    CUDA_MEMCPY3D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host.data();
    c.srcPitch = w * 4;
    c.srcHeight = h;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = level;
    c.WidthInBytes = w * 4;
    c.Height = h;
    c.Depth = dd;
    CHECK_CU(cuMemcpy3D(&c));
    std::swap(c.srcMemoryType, c.dstMemoryType);
    c.srcArray = level;
    c.dstHost = back.data();
    c.dstPitch = w * 4;
    c.dstHeight = h;
    c.srcHost = nullptr;
    c.dstArray = nullptr;
    CHECK_CU(cuMemcpy3D(&c));
    CHECK(back == host, "level %u round trip", l);
  }
  CUarray level;
  EXPECT_CU_ERROR(cuMipmappedArrayGetLevel(&level, m, 5), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_SPARSE_PROPERTIES sparse{};
  EXPECT_CU_ERROR(cuMipmappedArrayGetSparseProperties(&sparse, m), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuMipmappedArrayDestroy(m));
  std::printf("mipmapped array levels\n");
}

void batches(CUstream stream) {
  CUdeviceptr dev;
  CHECK_CU(cuMemAlloc(&dev, 4096));
  std::vector<unsigned char> host = pattern(4096, 9), back(4096, 0);
  CUdeviceptr dsts[2] = {dev, dev + 2048};
  CUdeviceptr srcs[2] = {reinterpret_cast<CUdeviceptr>(host.data()),
                         reinterpret_cast<CUdeviceptr>(host.data() + 2048)};
  size_t sizes[2] = {2048, 2048};
  CUmemcpyAttributes attrs{};
  attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t attrIdx = 0;
  CHECK_CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attrs, &attrIdx, 1, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemcpyDtoH(back.data(), dev, 4096));
  CHECK(back == host, "cuMemcpyBatchAsync");
  // The CUDA 12.8 ABI of the same call (with failIdx), as cuGetProcAddress gives it.
  using LegacyBatch = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                                   size_t*, size_t, size_t*, CUstream);
  void* legacy = nullptr;
  CUdriverProcAddressQueryResult found{};
  CHECK_CU(
      cuGetProcAddress("cuMemcpyBatchAsync", &legacy, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  CHECK(legacy != nullptr && found == CU_GET_PROC_ADDRESS_SUCCESS, "cuMemcpyBatchAsync 12.8");
  CHECK_CU(cuMemsetD8(dev, 0, 4096));
  size_t failIdx = 0;
  CHECK_CU(reinterpret_cast<LegacyBatch>(legacy)(dsts, srcs, sizes, 2, &attrs, &attrIdx, 1,
                                                 &failIdx, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  std::fill(back.begin(), back.end(), 0);
  CHECK_CU(cuMemcpyDtoH(back.data(), dev, 4096));
  CHECK(back == host, "cuMemcpyBatchAsync (12.8 ABI)");
  attrs.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
  EXPECT_CU_ERROR(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attrs, &attrIdx, 1, stream),
                  CUDA_ERROR_INVALID_VALUE);

  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 16;
  d.Height = 16;
  d.Format = CU_AD_FORMAT_UNSIGNED_INT16;
  d.NumChannels = 1;
  CUarray a;
  CHECK_CU(cuArray3DCreate(&a, &d));
  CUDA_MEMCPY3D_BATCH_OP ops[2] = {};
  ops[0].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[0].src.op.ptr.ptr = dev;
  ops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  ops[0].dst.op.array.array = a;
  ops[0].extent = {16, 16, 1};  // elements: 512 bytes
  ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  ops[1].src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  ops[1].src.op.array.array = a;
  ops[1].src.op.array.offset = {4, 2, 0};
  ops[1].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[1].dst.op.ptr.ptr = reinterpret_cast<CUdeviceptr>(back.data());
  ops[1].extent = {8, 3, 1};
  ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  // The batch's copies may run in any order: the array is written by the first batch and read
  // by the second.
  CHECK_CU(cuMemcpy3DBatchAsync(1, &ops[0], 0, stream));
  CHECK_CU(cuMemcpy3DBatchAsync(1, &ops[1], 0, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  for (size_t y = 0; y < 3; ++y) {
    CHECK(std::memcmp(back.data() + y * 16, host.data() + (2 + y) * 32 + 8, 16) == 0,
          "cuMemcpy3DBatchAsync row %zu", y);
  }
  EXPECT_CU_ERROR(cuMemcpy3DBatchAsync(1, &ops[0], 1, stream), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuArrayDestroy(a));
  CHECK_CU(cuMemFree(dev));
  std::printf("batched copies\n");
}

void invalid() {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = 16;
  d.Height = 16;
  d.Format = CU_AD_FORMAT_FLOAT;
  d.NumChannels = 3;
  CUarray a;
  EXPECT_CU_ERROR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.NumChannels = 1;
  d.Format = static_cast<CUarray_format>(0x55);
  EXPECT_CU_ERROR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Format = CU_AD_FORMAT_FLOAT;
  d.Width = 0;
  EXPECT_CU_ERROR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Width = 16;
  d.Height = 0;
  d.Depth = 4;  // 3D without a height
  EXPECT_CU_ERROR(cuArray3DCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
  d.Height = 16;
  d.Depth = 0;
  CHECK_CU(cuArray3DCreate(&a, &d));
  CUarray plane;
  EXPECT_CU_ERROR(cuArrayGetPlane(&plane, a, 0), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_SPARSE_PROPERTIES sparse{};
  EXPECT_CU_ERROR(cuArrayGetSparseProperties(&sparse, a), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuArrayDestroy(a));
  std::printf("invalid descriptors refused\n");
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // makes the primary context current
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  linearCopies(stream);
  copies3D(stream);
  mipmaps();
  batches(stream);
  invalid();
  CHECK_CU(cuStreamDestroy(stream));
  return pass();
}
