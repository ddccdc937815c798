// The execution API from before CUDA 4.0, as old programs and bindings still call it: a block
// shape, a parameter buffer filled with cuParamSetv/cuParamSetf/cuParamSeti, and cuLaunchGrid,
// cuLaunchGridAsync and cuLaunch; the deprecated context usage count (cuCtxAttach, cuCtxDetach)
// and bank-size configuration. Driver API only, on PTX of its own.
#include <cuda.h>

#include <cstdint>
#include <vector>

#include "driver_check.h"

// This program tests deprecated entry points on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

// out[i] = i * scale + offset for i < n, where i counts threads over a 2D grid of 2D blocks:
// i = ((ctaid.y * nctaid.x + ctaid.x) * ntid.y + tid.y) * ntid.x + tid.x.
const char kRampPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.visible .entry ramp(
    .param .u64 out,
    .param .f32 scale,
    .param .u32 offset,
    .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [out];
    ld.param.f32 %f1, [scale];
    ld.param.u32 %r1, [offset];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.y;
    mov.u32 %r4, %nctaid.x;
    mov.u32 %r5, %ctaid.x;
    mad.lo.u32 %r6, %r3, %r4, %r5;
    mov.u32 %r7, %ntid.y;
    mov.u32 %r8, %tid.y;
    mad.lo.u32 %r9, %r6, %r7, %r8;
    mov.u32 %r10, %ntid.x;
    mov.u32 %r11, %tid.x;
    mad.lo.u32 %r12, %r9, %r10, %r11;
    setp.ge.u32 %p1, %r12, %r2;
    @%p1 bra DONE;
    cvt.rn.f32.u32 %f2, %r12;
    cvt.rn.f32.u32 %f3, %r1;
    fma.rn.f32 %f2, %f2, %f1, %f3;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r12, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.f32 [%rd2], %f2;
DONE:
    ret;
}
)PTX";

constexpr unsigned kCapacity = 256;

// Sets ramp's parameters the pre-4.0 way: a packed buffer, each value at its aligned offset.
void setRampParams(CUfunction ramp, CUdeviceptr out, float scale, unsigned offset, unsigned n) {
  CHECK_CU(cuParamSetv(ramp, 0, &out, sizeof out));
  CHECK_CU(cuParamSetf(ramp, 8, scale));
  CHECK_CU(cuParamSeti(ramp, 12, offset));
  CHECK_CU(cuParamSeti(ramp, 16, n));
  CHECK_CU(cuParamSetSize(ramp, 20));
}

void expectRamp(CUdeviceptr out, float scale, unsigned offset, unsigned n, const char* what) {
  std::vector<float> host(kCapacity);
  CHECK_CU(cuMemcpyDtoH(host.data(), out, kCapacity * sizeof(float)));
  for (unsigned i = 0; i < kCapacity; ++i) {
    const float expected =
        i < n ? static_cast<float>(i) * scale + static_cast<float>(offset) : -1.0f;
    CHECK(host[i] == expected, "%s: out[%u] = %g, expected %g", what, i, host[i], expected);
  }
  std::printf("%s: %u values ok\n", what, n);
}

void clear(CUdeviceptr out) {
  // -1.0f everywhere, so untouched elements show.
  CHECK_CU(cuMemsetD32(out, 0xbf800000u, kCapacity));
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuCtxCreate(&context, nullptr, 0, device));

  // The usage count: one more user, then one fewer, and the context still works.
  CUcontext attached = nullptr;
  CHECK_CU(cuCtxAttach(&attached, 0));
  CHECK(attached == context, "cuCtxAttach did not return the current context");
  CHECK_CU(cuCtxDetach(attached));

  CUmodule module = nullptr;
  CHECK_CU(cuModuleLoadData(&module, kRampPtx));
  CUfunction ramp = nullptr;
  CHECK_CU(cuModuleGetFunction(&ramp, module, "ramp"));
  CUdeviceptr out = 0;
  CHECK_CU(cuMemAlloc(&out, kCapacity * sizeof(float)));

  // Bank-size configuration: four bytes, fixed on every GPU since Volta; settings are accepted.
  CUsharedconfig banks = CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE;
  CHECK_CU(cuCtxGetSharedMemConfig(&banks));
  CHECK(banks == CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE, "bank size config %d", banks);
  CHECK_CU(cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE));
  CHECK_CU(cuFuncSetSharedMemConfig(ramp, CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE));

  // A 3x2 grid of 8x4 blocks covers 192 threads; 190 of them write.
  clear(out);
  CHECK_CU(cuFuncSetBlockShape(ramp, 8, 4, 1));
  CHECK_CU(cuFuncSetSharedSize(ramp, 0));
  setRampParams(ramp, out, 0.5f, 3, 190);
  CHECK_CU(cuLaunchGrid(ramp, 3, 2));
  CHECK_CU(cuCtxSynchronize());
  expectRamp(out, 0.5f, 3, 190, "cuLaunchGrid");

  // On a stream of its own, with new values in the same buffer.
  CUstream stream = nullptr;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  clear(out);
  CHECK_CU(cuCtxSynchronize());
  setRampParams(ramp, out, 2.0f, 7, 250);
  CHECK_CU(cuFuncSetBlockShape(ramp, 16, 2, 1));
  CHECK_CU(cuLaunchGridAsync(ramp, 4, 2, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  expectRamp(out, 2.0f, 7, 250, "cuLaunchGridAsync");

  // cuLaunch: one block.
  clear(out);
  setRampParams(ramp, out, 1.0f, 0, kCapacity);
  CHECK_CU(cuLaunch(ramp));
  CHECK_CU(cuCtxSynchronize());
  expectRamp(out, 1.0f, 0, 32, "cuLaunch");

  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuModuleUnload(module));
  // The last user detaches: the context goes, as cuCtxDestroy would end it.
  CHECK_CU(cuCtxDetach(context));
  CUcontext current = nullptr;
  CHECK_CU(cuCtxGetCurrent(&current));
  CHECK(current == nullptr, "the detached context is still current");
  return pass();
}
