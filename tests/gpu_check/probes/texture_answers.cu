// What a GPU answers where neither the PTX ISA nor CUDA's documentation fixes the answer, for the
// texture forms the emu refuses (docs/arrays.md): txq/suq .channel_data_type and .channel_order
// for each array format, the level of detail tex.grad chooses on a cubemap, and the level
// anisotropic filtering samples. The GPU check runs it natively and pooled, requires the same
// key=value lines from both (the cuda backend must forward every field of the objects it makes),
// and keeps the native answers in results.json (`answers`), for the emu to follow once known.
//
// Levels of detail are read out, not computed: level L of each mipmapped array holds the value L
// in every texel, and the sampler filters linearly between levels, so a sample returns the level
// of detail the hardware chose, clamped to the levels there are (0 to 6 here). A part the device
// refuses (the emu refuses all three at module load or object creation) prints
// `key=refused:<error>`; any other failure fails the program.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "driver_check.h"

namespace {

constexpr unsigned kExtent = 64;  // level 0 of each mipmapped array: 64 texels a side
constexpr unsigned kLevels = 7;   // 64, 32, ..., 1

const char kChannelPtx[] = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry channels(.param .u64 tex, .param .u64 surf, .param .u64 out)
{
  .reg .b32 %r<5>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [surf];
  ld.param.u64 %rd3, [out];
  cvta.to.global.u64 %rd3, %rd3;
  txq.channel_data_type.b32 %r1, [%rd1];
  txq.channel_order.b32 %r2, [%rd1];
  suq.channel_data_type.b32 %r3, [%rd2];
  suq.channel_order.b32 %r4, [%rd2];
  st.global.u32 [%rd3], %r1;
  st.global.u32 [%rd3+4], %r2;
  st.global.u32 [%rd3+8], %r3;
  st.global.u32 [%rd3+12], %r4;
  ret;
}
)";

// Thread i samples at query i: a direction (3 floats), dPdx (3), dPdy (3).
const char kCubeGradPtx[] = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry cubeGrad(.param .u64 tex, .param .u64 queries, .param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .f32 %f<14>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [queries];
  ld.param.u64 %rd3, [out];
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 36;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.f32 %f1, [%rd5];
  ld.global.f32 %f2, [%rd5+4];
  ld.global.f32 %f3, [%rd5+8];
  ld.global.f32 %f4, [%rd5+12];
  ld.global.f32 %f5, [%rd5+16];
  ld.global.f32 %f6, [%rd5+20];
  ld.global.f32 %f7, [%rd5+24];
  ld.global.f32 %f8, [%rd5+28];
  ld.global.f32 %f9, [%rd5+32];
  tex.grad.cube.v4.f32.f32 {%f10, %f11, %f12, %f13}, [%rd1, {%f1, %f2, %f3, %f3}], {%f4, %f5, %f6, %f6}, {%f7, %f8, %f9, %f9};
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  st.global.f32 [%rd7], %f10;
  ret;
}
)";

// Thread i samples at query i: coordinates (2 floats), dPdx (2), dPdy (2).
const char kGrad2dPtx[] = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry grad2d(.param .u64 tex, .param .u64 queries, .param .u64 out)
{
  .reg .b32 %r<3>;
  .reg .f32 %f<11>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [tex];
  ld.param.u64 %rd2, [queries];
  ld.param.u64 %rd3, [out];
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 24;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.f32 %f1, [%rd5];
  ld.global.f32 %f2, [%rd5+4];
  ld.global.f32 %f3, [%rd5+8];
  ld.global.f32 %f4, [%rd5+12];
  ld.global.f32 %f5, [%rd5+16];
  ld.global.f32 %f6, [%rd5+20];
  tex.grad.2d.v4.f32.f32 {%f7, %f8, %f9, %f10}, [%rd1, {%f1, %f2}], {%f3, %f4}, {%f5, %f6};
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  st.global.f32 [%rd7], %f7;
  ret;
}
)";

// Loads `ptx` and finds `entry`; false, with the key's refusal printed, when the device refuses it.
bool loadKernel(const char* key, const char* ptx, const char* entry, CUmodule* module,
                CUfunction* function) {
  const CUresult loaded = cuModuleLoadData(module, ptx);
  if (loaded == CUDA_ERROR_NOT_SUPPORTED || loaded == CUDA_ERROR_INVALID_PTX) {
    std::printf("%s=refused:%s\n", key, cuErrorName(loaded));
    return false;
  }
  CHECK_CU(loaded);
  CHECK_CU(cuModuleGetFunction(function, *module, entry));
  return true;
}

struct Format {
  CUarray_format format;
  const char* name;
  unsigned bytes;  // per channel
};
const Format kFormats[] = {
    {CU_AD_FORMAT_UNSIGNED_INT8, "u8", 1},   {CU_AD_FORMAT_UNSIGNED_INT16, "u16", 2},
    {CU_AD_FORMAT_UNSIGNED_INT32, "u32", 4}, {CU_AD_FORMAT_SIGNED_INT8, "s8", 1},
    {CU_AD_FORMAT_SIGNED_INT16, "s16", 2},   {CU_AD_FORMAT_SIGNED_INT32, "s32", 4},
    {CU_AD_FORMAT_HALF, "half", 2},          {CU_AD_FORMAT_FLOAT, "float", 4},
};

// txq and suq channel queries on a 4x4 array of each format with 1, 2 and 4 channels, read as
// elements and (8- and 16-bit integers) as normalized floats.
void probeChannels() {
  CUmodule module;
  CUfunction channels;
  if (!loadKernel("channel_queries", kChannelPtx, "channels", &module, &channels)) return;
  CUdeviceptr out;
  CHECK_CU(cuMemAlloc(&out, 4 * sizeof(uint32_t)));
  for (const Format& f : kFormats) {
    for (unsigned n : {1u, 2u, 4u}) {
      CUDA_ARRAY3D_DESCRIPTOR a{};
      a.Width = 4;
      a.Height = 4;
      a.Format = f.format;
      a.NumChannels = n;
      a.Flags = CUDA_ARRAY3D_SURFACE_LDST;
      CUarray array;
      CHECK_CU(cuArray3DCreate(&array, &a));
      CUDA_RESOURCE_DESC resource{};
      resource.resType = CU_RESOURCE_TYPE_ARRAY;
      resource.res.array.hArray = array;
      CUsurfObject surface;
      CHECK_CU(cuSurfObjectCreate(&surface, &resource));
      const bool integer = f.format != CU_AD_FORMAT_HALF && f.format != CU_AD_FORMAT_FLOAT;
      for (bool asInteger : {true, false}) {
        // 8- and 16-bit integers read as normalized floats unless read as integers.
        if (!asInteger && !(integer && f.bytes < 4)) continue;
        CUDA_TEXTURE_DESC t{};
        t.filterMode = CU_TR_FILTER_MODE_POINT;
        t.flags = asInteger && integer ? CU_TRSF_READ_AS_INTEGER : 0;
        CUtexObject texture;
        CHECK_CU(cuTexObjectCreate(&texture, &resource, &t, nullptr));
        void* params[] = {&texture, &surface, &out};
        CHECK_CU(cuLaunchKernel(channels, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
        uint32_t got[4];
        CHECK_CU(cuMemcpyDtoH(got, out, sizeof got));
        std::printf("channel_queries.%sx%u%s=txq %u %u, suq %u %u\n", f.name, n,
                    asInteger ? "" : ".normalized", got[0], got[1], got[2], got[3]);
        CHECK_CU(cuTexObjectDestroy(texture));
      }
      CHECK_CU(cuSurfObjectDestroy(surface));
      CHECK_CU(cuArrayDestroy(array));
    }
  }
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuModuleUnload(module));
}

// A mipmapped array of floats, level L holding L everywhere: `faces` 6 makes it a cubemap.
CUmipmappedArray levelNumberedArray(unsigned faces) {
  CUDA_ARRAY3D_DESCRIPTOR a{};
  a.Width = kExtent;
  a.Height = kExtent;
  a.Depth = faces == 6 ? 6 : 0;
  a.Format = CU_AD_FORMAT_FLOAT;
  a.NumChannels = 1;
  a.Flags = faces == 6 ? CUDA_ARRAY3D_CUBEMAP : 0;
  CUmipmappedArray mipmapped;
  CHECK_CU(cuMipmappedArrayCreate(&mipmapped, &a, kLevels));
  for (unsigned level = 0; level < kLevels; ++level) {
    const unsigned side = kExtent >> level;
    std::vector<float> texels(size_t(side) * side * faces, float(level));
    CUarray array;
    CHECK_CU(cuMipmappedArrayGetLevel(&array, mipmapped, level));
    CUDA_MEMCPY3D copy{};
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = texels.data();
    copy.srcPitch = side * sizeof(float);
    copy.srcHeight = side;
    copy.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    copy.dstArray = array;
    copy.WidthInBytes = side * sizeof(float);
    copy.Height = side;
    copy.Depth = faces;
    CHECK_CU(cuMemcpy3D(&copy));
  }
  return mipmapped;
}

// A texture object on `mipmapped`, filtering linearly within and between levels; 0, with the
// key's refusal printed, when the device refuses the sampler.
CUtexObject levelReadingTexture(const char* key, CUmipmappedArray mipmapped,
                                unsigned maxAnisotropy) {
  CUDA_RESOURCE_DESC resource{};
  resource.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  resource.res.mipmap.hMipmappedArray = mipmapped;
  CUDA_TEXTURE_DESC t{};
  for (CUaddress_mode& mode : t.addressMode) mode = CU_TR_ADDRESS_MODE_CLAMP;
  t.filterMode = CU_TR_FILTER_MODE_LINEAR;
  t.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
  t.flags = CU_TRSF_NORMALIZED_COORDINATES;
  t.maxMipmapLevelClamp = float(kLevels - 1);
  t.maxAnisotropy = maxAnisotropy;
  CUtexObject texture = 0;
  const CUresult created = cuTexObjectCreate(&texture, &resource, &t, nullptr);
  if (created == CUDA_ERROR_NOT_SUPPORTED) {
    std::printf("%s=refused:%s\n", key, cuErrorName(created));
    return 0;
  }
  CHECK_CU(created);
  return texture;
}

// Runs `kernel` on one thread per query (`floats` floats each) and prints what each sampled.
void sampleQueries(const char* key, CUfunction kernel, CUtexObject texture,
                   const std::vector<std::pair<const char*, std::vector<float>>>& queries,
                   unsigned floats) {
  std::vector<float> packed;
  for (const auto& q : queries) {
    CHECK(q.second.size() == floats, "%s.%s: %zu numbers, expected %u", key, q.first,
          q.second.size(), floats);
    packed.insert(packed.end(), q.second.begin(), q.second.end());
  }
  CUdeviceptr in, out;
  CHECK_CU(cuMemAlloc(&in, packed.size() * sizeof(float)));
  CHECK_CU(cuMemAlloc(&out, queries.size() * sizeof(float)));
  CHECK_CU(cuMemcpyHtoD(in, packed.data(), packed.size() * sizeof(float)));
  void* params[] = {&texture, &in, &out};
  CHECK_CU(
      cuLaunchKernel(kernel, 1, 1, 1, unsigned(queries.size()), 1, 1, 0, nullptr, params, nullptr));
  std::vector<float> lod(queries.size());
  CHECK_CU(cuMemcpyDtoH(lod.data(), out, lod.size() * sizeof(float)));
  for (size_t i = 0; i < queries.size(); ++i) {
    CHECK(lod[i] >= 0 && lod[i] <= float(kLevels - 1), "%s.%s: sampled %g, not a level of detail",
          key, queries[i].first, lod[i]);
    std::printf("%s.%s=%.5f\n", key, queries[i].first, lod[i]);
  }
  CHECK_CU(cuMemFree(in));
  CHECK_CU(cuMemFree(out));
}

// tex.grad on a cubemap of 64x64 faces. On the +x face, a step of d along z or y moves the face
// coordinates by d/2 of the face's width at the centre, 32*d texels: d = 1/32 is one texel.
void probeCubeGradients() {
  CUmodule module;
  CUfunction kernel;
  if (!loadKernel("cube_grad_lod", kCubeGradPtx, "cubeGrad", &module, &kernel)) return;
  CUmipmappedArray cube = levelNumberedArray(6);
  CUtexObject texture = levelReadingTexture("cube_grad_lod", cube, 0);
  const float t = 1.0f / 32;  // one texel at a face's centre, at distance 1
  sampleQueries("cube_grad_lod", kernel, texture,
                {
                    {"px_centre_1", {1, 0, 0, 0, 0, t, 0, t, 0}},
                    {"px_centre_2", {1, 0, 0, 0, 0, 2 * t, 0, 2 * t, 0}},
                    {"px_centre_3", {1, 0, 0, 0, 0, 3 * t, 0, 3 * t, 0}},
                    {"px_centre_8", {1, 0, 0, 0, 0, 8 * t, 0, 8 * t, 0}},
                    {"px_centre_8x1", {1, 0, 0, 0, 0, 8 * t, 0, t, 0}},
                    {"px_far_4", {2, 0, 0, 0, 0, 8 * t, 0, 8 * t, 0}},
                    {"px_off_centre_4", {1, 0.5f, 0.25f, 0, 0, 4 * t, 0, 4 * t, 0}},
                    {"px_near_edge_4", {1, 0.9f, 0, 0, 0, 4 * t, 0, 4 * t, 0}},
                    {"px_along_axis", {1, 0.5f, 0.25f, 0.1f, 0, 0, 0, 4 * t, 0}},
                    {"px_diagonal", {1, 0, 0, 0, 3 * t, 3 * t, 0, -2 * t, 2 * t}},
                    {"nx_centre_4", {-1, 0, 0, 0, 0, 4 * t, 0, 4 * t, 0}},
                    {"py_centre_4", {0, 1, 0, 4 * t, 0, 0, 0, 0, 4 * t}},
                    {"ny_centre_4", {0, -1, 0, 4 * t, 0, 0, 0, 0, 4 * t}},
                    {"pz_centre_4", {0, 0, 1, 4 * t, 0, 0, 0, 4 * t, 0}},
                    {"nz_centre_4", {0, 0, -1, 4 * t, 0, 0, 0, 4 * t, 0}},
                    {"zero_gradients", {1, 0.2f, 0.1f, 0, 0, 0, 0, 0, 0}},
                },
                9);
  CHECK_CU(cuTexObjectDestroy(texture));
  CHECK_CU(cuMipmappedArrayDestroy(cube));
  CHECK_CU(cuModuleUnload(module));
}

// tex.grad on a 64x64 mipmapped 2D texture, isotropic (maxAnisotropy 0, which the emu follows)
// and with maxAnisotropy 4 and 16: which level anisotropic filtering samples, for footprints up
// to 16 times longer than wide. One texel is 1/64.
void probeAnisotropy() {
  CUmodule module;
  CUfunction kernel;
  if (!loadKernel("grad2d_lod", kGrad2dPtx, "grad2d", &module, &kernel)) return;
  CUmipmappedArray plane = levelNumberedArray(1);
  const float t = 1.0f / 64;
  const std::vector<std::pair<const char*, std::vector<float>>> queries = {
      {"iso_1", {0.5f, 0.5f, t, 0, 0, t}},
      {"iso_3", {0.5f, 0.5f, 3 * t, 0, 0, 3 * t}},
      {"iso_8", {0.5f, 0.5f, 8 * t, 0, 0, 8 * t}},
      {"long_x_4to1", {0.5f, 0.5f, 4 * t, 0, 0, t}},
      {"long_x_8to1", {0.5f, 0.5f, 8 * t, 0, 0, t}},
      {"long_y_16to1", {0.5f, 0.5f, t, 0, 0, 16 * t}},
      {"long_x_32to2", {0.5f, 0.5f, 32 * t, 0, 0, 2 * t}},
      {"diagonal_8to1", {0.5f, 0.5f, 4 * t, 4 * t, -0.5f * t, 0.5f * t}},
      {"skewed", {0.5f, 0.5f, 3 * t, t, t, 2 * t}},
  };
  for (unsigned anisotropy : {0u, 4u, 16u}) {
    const std::string key = "grad2d_lod.anisotropy" + std::to_string(anisotropy);
    CUtexObject texture = levelReadingTexture(key.c_str(), plane, anisotropy);
    if (texture == 0) continue;
    sampleQueries(key.c_str(), kernel, texture, queries, 6);
    CHECK_CU(cuTexObjectDestroy(texture));
  }
  CHECK_CU(cuMipmappedArrayDestroy(plane));
  CHECK_CU(cuModuleUnload(module));
}

}  // namespace

int main() {
  usePrimaryContext();
  probeChannels();
  probeCubeGradients();
  probeAnisotropy();
  return pass();
}
