// Texture and surface objects (cuTexObjectCreate, cuSurfObjectCreate) as they travel from client
// to server: the resource (an array's server handle, or device memory with its format and extent)
// and the sampler. Checked on both sides by checkTextureDescription, as the driver checks them; an
// array resource is checked further where the array is known (client object, server context).
// The limits are the H100/H200's (what the emu device reports as its attributes).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "common/cuda_array_layout.h"

namespace gpupool {

inline constexpr uint64_t kTextureAlignment = 512;      // CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT
inline constexpr uint64_t kTexturePitchAlignment = 32;  // ..._TEXTURE_PITCH_ALIGNMENT
inline constexpr uint64_t kTexture1DLinearMax = 1ull << 28;  // elements
inline constexpr uint64_t kTexture2DLinearMaxWidth = 131072, kTexture2DLinearMaxHeight = 65000,
                          kTexture2DLinearMaxPitch = 2097120;

struct TextureDescription {
  bool surface = false;
  unsigned resourceType = CU_RESOURCE_TYPE_ARRAY;  // CUresourcetype
  uint64_t handle = 0;  // array: the server's array handle; linear, pitch2D: the device address
  // Linear and pitch2D resources only (an array has its own):
  unsigned format = 0;  // CUarray_format
  unsigned channels = 0;
  uint64_t width = 0, height = 0, pitchBytes = 0, sizeBytes = 0;
  // The sampler (textures only):
  unsigned addressMode[3] = {};  // CUaddress_mode
  unsigned filterMode = 0;       // CUfilter_mode
  unsigned flags = 0;            // CU_TRSF_*
  float borderColor[4] = {};
  // Levels of detail (a mipmapped array's texture): how levels are chosen and blended.
  unsigned mipmapFilterMode = 0;  // CUfilter_mode
  float mipmapLevelBias = 0, minMipmapLevelClamp = 0, maxMipmapLevelClamp = 0;
  unsigned maxAnisotropy = 0;
};

// Whether a and b name the same resource (a texture reference set again with only its sampler
// changed).
inline bool sameTextureResource(const TextureDescription& a, const TextureDescription& b) {
  return a.surface == b.surface && a.resourceType == b.resourceType && a.handle == b.handle &&
         a.format == b.format && a.channels == b.channels && a.width == b.width &&
         a.height == b.height && a.pitchBytes == b.pitchBytes && a.sizeBytes == b.sizeBytes;
}

inline constexpr unsigned kKnownTextureFlags =
    CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
    CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP;

// Whether reads of `format` return floats under `flags`: float and half, and 8/16-bit integers
// unless CU_TRSF_READ_AS_INTEGER.
inline bool textureFormatReturnsFloat(unsigned format, unsigned flags) {
  switch (format) {
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_FLOAT:
      return true;
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
      return (flags & CU_TRSF_READ_AS_INTEGER) == 0;
    default:
      return false;
  }
}

// The sampler, and a linear or pitch2D resource (an array resource is checked with its shape by
// checkTextureArray). CUDA_SUCCESS or the driver's error with *reason; what the driver accepts
// but gpupool cannot serve is CUDA_ERROR_NOT_SUPPORTED.
inline CUresult checkTextureDescription(const TextureDescription& d, std::string* reason) {
  auto fail = [reason](CUresult r, const char* why) {
    *reason = why;
    return r;
  };
  // The driver ignores the address and filter modes of linear memory (fetched by index only).
  if (!d.surface && d.resourceType != CU_RESOURCE_TYPE_LINEAR) {
    for (unsigned m : d.addressMode) {
      if (m > CU_TR_ADDRESS_MODE_BORDER) {
        return fail(CUDA_ERROR_INVALID_VALUE, "invalid address mode");
      }
    }
    if (d.filterMode > CU_TR_FILTER_MODE_LINEAR) {
      return fail(CUDA_ERROR_INVALID_VALUE, "invalid filter mode");
    }
  }
  if (!d.surface && (d.flags & ~kKnownTextureFlags)) {
    return fail(CUDA_ERROR_INVALID_VALUE, "unknown texture flags");
  }
  switch (d.resourceType) {
    case CU_RESOURCE_TYPE_ARRAY:
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      if (d.surface) {
        return fail(CUDA_ERROR_INVALID_VALUE,
                    "a surface object needs an array resource (a mipmapped array's level)");
      }
      if (d.mipmapFilterMode > CU_TR_FILTER_MODE_LINEAR) {
        return fail(CUDA_ERROR_INVALID_VALUE, "invalid mipmap filter mode");
      }
      break;
    case CU_RESOURCE_TYPE_LINEAR:
    case CU_RESOURCE_TYPE_PITCH2D: {
      if (d.surface) {
        return fail(CUDA_ERROR_INVALID_VALUE, "a surface object needs an array resource");
      }
      if (!arrayFormatNamed(d.format)) return fail(CUDA_ERROR_INVALID_VALUE, "invalid format");
      if (d.channels != 1 && d.channels != 2 && d.channels != 4) {
        return fail(CUDA_ERROR_INVALID_VALUE, "a texture has 1, 2 or 4 channels");
      }
      if (arrayChannelBytes(d.format) == 0) {
        return fail(CUDA_ERROR_NOT_SUPPORTED,
                    "only the 8-, 16- and 32-bit integer, half and float formats are served");
      }
      if (d.handle == 0 || d.handle % kTextureAlignment != 0) {
        return fail(CUDA_ERROR_INVALID_VALUE,
                    "texture memory must be aligned to TEXTURE_ALIGNMENT (512 bytes)");
      }
      const uint64_t element = uint64_t{arrayChannelBytes(d.format)} * d.channels;
      if (d.resourceType == CU_RESOURCE_TYPE_LINEAR) {
        if (d.sizeBytes == 0 || d.sizeBytes / element > kTexture1DLinearMax) {
          return fail(CUDA_ERROR_INVALID_VALUE, "linear texture size out of range");
        }
      } else {
        if (d.width == 0 || d.height == 0 || d.width > kTexture2DLinearMaxWidth ||
            d.height > kTexture2DLinearMaxHeight) {
          return fail(CUDA_ERROR_INVALID_VALUE, "pitch2D texture extent out of range");
        }
        // A pitch smaller than a row is accepted, its rows overlapping (observed on driver
        // 580.159.04, H200); the memory must still hold (height - 1) * pitch + a row.
        if (d.pitchBytes == 0 || d.pitchBytes % kTexturePitchAlignment != 0 ||
            d.pitchBytes > kTexture2DLinearMaxPitch) {
          return fail(CUDA_ERROR_INVALID_VALUE,
                      "pitch2D pitch must be a nonzero multiple of TEXTURE_PITCH_ALIGNMENT (32 "
                      "bytes) within the limit");
        }
      }
      if (!d.surface && d.resourceType == CU_RESOURCE_TYPE_PITCH2D &&
          d.filterMode == CU_TR_FILTER_MODE_LINEAR &&
          !textureFormatReturnsFloat(d.format, d.flags)) {
        return fail(CUDA_ERROR_NOT_SUPPORTED,
                    "linear filtering of a texture that returns integers is not served");
      }
      return CUDA_SUCCESS;
    }
    default:
      return fail(CUDA_ERROR_INVALID_VALUE, "invalid resource type");
  }
  return CUDA_SUCCESS;
}

// An array resource, given the array's shape.
inline CUresult checkTextureArray(const TextureDescription& d, const ArrayShape& s,
                                  std::string* reason) {
  auto fail = [reason](CUresult r, const char* why) {
    *reason = why;
    return r;
  };
  // A surface object takes an array made without CUDA_ARRAY3D_SURFACE_LDST too: cuda.h does not
  // ask for the flag there, and NVIDIA accepts such an array (observed on driver 580.159.04, H200).
  // A surface reference needs it (cuSurfRefSetArray checks).
  if (!d.surface &&
      (d.filterMode == CU_TR_FILTER_MODE_LINEAR ||
       (d.resourceType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
        d.mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR)) &&
      !textureFormatReturnsFloat(s.format, d.flags)) {
    return fail(CUDA_ERROR_NOT_SUPPORTED,
                "linear filtering of a texture that returns integers is not served");
  }
  return CUDA_SUCCESS;
}

}  // namespace gpupool
