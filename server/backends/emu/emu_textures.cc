// Texture and surface objects on the emu: each is a ptx::TextureView of an array of this context
// (laid out as docs/arrays.md says) or of its device memory, named by a handle this context
// mints. Kernels receive that handle; tex/suld/sust resolve it in the table their launch was
// queued with, so a handle never reaches another context's objects or memory.
#include <algorithm>
#include <memory>

#include "common/hex.h"
#include "server/backends/emu/emu_context.h"
#include "server/backends/emu/ptx/tensor_map.h"

namespace gpupool::server::emu {

Status EmuContext::textureView(const TextureDescription& d, ptx::TextureView* out) {
  std::string reason;
  if (CUresult r = checkTextureDescription(d, &reason); r != CUDA_SUCCESS) {
    return Status::error(r, reason);
  }
  ptx::TextureView& v = *out;
  v = ptx::TextureView{};
  v.surface = d.surface;
  if (d.resourceType == CU_RESOURCE_TYPE_ARRAY ||
      d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
    const bool mipmapped = d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    auto it = arrays_.find(d.handle);
    if (it == arrays_.end() || (it->second.levels != 0) != mipmapped) {
      return Status::error(
          CUDA_ERROR_INVALID_HANDLE,
          std::string("unknown ") + (mipmapped ? "mipmapped array " : "array ") + hex(d.handle));
    }
    const ArrayShape& s = it->second.shape;
    if (CUresult r = checkTextureArray(d, s, &reason); r != CUDA_SUCCESS) {
      return Status::error(r, reason);
    }
    v.resource = ptx::TextureResource::kArray;
    v.address = it->second.address;
    v.bytes = arrayBytes(s);
    v.format = s.format;
    v.channels = s.channels;
    v.width = s.width;
    v.layered = (s.flags & CUDA_ARRAY3D_LAYERED) != 0;
    v.height = std::max<uint64_t>(s.height, 1);
    if (s.flags & CUDA_ARRAY3D_CUBEMAP) {
      // Faces are layers (common/cuda_array_layout.h), six per cube.
      v.cubemap = true;
      v.cubemapLayered = v.layered;
      v.layered = true;
      v.layers = s.depth;
      v.dims = 2;
    } else if (v.layered) {
      v.layers = s.depth;
      v.dims = s.height ? 2 : 1;
    } else {
      v.depth = std::max<uint64_t>(s.depth, 1);
      v.dims = s.depth ? 3 : s.height ? 2 : 1;
    }
    v.rowPitch = arrayRowBytes(s);
    v.slicePitch = v.rowPitch * arrayRows(s);
    if (mipmapped) {
      v.mipmapped = true;
      // Levels one after the other in the block (common/cuda_array_layout.h).
      v.levels = std::min(it->second.levels, ptx::TextureView::kMaxLevels);
      v.bytes = arrayTotalBytes(s, it->second.levels);
      for (unsigned l = 0; l < v.levels; ++l) {
        const ArrayShape ls = arrayLevelShape(s, l);
        ptx::TextureView::Level& level = v.level[l];
        level.offset = arrayLevelOffset(s, l);
        level.width = ls.width;
        level.height = std::max<uint64_t>(ls.height, 1);
        level.depth = arrayDepthIsLayers(s) ? 1 : std::max<uint64_t>(ls.depth, 1);
        level.rowPitch = arrayRowBytes(ls);
        level.slicePitch = level.rowPitch * arrayRows(ls);
      }
    }
  } else {
    const uint64_t element = uint64_t{arrayChannelBytes(d.format)} * d.channels;
    v.format = d.format;
    v.channels = d.channels;
    v.address = d.handle;
    if (d.resourceType == CU_RESOURCE_TYPE_LINEAR) {
      v.resource = ptx::TextureResource::kLinear;
      v.width = d.sizeBytes / element;
      v.bytes = d.sizeBytes;
      v.rowPitch = v.bytes;
    } else {
      v.resource = ptx::TextureResource::kPitch2D;
      v.dims = 2;
      v.width = d.width;
      v.height = d.height;
      v.rowPitch = d.pitchBytes;
      v.bytes = (d.height - 1) * d.pitchBytes + d.width * element;
    }
    v.slicePitch = v.bytes;
    if (!view(v.address, v.bytes)) {
      return Status::error(CUDA_ERROR_INVALID_VALUE,
                           "texture memory " + hex(v.address) + " (" + std::to_string(v.bytes) +
                               " bytes) is not within one allocation of this context");
    }
  }
  return textureSampler(d, out);
}

// The sampler half of a view: how `d` samples the resource `v` describes.
Status EmuContext::textureSampler(const TextureDescription& d, ptx::TextureView* out) {
  ptx::TextureView& v = *out;
  if (d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
    v.mipmapFilterMode = d.mipmapFilterMode;
    v.mipmapLevelBias = d.mipmapLevelBias;
    v.minMipmapLevelClamp = d.minMipmapLevelClamp;
    v.maxMipmapLevelClamp = d.maxMipmapLevelClamp;
    if (d.maxAnisotropy > 1) {
      return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                           "the emu does not filter anisotropically (maxAnisotropy " +
                               std::to_string(d.maxAnisotropy) + "); leave it at 0 or 1");
    }
  }
  // Linear memory is fetched by index: its address and filter modes are ignored, as the driver
  // ignores them.
  const bool linear = d.resourceType == CU_RESOURCE_TYPE_LINEAR;
  for (int i = 0; i < 3; ++i)
    v.addressMode[i] = linear ? unsigned{CU_TR_ADDRESS_MODE_CLAMP} : d.addressMode[i];
  v.filterMode = linear ? unsigned{CU_TR_FILTER_MODE_POINT} : d.filterMode;
  v.readAsInteger = (d.flags & CU_TRSF_READ_AS_INTEGER) != 0;
  v.normalizedCoords = (d.flags & CU_TRSF_NORMALIZED_COORDINATES) != 0;
  v.srgb = (d.flags & CU_TRSF_SRGB) != 0;
  for (int i = 0; i < 4; ++i) v.borderColor[i] = d.borderColor[i];
  if (v.cubemap && !d.surface && (d.flags & CU_TRSF_SEAMLESS_CUBEMAP) &&
      d.filterMode == CU_TR_FILTER_MODE_LINEAR) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "the emu does not filter across cubemap faces "
                         "(CU_TRSF_SEAMLESS_CUBEMAP with linear filtering); leave the flag off or "
                         "filter by point");
  }
  return Status::success();
}

Status EmuContext::textureCreate(const TextureDescription& d, uint64_t* handle) {
  if (Status st = sticky(); !st.ok()) return st;
  ptx::TextureView v;
  if (Status st = textureView(d, &v); !st.ok()) return st;
  auto next = std::make_shared<TextureObjects>(*textures_);
  *handle = nextHandle_++;
  next->views.emplace(*handle, v);
  std::lock_guard lock(launchTablesMutex_);
  textures_ = std::move(next);
  return Status::success();
}

Status EmuContext::textureDestroy(uint64_t handle, bool surface) {
  auto it = textures_->views.find(handle);
  if (it == textures_->views.end() || it->second.surface != surface) {
    return Status::error(
        CUDA_ERROR_INVALID_HANDLE,
        std::string("unknown ") + (surface ? "surface" : "texture") + " object " + hex(handle));
  }
  auto next = std::make_shared<TextureObjects>(*textures_);
  next->views.erase(handle);
  std::lock_guard lock(launchTablesMutex_);
  textures_ = std::move(next);
  return Status::success();
}

}  // namespace gpupool::server::emu

namespace gpupool::server::emu {

// A reference's binding is a view like an object's, kept with its module rather than under a
// handle: tex/suld/sust name the reference, and the launch resolves it in the bindings it was
// queued with (launch in emu_context.cc).
Status EmuContext::textureReferenceFind(uint64_t module, const std::string& name, bool surface) {
  auto it = modules_.find(module);
  if (it == modules_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown module");
  for (const auto& r : it->second.program->references()) {
    if (r.name == name && r.surface == surface) return Status::success();
  }
  return Status::error(
      CUDA_ERROR_NOT_FOUND,
      std::string("no ") + (surface ? "surface" : "texture") + " reference named '" + name + "'");
}

Status EmuContext::textureReferenceBind(uint64_t module, const std::string& name,
                                        const TextureDescription& d) {
  if (Status st = sticky(); !st.ok()) return st;
  auto it = modules_.find(module);
  if (it == modules_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown module");
  const auto& references = it->second.program->references();
  uint32_t index = 0;
  while (index < references.size() &&
         (references[index].name != name || references[index].surface != d.surface)) {
    ++index;
  }
  if (index == references.size()) {
    return Status::error(CUDA_ERROR_NOT_FOUND, "no reference named '" + name + "'");
  }
  LoadedModule& m = it->second;
  ptx::TextureView v;
  const auto bound = m.references->find(index);
  const auto described = m.referenceDescriptions.find(index);
  if (bound != m.references->end() && described != m.referenceDescriptions.end() &&
      sameTextureResource(described->second, d)) {
    // Only the sampler changed: the resource stays as bound, not looked at again, as the
    // driver's cuTexRefSet* leave it (its memory may have been freed since; a kernel that reads
    // it then faults).
    v = bound->second;
    if (Status st = textureSampler(d, &v); !st.ok()) return st;
  } else if (Status st = textureView(d, &v); !st.ok()) {
    return st;
  }
  auto next = std::make_shared<ReferenceBindings>(*m.references);
  (*next)[index] = v;
  m.referenceDescriptions[index] = d;
  std::lock_guard lock(launchTablesMutex_);
  m.references = std::move(next);
  return Status::success();
}

Status EmuContext::checkReferencesBound(const ptx::Module& program, const ptx::KernelInfo& kernel,
                                        const ReferenceBindings& bindings) {
  for (uint32_t index : kernel.references) {
    if (bindings.count(index)) continue;
    const ptx::TextureReference& r = program.references()[index];
    // An unbound texture reference does not stop the launch (observed on driver 580.159.04,
    // H200); the kernel reads 0 through it (ptx/texture_instructions.cc).
    if (!r.surface) continue;
    return Status::error(
        CUDA_ERROR_INVALID_VALUE,
        "kernel " + kernel.name + " uses surface reference '" + r.name +
            "', which is not bound: bind it (cuSurfRefSetArray) before the launch");
  }
  return Status::success();
}

Status EmuContext::textureReferencesBound(uint64_t function) {
  auto f = functions_.find(function);
  if (f == functions_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown function");
  auto m = modules_.find(f->second.module);
  if (m == modules_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown module");
  return checkReferencesBound(*f->second.program, *f->second.kernel, *m->second.references);
}

// Tensor maps in the emu's own layout (ptx/tensor_map.h), which cp.async.bulk.tensor reads. The
// map names an address, not memory: as on a GPU, a copy through it reaches only what the launch's
// context can reach, so nothing is checked against this context's allocations here.
Status EmuContext::tensorMapEncode(const TensorMapRequest& r, uint8_t* map) {
  if (r.mode == TensorMapMode::kIm2colWide) {
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "im2col wide tensor maps are sm_100 features the emu does not offer "
                         "(it is compute capability 9.0)");
  }
  const size_t rank = r.globalDims.size();  // lengths checked by the handler
  ptx::TensorMapLayout layout;
  layout.rank = static_cast<uint32_t>(rank);
  layout.dataType = r.dataType;
  layout.interleave = r.interleave;
  layout.swizzle = r.swizzle;
  layout.l2Promotion = r.l2Promotion;
  layout.oobFill = r.oobFill;
  layout.globalAddress = r.globalAddress;
  for (size_t i = 0; i < rank; ++i) {
    layout.globalDim[i] = r.globalDims[i];
    layout.elementStrides[i] = r.elementStrides[i];
    if (i + 1 < rank) layout.globalStrides[i] = r.globalStrides[i];
  }
  if (r.mode == TensorMapMode::kTiled) {
    for (size_t i = 0; i < rank; ++i) layout.boxDim[i] = r.boxDims[i];
    return ptx::encodeTiledTensorMap(layout, map);
  }
  layout.mode = ptx::kTensorMapIm2col;
  for (size_t i = 0; i < r.pixelBoxLower.size(); ++i) {
    layout.pixelBoxLower[i] = r.pixelBoxLower[i];
    layout.pixelBoxUpper[i] = r.pixelBoxUpper[i];
  }
  layout.channelsPerPixel = r.channelsPerPixel;
  layout.pixelsPerColumn = r.pixelsPerColumn;
  return ptx::encodeIm2colTensorMap(layout, map);
}

Status EmuContext::tensorMapReplaceAddress(uint8_t* map, uint64_t address) {
  return ptx::replaceTensorMapAddress(map, address);
}

}  // namespace gpupool::server::emu
