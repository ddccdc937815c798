// Driver API only: nvcc-produced PTX with wmma and mma.sync (matrix_units/matrix_kernels.cu,
// compiled with -arch=sm_80 and embedded at build time) loaded with cuModuleLoadData and launched
// with cuLaunchKernel; results checked against host products (exact: small integers and an fma
// chain in k order for f64).
#include <cuda.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "matrix_kernels_ptx.h"

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));
  // bin2c's array is not NUL-terminated: the loader gets a terminated copy.
  std::vector<char> ptx(sizeof(k_matrix_kernels_ptx) + 1, 0);
  std::memcpy(ptx.data(), k_matrix_kernels_ptx, sizeof(k_matrix_kernels_ptx));
  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, ptx.data()));
  CUfunction wmmaHalf, mmaF64;
  CHECK_CU(cuModuleGetFunction(&wmmaHalf, module, "wmmaHalf"));
  CHECK_CU(cuModuleGetFunction(&mmaF64, module, "mmaF64"));

  // wmma: 16x16x16 half -> float.
  std::vector<float> fa(256), fb(256);
  std::vector<__half> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    fa[i] = static_cast<float>((i * 3) % 13 - 6);
    fb[i] = static_cast<float>((i * 7) % 5 - 2);
    a[i] = __float2half(fa[i]);
    b[i] = __float2half(fb[i]);
  }
  CUdeviceptr da, db, dd;
  CHECK_CU(cuMemAlloc(&da, 256 * sizeof(__half)));
  CHECK_CU(cuMemAlloc(&db, 256 * sizeof(__half)));
  CHECK_CU(cuMemAlloc(&dd, 256 * sizeof(double)));
  CHECK_CU(cuMemcpyHtoD(da, a.data(), 256 * sizeof(__half)));
  CHECK_CU(cuMemcpyHtoD(db, b.data(), 256 * sizeof(__half)));
  void* wmmaArgs[] = {&da, &db, &dd};
  CHECK_CU(cuLaunchKernel(wmmaHalf, 1, 1, 1, 32, 1, 1, 0, nullptr, wmmaArgs, nullptr));
  std::vector<float> d(256);
  CHECK_CU(cuMemcpyDtoH(d.data(), dd, 256 * sizeof(float)));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 16; ++k) want += fa[i * 16 + k] * fb[j * 16 + k];
      CHECK(d[i * 16 + j] == want, "wmma D[%d][%d] = %g, expected %g", i, j, d[i * 16 + j], want);
    }
  std::printf("cuModuleLoadData(nvcc PTX): wmma 16x16x16 half -> float: exact\n");

  // mma.sync m8n8k4 f64.
  std::vector<double> xa(32), xb(32), xc(64), xd(64);
  for (int i = 0; i < 32; ++i) xa[i] = i % 5 - 2.5, xb[i] = (i * 3) % 7 - 3;
  for (int i = 0; i < 64; ++i) xc[i] = i * 0.25;
  CUdeviceptr pa, pb, pc;
  CHECK_CU(cuMemAlloc(&pa, 32 * sizeof(double)));
  CHECK_CU(cuMemAlloc(&pb, 32 * sizeof(double)));
  CHECK_CU(cuMemAlloc(&pc, 64 * sizeof(double)));
  CHECK_CU(cuMemcpyHtoD(pa, xa.data(), 32 * sizeof(double)));
  CHECK_CU(cuMemcpyHtoD(pb, xb.data(), 32 * sizeof(double)));
  CHECK_CU(cuMemcpyHtoD(pc, xc.data(), 64 * sizeof(double)));
  void* mmaArgs[] = {&pa, &pb, &pc, &dd};
  CHECK_CU(cuLaunchKernel(mmaF64, 1, 1, 1, 32, 1, 1, 0, nullptr, mmaArgs, nullptr));
  CHECK_CU(cuMemcpyDtoH(xd.data(), dd, 64 * sizeof(double)));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = xc[i * 8 + j];
      for (int k = 0; k < 4; ++k) want += xa[i * 4 + k] * xb[k * 8 + j];
      CHECK(xd[i * 8 + j] == want, "f64 D[%d][%d] = %g, expected %g", i, j, xd[i * 8 + j], want);
    }
  std::printf("cuModuleLoadData(nvcc PTX): mma.sync.m8n8k4 f64: exact\n");

  for (CUdeviceptr p : {da, db, dd, pa, pb, pc}) CHECK_CU(cuMemFree(p));
  CHECK_CU(cuModuleUnload(module));
  CHECK_CU(cuCtxDestroy(context));
  std::printf("PASS\n");
  return 0;
}
