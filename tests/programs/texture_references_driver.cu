// Texture and surface references (the API before texture objects) through the driver API, on
// hand-written PTX (nvcc no longer emits `.texref`): a 2D float array bound with cuTexRefSetArray
// and sampled with point and linear filtering, unnormalized and normalized coordinates, clamp,
// wrap and border addressing; a uchar4 array read as normalized floats and as integers
// (CU_TRSF_READ_AS_INTEGER); a mipmapped array (cuTexRefSetMipmappedArray, read with tex.level
// through the reference's level bias, clamp and mipmap filter); 1D linear memory
// (cuTexRefSetAddress, with its byte offset) and 2D pitched memory (cuTexRefSetAddress2D); a
// surface reference written with sust; rebinding between launches (state set after a launch changes
// only later launches), and samplers set on references whose memory was freed (the next launch
// runs); the old launch API with cuParamSetTexRef; every Get answering what was Set;
// a launch reading an unbound texture reference (it runs); and the errors: bad formats, modes and
// flags, names that are not references.
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "driver_check.h"

// This program tests deprecated entry points on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define EXPECT_CU_ERROR(call, expected) expectError((call), (expected), #call)

namespace {

const char kReferencesPtx[] = R"PTX(
.version 8.0
.target sm_75
.address_size 64

.global .texref texFloat;
.global .texref texInt;
.global .texref texLinear;
.global .surfref surfWords;
.global .texref texUnbound;
.global .texref texLevels;

// out[i] = tex2D(texFloat, at[i]) (four floats each).
.visible .entry sampleFloat(.param .u64 out, .param .u64 at, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .f32 %f<7>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [at];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.wide.u32 %rd3, %r2, 8;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.v2.f32 {%f1, %f2}, [%rd4];
    tex.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [texFloat, {%f1, %f2}];
    mul.wide.u32 %rd5, %r2, 16;
    add.s64 %rd6, %rd1, %rd5;
    st.global.v4.f32 [%rd6], {%f3, %f4, %f5, %f6};
DONE:
    ret;
}

// out[i] = tex2D(texInt, at[i]) (four 32-bit integers each).
.visible .entry sampleInt(.param .u64 out, .param .u64 at, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<7>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [at];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.wide.u32 %rd3, %r2, 8;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.v2.f32 {%f1, %f2}, [%rd4];
    tex.2d.v4.u32.f32 {%r3, %r4, %r5, %r6}, [texInt, {%f1, %f2}];
    mul.wide.u32 %rd5, %r2, 16;
    add.s64 %rd6, %rd1, %rd5;
    st.global.v4.u32 [%rd6], {%r3, %r4, %r5, %r6};
DONE:
    ret;
}

// out[i] = tex1Dfetch(texLinear, i + first) (the first channel).
.visible .entry fetchLinear(.param .u64 out, .param .u32 first, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<9>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [first];
    ld.param.u32 %r7, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r7;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    add.s32 %r3, %r2, %r1;
    tex.1d.v4.s32.s32 {%r4, %r5, %r6, %r8}, [texLinear, {%r3}];
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.s32 [%rd3], %r4;
DONE:
    ret;
}

// Each 32-bit word (x, y) of surfWords becomes its complement plus y * 1000 + x.
.visible .entry invertWords(.param .u32 w, .param .u32 h)
{
    .reg .pred %p<3>;
    .reg .b32 %r<10>;
    ld.param.u32 %r1, [w];
    ld.param.u32 %r2, [h];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %tid.y;
    setp.ge.u32 %p1, %r3, %r1;
    setp.ge.u32 %p2, %r4, %r2;
    or.pred %p1, %p1, %p2;
    @%p1 bra DONE;
    shl.b32 %r5, %r3, 2;
    suld.b.2d.b32.trap {%r6}, [surfWords, {%r5, %r4}];
    not.b32 %r7, %r6;
    mad.lo.u32 %r8, %r4, 1000, %r3;
    add.u32 %r9, %r7, %r8;
    sust.b.2d.b32.trap [surfWords, {%r5, %r4}], {%r9};
DONE:
    ret;
}

// out[i] = tex2DLod(texLevels, 0.5, 0.5, lods[i]) (normalized coordinates).
.visible .entry sampleLevels(.param .u64 out, .param .u64 lods, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .f32 %f<7>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [lods];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    mov.f32 %f2, 0f3F000000;
    tex.level.2d.v4.f32.f32 {%f3, %f4, %f5, %f6}, [texLevels, {%f2, %f2}], %f1;
    add.s64 %rd5, %rd1, %rd3;
    st.global.f32 [%rd5], %f3;
DONE:
    ret;
}

.visible .entry readUnbound(.param .u64 out)
{
    .reg .f32 %f<5>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [texUnbound, {%f1, %f1}];
    st.global.f32 [%rd1], %f1;
    ret;
}
)PTX";

CUmodule module;
CUfunction sampleFloat, sampleInt, fetchLinear, invertWords, readUnbound, sampleLevels;
CUtexref texFloat, texInt, texLinear, texLevels;
CUsurfref surfWords;

CUdeviceptr upload(const void* host, size_t bytes) {
  CUdeviceptr d;
  CHECK_CU(cuMemAlloc(&d, bytes));
  CHECK_CU(cuMemcpyHtoD(d, host, bytes));
  return d;
}

// Launches `f` (sampleFloat or sampleInt) on `at` into `out` (4 words per point), without waiting.
void launchSample(CUfunction f, CUdeviceptr out, CUdeviceptr at, unsigned n) {
  void* args[] = {&out, &at, &n};
  CHECK_CU(cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr));
}

template <class T>
std::vector<T> sample(CUfunction f, const std::vector<float2>& at) {
  const unsigned n = static_cast<unsigned>(at.size());
  CUdeviceptr atDev = upload(at.data(), n * sizeof(float2));
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, n * 16));
  launchSample(f, out, atDev, n);
  CHECK_CU(cuCtxSynchronize());
  std::vector<T> got(n * 4);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, n * 16));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuMemFree(atDev));
  return got;
}

bool near(float got, float want) {
  return std::fabs(got - want) <= 1e-4f * std::fabs(want) + 1e-5f;
}

// A 4x3 float array: point and linear filtering, clamp, wrap and border, normalized coordinates,
// state changed between launches without waiting.
void floatArray() {
  const int w = 4, h = 3;
  float values[h][w];
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) values[y][x] = static_cast<float>(x * 10 + y);
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = w;
  ad.Height = h;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 1;
  CUarray array;
  CHECK_CU(cuArrayCreate(&array, &ad));
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = values;
  copy.srcPitch = sizeof values[0];
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.dstArray = array;
  copy.WidthInBytes = sizeof values[0];
  copy.Height = h;
  CHECK_CU(cuMemcpy2D(&copy));

  CHECK_CU(cuTexRefSetArray(texFloat, array, CU_TRSA_OVERRIDE_FORMAT));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 0, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 1, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetFlags(texFloat, 0));
  auto clamped = [&](int x, int y) {
    x = x < 0 ? 0 : x >= w ? w - 1 : x;
    y = y < 0 ? 0 : y >= h ? h - 1 : y;
    return values[y][x];
  };
  // Texel centres, one texel outside each edge.
  std::vector<float2> centres;
  for (int y = -1; y <= h; ++y)
    for (int x = -1; x <= w; ++x) centres.push_back(make_float2(x + 0.5f, y + 0.5f));
  const unsigned n = static_cast<unsigned>(centres.size());
  // Quarter past a centre in x, halfway between two rows in y.
  std::vector<float2> between;
  for (int y = 0; y < h - 1; ++y)
    for (int x = 0; x < w - 1; ++x) between.push_back(make_float2(x + 0.75f, y + 1.0f));

  // Point sampling, then linear filtering queued right behind it: each launch reads the state it
  // was launched with.
  CUdeviceptr centresDev = upload(centres.data(), n * sizeof(float2));
  CUdeviceptr betweenDev = upload(between.data(), between.size() * sizeof(float2));
  CUdeviceptr pointOut, linearOut;
  CHECK_CU(cuMemAlloc(&pointOut, n * 16));
  CHECK_CU(cuMemAlloc(&linearOut, between.size() * 16));
  launchSample(sampleFloat, pointOut, centresDev, n);
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_LINEAR));
  launchSample(sampleFloat, linearOut, betweenDev, static_cast<unsigned>(between.size()));
  CHECK_CU(cuCtxSynchronize());
  std::vector<float> point(n * 4), linear(between.size() * 4);
  CHECK_CU(cuMemcpyDtoH(point.data(), pointOut, point.size() * 4));
  CHECK_CU(cuMemcpyDtoH(linear.data(), linearOut, linear.size() * 4));
  int i = 0;
  for (int y = -1; y <= h; ++y)
    for (int x = -1; x <= w; ++x, ++i)
      CHECK(point[i * 4] == clamped(x, y), "point, clamp (%d, %d): %g, want %g", x, y, point[i * 4],
            clamped(x, y));
  i = 0;
  for (int y = 0; y < h - 1; ++y)
    for (int x = 0; x < w - 1; ++x, ++i) {
      const float want = 0.5f * (0.75f * values[y][x] + 0.25f * values[y][x + 1]) +
                         0.5f * (0.75f * values[y + 1][x] + 0.25f * values[y + 1][x + 1]);
      CHECK(near(linear[i * 4], want), "linear (%d, %d): %g, want %g", x, y, linear[i * 4], want);
    }
  CHECK_CU(cuMemFree(pointOut));
  CHECK_CU(cuMemFree(linearOut));
  CHECK_CU(cuMemFree(centresDev));
  CHECK_CU(cuMemFree(betweenDev));

  // Normalized coordinates with wrap: one period to the right reads the same texels.
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 0, CU_TR_ADDRESS_MODE_WRAP));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 1, CU_TR_ADDRESS_MODE_WRAP));
  CHECK_CU(cuTexRefSetFlags(texFloat, CU_TRSF_NORMALIZED_COORDINATES));
  std::vector<float2> wrapped;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      wrapped.push_back(make_float2((x + 0.5f) / w + 1.0f, (y + 0.5f) / h - 1.0f));
  std::vector<float> got = sample<float>(sampleFloat, wrapped);
  i = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x, ++i)
      CHECK(got[i * 4] == values[y][x], "normalized wrap (%d, %d): %g, want %g", x, y, got[i * 4],
            values[y][x]);

  // Border: outside the array reads the border colour.
  float border[4] = {-7.0f, 1.0f, 2.0f, 3.0f};
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 0, CU_TR_ADDRESS_MODE_BORDER));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 1, CU_TR_ADDRESS_MODE_BORDER));
  CHECK_CU(cuTexRefSetBorderColor(texFloat, border));
  CHECK_CU(cuTexRefSetFlags(texFloat, 0));
  got = sample<float>(sampleFloat, centres);
  i = 0;
  for (int y = -1; y <= h; ++y)
    for (int x = -1; x <= w; ++x, ++i) {
      const bool inside = x >= 0 && x < w && y >= 0 && y < h;
      const float want = inside ? values[y][x] : -7.0f;
      CHECK(got[i * 4] == want, "border (%d, %d): %g, want %g", x, y, got[i * 4], want);
    }

  // Every Get answers what was Set.
  CUarray boundArray = nullptr;
  CHECK_CU(cuTexRefGetArray(&boundArray, texFloat));
  CHECK(boundArray == array, "cuTexRefGetArray");
  CUdeviceptr address = 0;
  EXPECT_CU_ERROR(cuTexRefGetAddress(&address, texFloat), CUDA_ERROR_INVALID_VALUE);
  CUarray_format format;
  int channels = 0;
  CHECK_CU(cuTexRefGetFormat(&format, &channels, texFloat));
  CHECK(format == CU_AD_FORMAT_FLOAT && channels == 1, "cuTexRefGetFormat after SetArray");
  for (int d = 0; d < 2; ++d) {
    CUaddress_mode mode;
    CHECK_CU(cuTexRefGetAddressMode(&mode, texFloat, d));
    CHECK(mode == CU_TR_ADDRESS_MODE_BORDER, "cuTexRefGetAddressMode %d", d);
  }
  CUfilter_mode filter;
  CHECK_CU(cuTexRefGetFilterMode(&filter, texFloat));
  CHECK(filter == CU_TR_FILTER_MODE_POINT, "cuTexRefGetFilterMode");
  unsigned flags = 1;
  CHECK_CU(cuTexRefGetFlags(&flags, texFloat));
  CHECK(flags == 0, "cuTexRefGetFlags");
  float borderBack[4] = {};
  CHECK_CU(cuTexRefGetBorderColor(borderBack, texFloat));
  CHECK(std::memcmp(border, borderBack, sizeof border) == 0, "cuTexRefGetBorderColor");
  CHECK_CU(cuTexRefSetMipmapFilterMode(texFloat, CU_TR_FILTER_MODE_LINEAR));
  CHECK_CU(cuTexRefGetMipmapFilterMode(&filter, texFloat));
  CHECK(filter == CU_TR_FILTER_MODE_LINEAR, "cuTexRefGetMipmapFilterMode");
  CHECK_CU(cuTexRefSetMipmapLevelBias(texFloat, 0.5f));
  float bias = 0, minClamp = 0, maxClamp = 0;
  CHECK_CU(cuTexRefGetMipmapLevelBias(&bias, texFloat));
  CHECK(bias == 0.5f, "cuTexRefGetMipmapLevelBias");
  CHECK_CU(cuTexRefSetMipmapLevelClamp(texFloat, 1.0f, 3.0f));
  CHECK_CU(cuTexRefGetMipmapLevelClamp(&minClamp, &maxClamp, texFloat));
  CHECK(minClamp == 1.0f && maxClamp == 3.0f, "cuTexRefGetMipmapLevelClamp");
  CHECK_CU(cuTexRefSetMaxAnisotropy(texFloat, 4));
  int aniso = 0;
  CHECK_CU(cuTexRefGetMaxAnisotropy(&aniso, texFloat));
  CHECK(aniso == 4, "cuTexRefGetMaxAnisotropy");
  CUmipmappedArray mipmapped = nullptr;
  EXPECT_CU_ERROR(cuTexRefGetMipmappedArray(&mipmapped, texFloat), CUDA_ERROR_INVALID_VALUE);
  // The stored-only settings do not change what a non-mipmapped array returns.
  got = sample<float>(sampleFloat, centres);
  CHECK(got[(w + 3) * 4] == values[0][0], "sampling after the mipmap settings: %g",
        got[(w + 3) * 4]);
  CHECK_CU(cuArrayDestroy(array));
  std::printf("float array: point, linear, clamp, wrap, border, normalized coordinates ok\n");
}

// texLevels at each level of detail of `lods`.
std::vector<float> sampleAtLevels(const std::vector<float>& lods) {
  const unsigned n = static_cast<unsigned>(lods.size());
  CUdeviceptr lodsDev = upload(lods.data(), n * sizeof(float));
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, n * sizeof(float)));
  void* args[] = {&out, &lodsDev, const_cast<unsigned*>(&n)};
  CHECK_CU(cuLaunchKernel(sampleLevels, 1, 1, 1, n, 1, 1, 0, nullptr, args, nullptr));
  std::vector<float> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, n * sizeof(float)));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuMemFree(lodsDev));
  return got;
}

// An 8x8 float mipmapped array (levels 8, 4, 2 and 1 texels wide, level l all 100 * (l + 1))
// bound to a texture reference with cuTexRefSetMipmappedArray and read with tex.level: each level
// at its level of detail, then through the reference's level bias, its level clamp, and linear
// filtering between levels.
void mipmappedArray() {
  constexpr unsigned kWidth = 8, kLevels = 4;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = kWidth;
  desc.Height = kWidth;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CUmipmappedArray mipmapped;
  CHECK_CU(cuMipmappedArrayCreate(&mipmapped, &desc, kLevels));
  for (unsigned l = 0; l < kLevels; ++l) {
    CUarray level;
    CHECK_CU(cuMipmappedArrayGetLevel(&level, mipmapped, l));
    const unsigned w = kWidth >> l;
    std::vector<float> texels(w * w, 100.0f * static_cast<float>(l + 1));
    CUDA_MEMCPY2D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = texels.data();
    copy.srcPitch = w * sizeof(float);
    copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.dstArray = level;
    copy.WidthInBytes = w * sizeof(float);
    copy.Height = w;
    CHECK_CU(cuMemcpy2D(&copy));
  }
  EXPECT_CU_ERROR(cuTexRefSetMipmappedArray(texLevels, mipmapped, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuTexRefSetMipmappedArray(texLevels, mipmapped, CU_TRSA_OVERRIDE_FORMAT));
  CUmipmappedArray boundBack = nullptr;
  CHECK_CU(cuTexRefGetMipmappedArray(&boundBack, texLevels));
  CHECK(boundBack == mipmapped, "cuTexRefGetMipmappedArray");
  CUarray plain = nullptr;
  EXPECT_CU_ERROR(cuTexRefGetArray(&plain, texLevels), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuTexRefSetFlags(texLevels, CU_TRSF_NORMALIZED_COORDINATES));
  CHECK_CU(cuTexRefSetFilterMode(texLevels, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetMipmapFilterMode(texLevels, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetMipmapLevelClamp(texLevels, 0.0f, 3.0f));
  const std::vector<float> lods = {0, 1, 2, 3};
  auto expect = [&](const char* what, const std::vector<float>& want) {
    const std::vector<float> got = sampleAtLevels(lods);
    for (size_t i = 0; i < want.size(); ++i)
      CHECK(near(got[i], want[i]), "%s: level of detail %g read %g, expected %g", what, lods[i],
            got[i], want[i]);
  };
  expect("each level", {100, 200, 300, 400});
  CHECK_CU(cuTexRefSetMipmapLevelBias(texLevels, 1.0f));
  expect("level bias 1", {200, 300, 400, 400});
  CHECK_CU(cuTexRefSetMipmapLevelBias(texLevels, 0.0f));
  CHECK_CU(cuTexRefSetMipmapLevelClamp(texLevels, 0.0f, 1.0f));
  expect("levels clamped to 0-1", {100, 200, 200, 200});
  CHECK_CU(cuTexRefSetMipmapLevelClamp(texLevels, 0.0f, 3.0f));
  CHECK_CU(cuTexRefSetMipmapFilterMode(texLevels, CU_TR_FILTER_MODE_LINEAR));
  const std::vector<float> between = sampleAtLevels({0.5f, 2.5f});
  CHECK(near(between[0], 150) && near(between[1], 350),
        "linear between levels: %g and %g, expected 150 and 350", between[0], between[1]);
  CHECK_CU(cuMipmappedArrayDestroy(mipmapped));
  std::printf("mipmapped array: levels, bias, clamp, linear between levels ok\n");
}

// A 2x2 uchar4 array read as normalized floats and, through another reference, as integers.
void byteArrayReadModes() {
  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = 2;
  ad.Height = 2;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  ad.NumChannels = 4;
  CUarray array;
  CHECK_CU(cuArrayCreate(&array, &ad));
  const uint8_t bytes[16] = {0, 51, 102, 255, 10, 20, 30, 40, 200, 1, 2, 3, 255, 255, 0, 128};
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = bytes;
  copy.srcPitch = 8;
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.dstArray = array;
  copy.WidthInBytes = 8;
  copy.Height = 2;
  CHECK_CU(cuMemcpy2D(&copy));
  std::vector<float2> centres = {make_float2(0.5f, 0.5f), make_float2(1.5f, 0.5f),
                                 make_float2(0.5f, 1.5f), make_float2(1.5f, 1.5f)};
  CHECK_CU(cuTexRefSetArray(texFloat, array, CU_TRSA_OVERRIDE_FORMAT));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 0, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 1, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetFlags(texFloat, 0));
  CUarray_format format;
  int channels = 0;
  CHECK_CU(cuTexRefGetFormat(&format, &channels, texFloat));
  CHECK(format == CU_AD_FORMAT_UNSIGNED_INT8 && channels == 4, "format taken from the array");
  std::vector<float> normalized = sample<float>(sampleFloat, centres);
  for (int i = 0; i < 16; ++i)
    CHECK(near(normalized[i], bytes[i] / 255.0f), "normalized float %d: %g, want %g", i,
          normalized[i], bytes[i] / 255.0f);
  CHECK_CU(cuTexRefSetArray(texInt, array, CU_TRSA_OVERRIDE_FORMAT));
  CHECK_CU(cuTexRefSetFlags(texInt, CU_TRSF_READ_AS_INTEGER));
  std::vector<uint32_t> integers = sample<uint32_t>(sampleInt, centres);
  for (int i = 0; i < 16; ++i)
    CHECK(integers[i] == bytes[i], "element read %d: %u, want %u", i, integers[i], bytes[i]);
  CHECK_CU(cuArrayDestroy(array));
  std::printf("uchar4 array: normalized-float and element reads ok\n");
}

// 1D linear memory (with the byte offset of an unaligned address) and 2D pitched memory.
void linearMemory() {
  const int n = 40;
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) values[i] = i * i - 7;
  CUdeviceptr mem = upload(values.data(), n * sizeof(int));
  CHECK_CU(cuTexRefSetFormat(texLinear, CU_AD_FORMAT_SIGNED_INT32, 1));
  CHECK_CU(cuTexRefSetFlags(texLinear, CU_TRSF_READ_AS_INTEGER));
  size_t offset = 99;
  CHECK_CU(cuTexRefSetAddress(&offset, texLinear, mem, n * sizeof(int)));
  CHECK(offset == 0, "byte offset of a cuMemAlloc address: %zu", offset);
  CUdeviceptr back = 0;
  CHECK_CU(cuTexRefGetAddress(&back, texLinear));
  CHECK(back == mem, "cuTexRefGetAddress");
  CUarray noArray;
  EXPECT_CU_ERROR(cuTexRefGetArray(&noArray, texLinear), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, (n + 2) * sizeof(int)));
  auto fetch = [&](int first, unsigned count) {
    void* args[] = {&out, &first, &count};
    CHECK_CU(cuLaunchKernel(fetchLinear, 1, 1, 1, count, 1, 1, 0, nullptr, args, nullptr));
    CHECK_CU(cuCtxSynchronize());
    std::vector<int> got(count);
    CHECK_CU(cuMemcpyDtoH(got.data(), out, count * sizeof(int)));
    return got;
  };
  std::vector<int> got = fetch(0, n + 2);  // the last two are past the end: zeros
  for (int i = 0; i < n + 2; ++i) {
    const int want = i < n ? values[i] : 0;
    CHECK(got[i] == want, "tex1Dfetch %d: %d, want %d", i, got[i], want);
  }
  // Bound 3 elements in: the driver binds from the aligned address and says where the data starts.
  CHECK_CU(cuTexRefSetAddress(&offset, texLinear, mem + 12, (n - 3) * sizeof(int)));
  CHECK(offset == 12, "byte offset of an unaligned address: %zu", offset);
  got = fetch(static_cast<int>(offset / sizeof(int)), n - 3);
  for (int i = 0; i < n - 3; ++i)
    CHECK(got[i] == values[i + 3], "offset fetch %d: %d, want %d", i, got[i], values[i + 3]);
  CHECK_CU(cuMemFree(out));

  // 2D pitched: 5x3 floats in 256-byte rows.
  const int w = 5, h = 3, pitchFloats = 64;
  std::vector<float> pitched(pitchFloats * h, -1.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) pitched[y * pitchFloats + x] = 100.0f * y + x;
  CUdeviceptr pitchedMem = upload(pitched.data(), pitched.size() * sizeof(float));
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = w;
  desc.Height = h;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CHECK_CU(cuTexRefSetAddress2D(texFloat, &desc, pitchedMem, pitchFloats * sizeof(float)));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 0, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetAddressMode(texFloat, 1, CU_TR_ADDRESS_MODE_CLAMP));
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_POINT));
  CHECK_CU(cuTexRefSetFlags(texFloat, 0));
  CHECK_CU(cuTexRefGetAddress(&back, texFloat));
  CHECK(back == pitchedMem, "cuTexRefGetAddress after cuTexRefSetAddress2D");
  std::vector<float2> centres;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x <= w; ++x) centres.push_back(make_float2(x + 0.5f, y + 0.5f));
  std::vector<float> sampled = sample<float>(sampleFloat, centres);
  int i = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x <= w; ++x, ++i) {
      const float want = pitched[y * pitchFloats + (x < w ? x : w - 1)];
      CHECK(sampled[i * 4] == want, "pitched (%d, %d): %g, want %g", x, y, sampled[i * 4], want);
    }
  CHECK_CU(cuMemFree(pitchedMem));
  CHECK_CU(cuMemFree(mem));
  // Both references stay bound to the freed memory. Setting only their samplers does not bind the
  // memory again, so a launch of the module whose kernel reads neither runs.
  CHECK_CU(cuTexRefSetFilterMode(texFloat, CU_TR_FILTER_MODE_LINEAR));
  CHECK_CU(cuTexRefSetFlags(texLinear, CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES));
  CUdeviceptr word;
  CHECK_CU(cuMemAlloc(&word, sizeof(float)));
  void* readArgs[] = {&word};
  CHECK_CU(cuLaunchKernel(readUnbound, 1, 1, 1, 1, 1, 1, 0, nullptr, readArgs, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemFree(word));
  std::printf("1D linear (with byte offset) and 2D pitched memory ok\n");
}

// A surface reference: each word of a 4x2 array rewritten by sust, then read back.
void surfaceReference() {
  const int w = 4, h = 2;
  CUDA_ARRAY3D_DESCRIPTOR ad{};
  ad.Width = w;
  ad.Height = h;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  ad.NumChannels = 1;
  ad.Flags = CUDA_ARRAY3D_SURFACE_LDST;
  CUarray array;
  CHECK_CU(cuArray3DCreate(&array, &ad));
  uint32_t words[h][w];
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) words[y][x] = 0x01020304u * (x + 1) + y;
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = words;
  copy.srcPitch = sizeof words[0];
  copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  copy.dstArray = array;
  copy.WidthInBytes = sizeof words[0];
  copy.Height = h;
  CHECK_CU(cuMemcpy2D(&copy));
  CHECK_CU(cuSurfRefSetArray(surfWords, array, 0));
  CUarray back = nullptr;
  CHECK_CU(cuSurfRefGetArray(&back, surfWords));
  CHECK(back == array, "cuSurfRefGetArray");
  unsigned uw = w, uh = h;
  void* args[] = {&uw, &uh};
  CHECK_CU(cuLaunchKernel(invertWords, 1, 1, 1, w, h, 1, 0, nullptr, args, nullptr));
  CHECK_CU(cuCtxSynchronize());
  uint32_t result[h][w] = {};
  CUDA_MEMCPY2D read{};
  read.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  read.srcArray = array;
  read.dstMemoryType = CU_MEMORYTYPE_HOST;
  read.dstHost = result;
  read.dstPitch = sizeof result[0];
  read.WidthInBytes = sizeof result[0];
  read.Height = h;
  CHECK_CU(cuMemcpy2D(&read));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const uint32_t want = ~words[y][x] + static_cast<uint32_t>(y * 1000 + x);
      CHECK(result[y][x] == want, "surface word (%d, %d): %08x, want %08x", x, y, result[y][x],
            want);
    }
  // A surface reference needs an array made for surface load/store.
  CUDA_ARRAY_DESCRIPTOR plain{};
  plain.Width = 4;
  plain.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  plain.NumChannels = 1;
  CUarray plainArray;
  CHECK_CU(cuArrayCreate(&plainArray, &plain));
  EXPECT_CU_ERROR(cuSurfRefSetArray(surfWords, plainArray, 0), CUDA_ERROR_INVALID_VALUE);
  CHECK_CU(cuArrayDestroy(plainArray));
  CHECK_CU(cuArrayDestroy(array));
  std::printf("surface reference ok\n");
}

// The old launch API: cuParamSetTexRef, then cuLaunchGrid reading the reference.
void legacyLaunch() {
  const int n = 8;
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) values[i] = 3 * i + 1;
  CUdeviceptr mem = upload(values.data(), n * sizeof(int));
  size_t offset = 0;
  CHECK_CU(cuTexRefSetFormat(texLinear, CU_AD_FORMAT_SIGNED_INT32, 1));
  CHECK_CU(cuTexRefSetAddress(&offset, texLinear, mem, n * sizeof(int)));
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, n * sizeof(int)));
  // A deprecated call NVIDIA accepts whatever the unit (observed on driver 580.159.04, H200).
  CHECK_CU(cuParamSetTexRef(fetchLinear, 0, texLinear));
  CHECK_CU(cuParamSetTexRef(fetchLinear, CU_PARAM_TR_DEFAULT, texLinear));
  CHECK_CU(cuFuncSetBlockShape(fetchLinear, n, 1, 1));
  CHECK_CU(cuParamSetv(fetchLinear, 0, &out, sizeof out));
  CHECK_CU(cuParamSeti(fetchLinear, 8, 0));
  CHECK_CU(cuParamSeti(fetchLinear, 12, n));
  CHECK_CU(cuParamSetSize(fetchLinear, 16));
  CHECK_CU(cuLaunchGrid(fetchLinear, 1, 1));
  CHECK_CU(cuCtxSynchronize());
  std::vector<int> got(n);
  CHECK_CU(cuMemcpyDtoH(got.data(), out, n * sizeof(int)));
  for (int i = 0; i < n; ++i)
    CHECK(got[i] == values[i], "legacy launch %d: %d, want %d", i, got[i], values[i]);
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuMemFree(mem));
  std::printf("cuParamSetTexRef and cuLaunchGrid ok\n");
}

// Lookups, cuTexRefCreate, the device limit, and the errors.
void lookupsAndErrors(CUdevice device) {
  CUtexref again = nullptr;
  CHECK_CU(cuModuleGetTexRef(&again, module, "texFloat"));
  CHECK(again == texFloat, "cuModuleGetTexRef answers the same reference");
  CUtexref missing;
  EXPECT_CU_ERROR(cuModuleGetTexRef(&missing, module, "noSuchTexture"), CUDA_ERROR_NOT_FOUND);
  EXPECT_CU_ERROR(cuModuleGetTexRef(&missing, module, "surfWords"), CUDA_ERROR_NOT_FOUND);
  CUsurfref missingSurface;
  EXPECT_CU_ERROR(cuModuleGetSurfRef(&missingSurface, module, "texFloat"), CUDA_ERROR_NOT_FOUND);

  EXPECT_CU_ERROR(cuTexRefSetFormat(texFloat, CU_AD_FORMAT_FLOAT, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_ERROR(cuTexRefSetAddressMode(texFloat, 0, static_cast<CUaddress_mode>(9)),
                  CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_ERROR(cuTexRefSetFilterMode(texFloat, static_cast<CUfilter_mode>(5)),
                  CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU_ERROR(cuTexRefSetFlags(texFloat, 0x100), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR badDesc{};
  badDesc.Width = 4;
  badDesc.Height = 4;
  badDesc.Format = static_cast<CUarray_format>(0x77);
  badDesc.NumChannels = 1;
  CUdeviceptr mem;
  CHECK_CU(cuMemAlloc(&mem, 4096));
  CHECK(cuTexRefSetAddress2D(texFloat, &badDesc, mem, 256) != CUDA_SUCCESS,
        "cuTexRefSetAddress2D accepted an unknown format");
  badDesc.Format = CU_AD_FORMAT_FLOAT;
  EXPECT_CU_ERROR(cuTexRefSetAddress2D(texFloat, &badDesc, mem + 4, 256),
                  CUDA_ERROR_INVALID_VALUE);  // not at TEXTURE_ALIGNMENT

  // A reference of no module holds state. An unknown format is taken (observed on driver
  // 580.159.04, H200: cuTexRefSetFormat(texFloat, 0x77, 1) succeeded; tried here on a reference of
  // no module, whose state no launch binds).
  CUtexref made = nullptr;
  CHECK_CU(cuTexRefCreate(&made));
  CHECK_CU(cuTexRefSetFormat(made, static_cast<CUarray_format>(0x77), 1));
  CHECK_CU(cuTexRefSetFormat(made, CU_AD_FORMAT_HALF, 2));
  CHECK_CU(cuTexRefSetAddressMode(made, 2, CU_TR_ADDRESS_MODE_MIRROR));
  CUarray_format format;
  int channels = 0;
  CHECK_CU(cuTexRefGetFormat(&format, &channels, made));
  CUaddress_mode mode;
  CHECK_CU(cuTexRefGetAddressMode(&mode, made, 2));
  CHECK(format == CU_AD_FORMAT_HALF && channels == 2 && mode == CU_TR_ADDRESS_MODE_MIRROR,
        "state of a created reference");
  CHECK_CU(cuTexRefDestroy(made));

  size_t maxWidth = 0;
  int attribute = 0;
  CHECK_CU(
      cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH, device));
  CHECK_CU(cuDeviceGetTexture1DLinearMaxWidth(&maxWidth, CU_AD_FORMAT_FLOAT, 4, device));
  CHECK(maxWidth > 0 && maxWidth == static_cast<size_t>(attribute),
        "cuDeviceGetTexture1DLinearMaxWidth: %zu, the device attribute says %d", maxWidth,
        attribute);
  EXPECT_CU_ERROR(cuDeviceGetTexture1DLinearMaxWidth(&maxWidth, CU_AD_FORMAT_FLOAT, 3, device),
                  CUDA_ERROR_INVALID_VALUE);

  // A kernel reading a texture reference nothing was bound to launches and completes (observed
  // on driver 580.159.04, H200; what it reads was not observed, so it is not checked).
  void* args[] = {&mem};
  CHECK_CU(cuLaunchKernel(readUnbound, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  CHECK_CU(cuCtxSynchronize());
  CHECK_CU(cuMemFree(mem));
  std::printf("lookups, created references, device limit and errors ok\n");
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));
  CUdevice device;
  CHECK_CU(cuDeviceGet(&device, 0));
  CUcontext context;
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));
  CHECK_CU(cuModuleLoadData(&module, kReferencesPtx));
  CHECK_CU(cuModuleGetFunction(&sampleFloat, module, "sampleFloat"));
  CHECK_CU(cuModuleGetFunction(&sampleInt, module, "sampleInt"));
  CHECK_CU(cuModuleGetFunction(&fetchLinear, module, "fetchLinear"));
  CHECK_CU(cuModuleGetFunction(&invertWords, module, "invertWords"));
  CHECK_CU(cuModuleGetFunction(&readUnbound, module, "readUnbound"));
  CHECK_CU(cuModuleGetFunction(&sampleLevels, module, "sampleLevels"));
  CHECK_CU(cuModuleGetTexRef(&texFloat, module, "texFloat"));
  CHECK_CU(cuModuleGetTexRef(&texInt, module, "texInt"));
  CHECK_CU(cuModuleGetTexRef(&texLinear, module, "texLinear"));
  CHECK_CU(cuModuleGetTexRef(&texLevels, module, "texLevels"));
  CHECK_CU(cuModuleGetSurfRef(&surfWords, module, "surfWords"));
  floatArray();
  mipmappedArray();
  byteArrayReadModes();
  linearMemory();
  surfaceReference();
  legacyLaunch();
  lookupsAndErrors(device);
  CHECK_CU(cuModuleUnload(module));
  CHECK_CU(cuDevicePrimaryCtxRelease(device));
  return pass();
}
