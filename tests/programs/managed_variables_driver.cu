// __managed__ variables through the driver API, in PTX written by hand (`.attribute(.managed)`):
// cuModuleLoadData and cuModuleGetGlobal (the variable's address is valid in host code, managed,
// with its initializer there before any launch), host writes seen by a kernel and its writes seen
// by the host after cuCtxSynchronize, in a loop; two modules of the same image with separate
// variables; unloading and loading again (the variable starts over); and cuLibraryLoadData with
// cuLibraryGetManaged, cuLibraryGetGlobal and a CUkernel launch. No cudart calls.
#include <cuda.h>

#include <cstdint>

#include "driver_check.h"

namespace {

constexpr uint32_t kCount = 5000;  // five pages, less a bit

// values[i] *= 2 for i < n; thread 0 adds one to counter.
const char kManagedPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.visible .global .attribute(.managed) .align 4 .b8 values[20000];
.visible .global .attribute(.managed) .align 4 .u32 counter = 7;
.visible .global .align 4 .u32 plain = 3;

.visible .entry doubleValues(.param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;

    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ne.s32 %p2, %r5, 0;
    @%p2 bra $L_range;
    ld.global.u32 %r6, [counter];
    add.s32 %r6, %r6, 1;
    st.global.u32 [counter], %r6;
$L_range:
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra $L_done;
    mov.u64 %rd1, values;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.u32 %r7, [%rd3];
    shl.b32 %r7, %r7, 1;
    st.global.u32 [%rd3], %r7;
$L_done:
    ret;
}
)PTX";

void launchDouble(CUfunction f) {
  uint32_t n = kCount;
  void* params[] = {&n};
  CHECK_CU(cuLaunchKernel(f, (kCount + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
}

unsigned isManaged(CUdeviceptr p) {
  unsigned managed = 2;
  CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  return managed;
}

// The module's two managed variables, checked to be managed memory valid in host code.
struct Variables {
  uint32_t* values = nullptr;
  uint32_t* counter = nullptr;
};

Variables variablesOf(CUmodule module) {
  CUdeviceptr values = 0, counter = 0;
  size_t valuesBytes = 0, counterBytes = 0;
  CHECK_CU(cuModuleGetGlobal(&values, &valuesBytes, module, "values"));
  CHECK_CU(cuModuleGetGlobal(&counter, &counterBytes, module, "counter"));
  CHECK(valuesBytes == kCount * sizeof(uint32_t), "values is %zu bytes", valuesBytes);
  CHECK(counterBytes == sizeof(uint32_t), "counter is %zu bytes", counterBytes);
  CHECK(isManaged(values) == 1 && isManaged(counter) == 1, "IS_MANAGED of __managed__ variables");
  return {reinterpret_cast<uint32_t*>(values), reinterpret_cast<uint32_t*>(counter)};
}

// Host writes, `rounds` launches with a synchronization after each, host reads.
void roundTrips(CUfunction f, const Variables& v, uint32_t counterBefore, const char* what) {
  CHECK(*v.counter == counterBefore, "%s: counter reads %u before the launches, expected %u", what,
        *v.counter, counterBefore);
  for (uint32_t i = 0; i < kCount; ++i) v.values[i] = i;
  for (uint32_t round = 1; round <= 3; ++round) {
    v.values[round * 1000] = 1;  // a host write between launches
    launchDouble(f);
    CHECK_CU(cuCtxSynchronize());
    CHECK(*v.counter == counterBefore + round, "%s: counter is %u after round %u", what, *v.counter,
          round);
    CHECK(v.values[round * 1000] == 2, "%s: round %u: the host's write", what, round);
  }
  for (uint32_t i = 0; i < kCount; ++i) {
    uint32_t expected = i * 8;
    if (i == 1000) expected = 8;
    if (i == 2000) expected = 4;
    if (i == 3000) expected = 2;
    CHECK(v.values[i] == expected, "%s: values[%u] is %u, expected %u", what, i, v.values[i],
          expected);
  }
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device = 0;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));

  // A module: its variables are managed memory with one address for host code and kernels.
  CUmodule first = nullptr;
  CHECK_CU(cuModuleLoadData(&first, kManagedPtx));
  CUfunction firstDouble = nullptr;
  CHECK_CU(cuModuleGetFunction(&firstDouble, first, "doubleValues"));
  Variables a = variablesOf(first);
  CUdeviceptr plain = 0;
  size_t plainBytes = 0;
  CHECK_CU(cuModuleGetGlobal(&plain, &plainBytes, first, "plain"));
  CHECK(isManaged(plain) == 0, "IS_MANAGED of an ordinary global");
  CUdeviceptr again = 0;
  CHECK_CU(cuModuleGetGlobal(&again, nullptr, first, "values"));
  CHECK(again == reinterpret_cast<CUdeviceptr>(a.values), "a second lookup gives the same address");
  roundTrips(firstDouble, a, 7, "first module");
  std::printf("a module's __managed__ variables in host code and kernels\n");

  // A second module of the same image has variables of its own.
  CUmodule second = nullptr;
  CHECK_CU(cuModuleLoadData(&second, kManagedPtx));
  CUfunction secondDouble = nullptr;
  CHECK_CU(cuModuleGetFunction(&secondDouble, second, "doubleValues"));
  Variables b = variablesOf(second);
  CHECK(b.values != a.values && b.counter != a.counter, "the second module's variables");
  roundTrips(secondDouble, b, 7, "second module");
  CHECK(*a.counter == 10 && a.values[5] == 40, "the first module's variables are untouched");
  std::printf("two modules, two sets of variables\n");

  // Unloaded and loaded again: the variables start over from the image.
  CHECK_CU(cuModuleUnload(first));
  CHECK_CU(cuModuleLoadData(&first, kManagedPtx));
  CHECK_CU(cuModuleGetFunction(&firstDouble, first, "doubleValues"));
  a = variablesOf(first);
  CHECK(*a.counter == 7 && a.values[5] == 0, "a reloaded module's variables: %u %u", *a.counter,
        a.values[5]);
  roundTrips(firstDouble, a, 7, "reloaded module");
  CHECK_CU(cuModuleUnload(first));
  CHECK_CU(cuModuleUnload(second));
  std::printf("unload and reload\n");

  // A library: cuLibraryGetManaged and cuLibraryGetGlobal name the same memory.
  CUlibrary library = nullptr;
  CHECK_CU(cuLibraryLoadData(&library, kManagedPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUdeviceptr managedValues = 0, globalValues = 0, managedCounter = 0;
  size_t managedBytes = 0, globalBytes = 0;
  CHECK_CU(cuLibraryGetManaged(&managedValues, &managedBytes, library, "values"));
  CHECK_CU(cuLibraryGetGlobal(&globalValues, &globalBytes, library, "values"));
  CHECK(managedValues == globalValues && managedBytes == globalBytes &&
            managedBytes == kCount * sizeof(uint32_t),
        "cuLibraryGetManaged and cuLibraryGetGlobal of a managed variable");
  CHECK_CU(cuLibraryGetManaged(&managedCounter, nullptr, library, "counter"));
  CHECK(isManaged(managedValues) == 1, "IS_MANAGED of a library's managed variable");
  CUdeviceptr unused = 0;
  expectError(cuLibraryGetManaged(&unused, nullptr, library, "plain"), CUDA_ERROR_NOT_FOUND,
              "cuLibraryGetManaged(an ordinary global)");
  expectError(cuLibraryGetManaged(&unused, nullptr, library, "missing"), CUDA_ERROR_NOT_FOUND,
              "cuLibraryGetManaged(no such variable)");
  CUkernel kernel = nullptr;
  CHECK_CU(cuLibraryGetKernel(&kernel, library, "doubleValues"));
  Variables l{reinterpret_cast<uint32_t*>(managedValues),
              reinterpret_cast<uint32_t*>(managedCounter)};
  roundTrips(reinterpret_cast<CUfunction>(kernel), l, 7, "library");
  CHECK_CU(cuLibraryUnload(library));
  std::printf("a library's managed variables\n");

  CHECK_CU(cuDevicePrimaryCtxRelease(device));
  return pass();
}
