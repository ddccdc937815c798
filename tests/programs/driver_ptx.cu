// Driver API only, as a program that JITs its own PTX: cuInit, a context of its own,
// cuModuleLoadData on PTX text, kernel attributes, a module global, launches with kernelParams
// and with a packed `extra` parameter buffer, and the errors for a missing kernel and for data
// that is not a module. Links against libcuda only (no cudart calls).
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"

namespace {

// out[i] = fma(in[i], scale, offset) + bias for i < n, written by hand so that the program does
// not depend on nvcc's PTX. `bias` is a module global initialised to 1.0f.
const char kAffinePtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.visible .global .align 4 .f32 bias = 0f3F800000;

.visible .entry affine(
    .param .u64 out,
    .param .u64 in,
    .param .f32 scale,
    .param .f32 offset,
    .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<7>;
    .reg .b64 %rd<7>;

    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    ld.param.f32 %f1, [scale];
    ld.param.f32 %f2, [offset];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.u32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f3, [%rd6];
    fma.rn.f32 %f4, %f3, %f1, %f2;
    ld.global.f32 %f5, [bias];
    add.rn.f32 %f6, %f4, %f5;
    add.s64 %rd6, %rd3, %rd5;
    st.global.f32 [%rd6], %f6;
DONE:
    ret;
}
)PTX";

constexpr unsigned kN = 1000;  // not a multiple of the block size
constexpr unsigned kBlock = 128;
constexpr unsigned kGuardElements = 8;
constexpr uint32_t kSentinel = 0xCAFEF00Du;

// Reads back `out` and checks every element against the host computation and the guard.
void expectAffine(CUdeviceptr out, const std::vector<float>& in, float scale, float offset,
                  float bias, const char* how) {
  std::vector<float> result(kN + kGuardElements);
  CHECK_CU(cuMemcpyDtoH(result.data(), out, result.size() * sizeof(float)));
  for (unsigned i = 0; i < kN; ++i) {
    const float expected = std::fmaf(in[i], scale, offset) + bias;
    CHECK(result[i] == expected, "%s: out[%u] = %f, expected %f", how, i, result[i], expected);
  }
  for (unsigned i = kN; i < kN + kGuardElements; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &result[i], sizeof(bits));
    CHECK(bits == kSentinel, "%s: the kernel wrote past n at element %u", how, i);
  }
  std::printf("%s: %u elements ok\n", how, kN);
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  int driverVersion = 0;
  CHECK_CU(cuDriverGetVersion(&driverVersion));
  int count = 0;
  CHECK_CU(cuDeviceGetCount(&count));
  CHECK(count >= 1, "no CUDA device");
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  char name[256] = {};
  CHECK_CU(cuDeviceGetName(name, sizeof(name), device));
  int major = 0, minor = 0;
  CHECK_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  CHECK_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  std::printf("driver %d, device 0: %s, compute capability %d.%d\n", driverVersion, name, major,
              minor);

  CUcontext context;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));
  CUcontext current = nullptr;
  CHECK_CU(cuCtxGetCurrent(&current));
  CHECK(current == context, "cuCtxCreate did not make the new context current");

  CUmodule module;
  CHECK_CU(cuModuleLoadData(&module, kAffinePtx));
  CUfunction affine;
  CHECK_CU(cuModuleGetFunction(&affine, module, "affine"));
  CUfunction missing;
  const CUresult notFound = cuModuleGetFunction(&missing, module, "no_such_kernel");
  CHECK(notFound == CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction(no_such_kernel) returned %s",
        cuErrorName(notFound));

  int maxThreads = 0, registers = -1;
  CHECK_CU(cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, affine));
  CHECK_CU(cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, affine));
  std::printf("affine: max threads per block %d, registers %d\n", maxThreads, registers);
  CHECK(maxThreads >= static_cast<int>(kBlock) && maxThreads <= 1024, "max threads per block %d",
        maxThreads);
  CHECK(registers >= 0, "negative register count %d", registers);

  // The module global starts at its PTX initialiser.
  CUdeviceptr bias;
  size_t biasBytes = 0;
  CHECK_CU(cuModuleGetGlobal(&bias, &biasBytes, module, "bias"));
  CHECK(biasBytes == sizeof(float), "global bias is %zu bytes", biasBytes);
  float biasValue = 0;
  CHECK_CU(cuMemcpyDtoH(&biasValue, bias, sizeof(biasValue)));
  CHECK(biasValue == 1.0f, "global bias starts at %f, expected 1.0", biasValue);

  std::vector<float> in(kN);
  for (unsigned i = 0; i < kN; ++i) in[i] = static_cast<float>(i) * 0.25f;
  CUdeviceptr dIn, dOut;
  CHECK_CU(cuMemAlloc(&dIn, kN * sizeof(float)));
  CHECK_CU(cuMemAlloc(&dOut, (kN + kGuardElements) * sizeof(float)));
  CHECK_CU(cuMemcpyHtoD(dIn, in.data(), kN * sizeof(float)));
  CHECK_CU(cuMemsetD32(dOut, kSentinel, kN + kGuardElements));

  // Launch 1: one pointer per parameter.
  float scale = 3.0f, offset = -7.5f;
  unsigned n = kN;
  void* params[] = {&dOut, &dIn, &scale, &offset, &n};
  const unsigned grid = (kN + kBlock - 1) / kBlock;
  CHECK_CU(cuLaunchKernel(affine, grid, 1, 1, kBlock, 1, 1, 0, nullptr, params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  expectAffine(dOut, in, scale, offset, 1.0f, "kernelParams launch");

  // Launch 2: a new bias through the global, parameters packed into one buffer at their
  // natural alignment (8, 8, 4, 4, 4 -> offsets 0, 8, 16, 20, 24), on a non-blocking stream. That
  // stream does not wait for the legacy stream, where cuMemsetD32 and cuMemcpyHtoD may still be
  // running when they return (cuMemsetD32 on device memory is asynchronous: natively the kernel
  // ran first and the memset's sentinel overwrote its results, driver 580.159.04, H200), so the
  // copy and the memset are queued on the launch's own stream.
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  const float newBias = 0.25f;
  CHECK_CU(cuMemcpyHtoDAsync(bias, &newBias, sizeof(newBias), stream));
  CHECK_CU(cuMemsetD32Async(dOut, kSentinel, kN + kGuardElements, stream));
  scale = -2.0f;
  offset = 0.5f;
  unsigned char packed[28];
  std::memcpy(packed + 0, &dOut, 8);
  std::memcpy(packed + 8, &dIn, 8);
  std::memcpy(packed + 16, &scale, 4);
  std::memcpy(packed + 20, &offset, 4);
  std::memcpy(packed + 24, &n, 4);
  size_t packedSize = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
                   CU_LAUNCH_PARAM_END};
  CHECK_CU(cuLaunchKernel(affine, grid, 1, 1, kBlock, 1, 1, 0, stream, nullptr, extra));
  CHECK_CU(cuStreamSynchronize(stream));
  expectAffine(dOut, in, scale, offset, newBias, "packed extra launch");
  CHECK_CU(cuStreamDestroy(stream));

  // Data that is no module at all.
  const char garbage[] = "this is not a CUDA module \x01\x02\x03";
  CUmodule bad = nullptr;
  const CUresult loadGarbage = cuModuleLoadData(&bad, garbage);
  CHECK(loadGarbage == CUDA_ERROR_INVALID_IMAGE || loadGarbage == CUDA_ERROR_INVALID_PTX,
        "cuModuleLoadData(garbage) returned %s", cuErrorName(loadGarbage));
  std::printf("cuModuleLoadData(garbage) -> %s ok\n", cuErrorName(loadGarbage));

  // The context still works after the failed load.
  float check = 0;
  CHECK_CU(cuMemcpyDtoH(&check, dIn + 4 * sizeof(float), sizeof(check)));
  CHECK(check == in[4], "context broken after a failed module load");

  CHECK_CU(cuMemFree(dIn));
  CHECK_CU(cuMemFree(dOut));
  CHECK_CU(cuModuleUnload(module));
  CHECK_CU(cuCtxDestroy(context));
  return pass();
}
