// Texture and surface objects on the real driver: cuTexObjectCreate / cuSurfObjectCreate on this
// context's arrays (translated from the ids it minted) or its device memory (checked against its
// allocations). The handle is the driver's: kernels receive it unchanged in their parameters, and
// the driver resolves it within this context only. Destroy accepts only handles this context made.
// Texture and surface references are the driver's own (cuModuleGetTexRef / cuModuleGetSurfRef of
// this context's module), bound with cuTexRefSet* / cuSurfRefSetArray: the driver takes their
// state when a kernel is launched, as it does for any program. Tensor maps are the driver's
// encoding (cuTensorMapEncode*), which kernels take as parameters unchanged.
#include <cstring>

#include "server/backends/cuda/cuda_context.h"

namespace gpupool::server {

Status CudaContext::textureCreate(const TextureDescription& d, uint64_t* handle) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::string reason;
  if (CUresult r = checkTextureDescription(d, &reason); r != CUDA_SUCCESS) {
    return Status::error(r, reason);
  }
  CUDA_RESOURCE_DESC rd{};
  rd.resType = static_cast<CUresourcetype>(d.resourceType);
  const uint64_t element = uint64_t{arrayChannelBytes(d.format)} * d.channels;
  switch (d.resourceType) {
    case CU_RESOURCE_TYPE_ARRAY:
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
      const bool mipmapped = d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
      auto it = arrays_.find(d.handle);
      if (it == arrays_.end() ||
          !(mipmapped ? it->second.mipmapped != nullptr : it->second.array != nullptr)) {
        return Status::error(CUDA_ERROR_INVALID_HANDLE,
                             mipmapped ? "unknown mipmapped array" : "unknown array");
      }
      if (CUresult r = checkTextureArray(d, it->second.shape, &reason); r != CUDA_SUCCESS) {
        return Status::error(r, reason);
      }
      if (mipmapped) {
        rd.res.mipmap.hMipmappedArray = it->second.mipmapped;
      } else {
        rd.res.array.hArray = it->second.array;
      }
      break;
    }
    case CU_RESOURCE_TYPE_LINEAR:
      if (Status s = checkPitchedRange("texture memory", d.handle, d.sizeBytes, d.sizeBytes, 1);
          !s.ok()) {
        return s;
      }
      rd.res.linear.devPtr = d.handle;
      rd.res.linear.format = static_cast<CUarray_format>(d.format);
      rd.res.linear.numChannels = d.channels;
      rd.res.linear.sizeInBytes = d.sizeBytes;
      break;
    default:  // pitch2D (checkTextureDescription refused the rest)
      if (Status s = checkPitchedRange("texture memory", d.handle, d.pitchBytes, d.width * element,
                                       d.height);
          !s.ok()) {
        return s;
      }
      rd.res.pitch2D.devPtr = d.handle;
      rd.res.pitch2D.format = static_cast<CUarray_format>(d.format);
      rd.res.pitch2D.numChannels = d.channels;
      rd.res.pitch2D.width = d.width;
      rd.res.pitch2D.height = d.height;
      rd.res.pitch2D.pitchInBytes = d.pitchBytes;
      break;
  }
  if (d.surface) {
    CUsurfObject s = 0;
    if (Status st = driver_->call(driver_->surfObjectCreate, &s, &rd); !st.ok()) return st;
    *handle = s;
  } else {
    CUDA_TEXTURE_DESC td{};
    for (int i = 0; i < 3; ++i) td.addressMode[i] = static_cast<CUaddress_mode>(d.addressMode[i]);
    td.filterMode = static_cast<CUfilter_mode>(d.filterMode);
    td.flags = d.flags;
    for (int i = 0; i < 4; ++i) td.borderColor[i] = d.borderColor[i];
    td.mipmapFilterMode = static_cast<CUfilter_mode>(d.mipmapFilterMode);
    td.mipmapLevelBias = d.mipmapLevelBias;
    td.minMipmapLevelClamp = d.minMipmapLevelClamp;
    td.maxMipmapLevelClamp = d.maxMipmapLevelClamp;
    td.maxAnisotropy = d.maxAnisotropy;
    CUtexObject t = 0;
    if (Status st = driver_->call(driver_->texObjectCreate, &t, &rd, &td, nullptr); !st.ok()) {
      return st;
    }
    *handle = t;
  }
  textures_[*handle] = d.surface;
  return Status::success();
}

Status CudaContext::textureDestroy(uint64_t handle, bool surface) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = textures_.find(handle);
  if (it == textures_.end() || it->second != surface) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE,
                         std::string("unknown ") + (surface ? "surface" : "texture") + " object");
  }
  Status s = surface ? driver_->call(driver_->surfObjectDestroy, handle)
                     : driver_->call(driver_->texObjectDestroy, handle);
  if (s.ok()) textures_.erase(it);
  return s;
}

Status CudaContext::textureReferenceFind(uint64_t module, const std::string& name, bool surface) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = modules_.find(module);
  if (it == modules_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown module");
  if (surface) {
    CUsurfref ref = nullptr;
    return driver_->call(driver_->moduleGetSurfRef, &ref, it->second, name.c_str());
  }
  CUtexref ref = nullptr;
  return driver_->call(driver_->moduleGetTexRef, &ref, it->second, name.c_str());
}

Status CudaContext::textureReferenceBind(uint64_t module, const std::string& name,
                                         const TextureDescription& d) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::string reason;
  if (CUresult r = checkTextureDescription(d, &reason); r != CUDA_SUCCESS) {
    return Status::error(r, reason);
  }
  auto m = modules_.find(module);
  if (m == modules_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown module");
  const bool mipmapped = d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  CUarray array = nullptr;
  CUmipmappedArray mipmappedArray = nullptr;
  if (d.resourceType == CU_RESOURCE_TYPE_ARRAY || mipmapped) {
    auto it = arrays_.find(d.handle);
    if (it == arrays_.end() || (mipmapped ? !it->second.mipmapped : !it->second.array)) {
      return Status::error(CUDA_ERROR_INVALID_HANDLE,
                           mipmapped ? "unknown mipmapped array" : "unknown array");
    }
    if (CUresult r = checkTextureArray(d, it->second.shape, &reason); r != CUDA_SUCCESS) {
      return Status::error(r, reason);
    }
    array = it->second.array;
    mipmappedArray = it->second.mipmapped;
  }
  if (d.surface) {
    CUsurfref ref = nullptr;
    if (Status s = driver_->call(driver_->moduleGetSurfRef, &ref, m->second, name.c_str());
        !s.ok()) {
      return s;
    }
    return driver_->call(driver_->surfRefSetArray, ref, array, 0u);
  }
  CUtexref ref = nullptr;
  if (Status s = driver_->call(driver_->moduleGetTexRef, &ref, m->second, name.c_str()); !s.ok()) {
    return s;
  }
  // The sampler first: the resource is then checked with the state it is used with.
  for (int i = 0; i < 3; ++i) {
    if (Status s = driver_->call(driver_->texRefSetAddressMode, ref, i,
                                 static_cast<CUaddress_mode>(d.addressMode[i]));
        !s.ok()) {
      return s;
    }
  }
  if (Status s = driver_->call(driver_->texRefSetFilterMode, ref,
                               static_cast<CUfilter_mode>(d.filterMode));
      !s.ok()) {
    return s;
  }
  float border[4] = {d.borderColor[0], d.borderColor[1], d.borderColor[2], d.borderColor[3]};
  if (Status s = driver_->call(driver_->texRefSetBorderColor, ref, border); !s.ok()) return s;
  if (Status s = driver_->call(driver_->texRefSetFlags, ref, d.flags); !s.ok()) return s;
  // Only the sampler changed: the resource stays as the driver holds it, not set again (its
  // memory may have been freed since, which the driver's cuTexRefSet* of the sampler do not mind).
  std::map<std::string, TextureDescription>& bindings = boundReferences_[module];
  const auto was = bindings.find(name);
  const bool sameResource = was != bindings.end() && sameTextureResource(was->second, d);
  if (mipmapped) {
    // The levels' sampler, then the resource.
    if (Status s = driver_->call(driver_->texRefSetMipmapFilterMode, ref,
                                 static_cast<CUfilter_mode>(d.mipmapFilterMode));
        !s.ok()) {
      return s;
    }
    if (Status s = driver_->call(driver_->texRefSetMipmapLevelBias, ref, d.mipmapLevelBias);
        !s.ok()) {
      return s;
    }
    if (Status s = driver_->call(driver_->texRefSetMipmapLevelClamp, ref, d.minMipmapLevelClamp,
                                 d.maxMipmapLevelClamp);
        !s.ok()) {
      return s;
    }
    if (Status s = driver_->call(driver_->texRefSetMaxAnisotropy, ref, d.maxAnisotropy); !s.ok()) {
      return s;
    }
  }
  if (sameResource) {
    bindings[name] = d;
    return Status::success();
  }
  const uint64_t element = uint64_t{arrayChannelBytes(d.format)} * d.channels;
  Status set = Status::success();
  switch (d.resourceType) {
    case CU_RESOURCE_TYPE_ARRAY:
      set = driver_->call(driver_->texRefSetArray, ref, array, unsigned{CU_TRSA_OVERRIDE_FORMAT});
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      set = driver_->call(driver_->texRefSetMipmappedArray, ref, mipmappedArray,
                          unsigned{CU_TRSA_OVERRIDE_FORMAT});
      break;
    case CU_RESOURCE_TYPE_LINEAR: {
      if (Status s = checkPitchedRange("texture memory", d.handle, d.sizeBytes, d.sizeBytes, 1);
          !s.ok()) {
        return s;
      }
      if (Status s =
              driver_->call(driver_->texRefSetFormat, ref, static_cast<CUarray_format>(d.format),
                            static_cast<int>(d.channels));
          !s.ok()) {
        return s;
      }
      size_t offset = 0;
      set = driver_->call(driver_->texRefSetAddress, &offset, ref, CUdeviceptr{d.handle},
                          size_t{d.sizeBytes});
      break;
    }
    default: {  // pitch2D
      if (Status s = checkPitchedRange("texture memory", d.handle, d.pitchBytes, d.width * element,
                                       d.height);
          !s.ok()) {
        return s;
      }
      CUDA_ARRAY_DESCRIPTOR desc{};
      desc.Width = d.width;
      desc.Height = d.height;
      desc.Format = static_cast<CUarray_format>(d.format);
      desc.NumChannels = d.channels;
      set = driver_->call(driver_->texRefSetAddress2D, ref, &desc, CUdeviceptr{d.handle},
                          size_t{d.pitchBytes});
      break;
    }
  }
  if (set.ok()) bindings[name] = d;
  return set;
}

void CudaContext::textureReleaseAll() {
  for (auto& [handle, surface] : textures_) {
    (void)(surface ? driver_->call(driver_->surfObjectDestroy, handle)
                   : driver_->call(driver_->texObjectDestroy, handle));
  }
  textures_.clear();
}

Status CudaContext::tensorMapEncode(const TensorMapRequest& r, uint8_t* map) {
  // As every call on the context: a session's calls come from any of the server's threads, and
  // the driver may judge the tensor's address by the calling thread's context.
  if (Status s = makeCurrent(); !s.ok()) return s;
  // The handler checked the lists' lengths (tensorMapShapeConsistent).
  const size_t rank = r.globalDims.size();
  // The driver writes a 64-byte-aligned CUtensorMap; the reply carries its bytes.
  CUtensorMap encoded{};
  auto type = static_cast<CUtensorMapDataType>(r.dataType);
  auto rank32 = static_cast<cuuint32_t>(rank);
  auto* address = reinterpret_cast<void*>(r.globalAddress);
  auto interleave = static_cast<CUtensorMapInterleave>(r.interleave);
  auto swizzle = static_cast<CUtensorMapSwizzle>(r.swizzle);
  auto l2 = static_cast<CUtensorMapL2promotion>(r.l2Promotion);
  auto oob = static_cast<CUtensorMapFloatOOBfill>(r.oobFill);
  Status st;
  switch (r.mode) {
    case TensorMapMode::kTiled:
      st = driver_->call(driver_->tensorMapEncodeTiled, &encoded, type, rank32, address,
                         r.globalDims.data(), r.globalStrides.data(), r.boxDims.data(),
                         r.elementStrides.data(), interleave, swizzle, l2, oob);
      break;
    case TensorMapMode::kIm2col:
      st = driver_->call(driver_->tensorMapEncodeIm2col, &encoded, type, rank32, address,
                         r.globalDims.data(), r.globalStrides.data(), r.pixelBoxLower.data(),
                         r.pixelBoxUpper.data(), r.channelsPerPixel, r.pixelsPerColumn,
                         r.elementStrides.data(), interleave, swizzle, l2, oob);
      break;
    case TensorMapMode::kIm2colWide:
      st = driver_->call(driver_->tensorMapEncodeIm2colWide, &encoded, type, rank32, address,
                         r.globalDims.data(), r.globalStrides.data(), r.pixelBoxLower[0],
                         r.pixelBoxUpper[0], r.channelsPerPixel, r.pixelsPerColumn,
                         r.elementStrides.data(), interleave,
                         static_cast<CUtensorMapIm2ColWideMode>(r.wideMode), swizzle, l2, oob);
      break;
  }
  if (st.ok()) std::memcpy(map, &encoded, kTensorMapBytes);
  return st;
}

Status CudaContext::tensorMapReplaceAddress(uint8_t* map, uint64_t address) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUtensorMap encoded;
  std::memcpy(&encoded, map, kTensorMapBytes);
  Status st =
      driver_->call(driver_->tensorMapReplaceAddress, &encoded, reinterpret_cast<void*>(address));
  if (st.ok()) std::memcpy(map, &encoded, kTensorMapBytes);
  return st;
}

}  // namespace gpupool::server
