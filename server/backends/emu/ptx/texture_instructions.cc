// Semantics of tex, tld4, suld.b, sust.b, txq and suq: the handle a kernel holds is resolved
// through the launch's TextureTable (the context's objects, so a kernel reaches only its own
// context's resources), and the resource's memory through DeviceMemory like any global access.
// Sampling math: texture_sampling.cc.
#include "block_runner.h"
#include "device_element_access.h"
#include "texture_sampling.h"

namespace gpupool::ptx::execution {
namespace {

unsigned geometryDims(TexGeometry g) {
  switch (g) {
    case TexGeometry::k1d:
    case TexGeometry::kA1d:
      return 1;
    case TexGeometry::k3d:
    case TexGeometry::kCube:  // a direction
    case TexGeometry::kACube:
      return 3;
    default:
      return 2;
  }
}

}  // namespace

const TextureView* BlockRunner::boundTexture(uint64_t handle, bool surface, int lane) {
  const TextureView* t = ctx_.services.textures ? ctx_.services.textures->find(handle) : nullptr;
  // A texture reference nothing was bound to: NVIDIA launches the kernel and it completes
  // (observed on driver 580.159.04, H200); what it reads was not observed. The emu reads 0.
  if (!t && !surface && handle >= kTextureReferenceHandleBase) return nullptr;
  if (!t || t->surface != surface) {
    std::ostringstream what;
    if (handle >= kTextureReferenceHandleBase) {
      what << (surface ? "surface" : "texture") << " reference #"
           << (handle - kTextureReferenceHandleBase) << " is not bound";
    } else {
      what << "no " << (surface ? "surface" : "texture") << " object 0x" << std::hex << handle
           << " in this context";
    }
    fault(CUDA_ERROR_ILLEGAL_ADDRESS, lane, curPc_, what.str());
  }
  return t;
}

void BlockRunner::textureAccess(const Instr& in, uint32_t exec) {
  const auto geometry = static_cast<TexGeometry>(in.mode & 15);
  const unsigned gathered = (in.mode >> 4) & 7;  // tld4: the channel plus one; 0 for tex
  const bool cube = geometry == TexGeometry::kCube || geometry == TexGeometry::kACube;
  const bool layered = geometry == TexGeometry::kA1d || geometry == TexGeometry::kA2d ||
                       geometry == TexGeometry::kACube;
  const unsigned dims = geometryDims(geometry);
  const bool isTexture = in.op == Op::kTex;
  const Operand &data = in.ops[0], &coords = in.ops[2];
  forLanes(exec, [&](int l) {
    const uint64_t handle = value(in.ops[1], l);
    const TextureView* t = boundTexture(handle, !isTexture, l);
    if (!t) {
      for (unsigned k = 0; k < 4; ++k) set(element(data, k), l, 0);
      return;
    }
    // A cubemap texture is sampled by direction only; its surface is a layered 2D one, a face
    // per layer.
    const bool fits = cube ? t->cubemap && t->cubemapLayered == (geometry == TexGeometry::kACube)
                           : !(isTexture && t->cubemap) && t->dims == dims && t->layered == layered;
    if (!fits) {
      std::ostringstream what;
      what << (isTexture ? "texture" : "surface") << " object 0x" << std::hex << handle << " is "
           << std::dec
           << (t->cubemap ? (t->cubemapLayered ? "a layered cubemap" : "a cubemap")
                          : std::to_string(t->dims) + "D" + (t->layered ? " layered" : ""))
           << ", the instruction addresses another geometry";
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_, what.str());
    }
    uint8_t* memory = globalPtr(t->address, t->bytes, l);
    // Coordinates: the layer (layered forms) comes first.
    const unsigned first = layered ? 1 : 0;
    const int32_t layer = layered ? static_cast<int32_t>(value(element(coords, 0), l)) : 0;
    uint32_t raw[3] = {0, 0, 0};
    for (unsigned d = 0; d < dims; ++d)
      raw[d] = static_cast<uint32_t>(value(element(coords, first + d), l));
    if (isTexture) {
      float f[3] = {0, 0, 0};
      int32_t i[3] = {0, 0, 0};
      for (unsigned d = 0; d < dims; ++d) {
        std::memcpy(&f[d], &raw[d], 4);
        i[d] = static_cast<int32_t>(raw[d]);
      }
      LevelOfDetail lod;
      if (in.numOps == 4) {
        lod.kind = LevelOfDetail::Kind::kLevel;
        const uint32_t bits = static_cast<uint32_t>(value(in.ops[3], l));
        std::memcpy(&lod.level, &bits, 4);
      } else if (in.numOps == 5) {
        lod.kind = LevelOfDetail::Kind::kGradients;
        for (unsigned g = 0; g < 2; ++g) {
          const Operand& d = in.ops[3 + g];
          float* into = g == 0 ? lod.dPdx : lod.dPdy;
          const unsigned n = d.kind == OperandKind::kVector ? std::min<unsigned>(d.count, 3) : 1;
          for (unsigned k = 0; k < n; ++k) {
            const uint32_t bits =
                static_cast<uint32_t>(value(d.kind == OperandKind::kVector ? element(d, k) : d, l));
            std::memcpy(&into[k], &bits, 4);
          }
        }
      }
      uint32_t out[4];
      if (cube) {
        sampleCubemap(*t, memory, f, layer, lod, out);
      } else if (gathered) {
        gatherTexture(*t, memory, f, layer, gathered - 1, out);
      } else if (in.type2 == Type::kS32 ||
                 (t->levels <= 1 && lod.kind == LevelOfDetail::Kind::kNone)) {
        sampleTexture(*t, memory, f, i, in.type2 == Type::kS32, layer, out);
      } else {
        sampleTextureLevels(*t, memory, f, layer, lod, out);
      }
      for (unsigned k = 0; k < 4; ++k) set(element(data, k), l, out[k]);
      return;
    }
    const unsigned eb = typeBytes(in.type), n = in.vec;
    const int64_t x = static_cast<int32_t>(raw[0]);
    const int64_t y = dims > 1 ? static_cast<int32_t>(raw[1]) : 0;
    const int64_t z = layered ? layer : dims > 2 ? static_cast<int32_t>(raw[2]) : 0;
    uint64_t offset = 0;
    switch (
        surfaceOffset(*t, x, y, z, eb * n, static_cast<SurfaceBoundary>(in.mode >> 4), &offset)) {
      case SurfaceAccess::kOutsideTrap: {
        std::ostringstream what;
        what << "surface access out of range: x " << x << " bytes, y " << y << ", z " << z;
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_, what.str());
      }
      case SurfaceAccess::kOutsideZero:
        if (in.op == Op::kSuld)
          for (unsigned k = 0; k < n; ++k) set(element(data, k), l, 0);
        return;
      case SurfaceAccess::kInside:
        break;
    }
    uint64_t v[4];
    if (in.op == Op::kSuld) {
      loadDeviceVector(memory + offset, eb, n, v);
      for (unsigned k = 0; k < n; ++k) set(element(data, k), l, v[k]);
    } else {
      for (unsigned k = 0; k < n; ++k) v[k] = value(element(data, k), l);
      storeDeviceVector(memory + offset, eb, n, v);
    }
  });
}

void BlockRunner::textureQuery(const Instr& in, uint32_t exec) {
  const bool surface = (in.mode & kTexQueryOfSurface) != 0;
  const auto query = static_cast<TexQuery>(in.mode & ~kTexQueryOfSurface);
  const bool atLevel = in.numOps == 3;  // txq.level
  forLanes(exec, [&](int l) {
    const TextureView* t = boundTexture(value(in.ops[1], l), surface, l);
    // An unbound texture reference answers 0, as tex on it reads 0.
    set(in.ops[0], l,
        t ? queryTexture(*t, query, surface, atLevel,
                         atLevel ? static_cast<int32_t>(value(in.ops[2], l)) : 0)
          : 0);
  });
}

}  // namespace gpupool::ptx::execution
