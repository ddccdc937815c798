// CUDA arrays as gpupool serves them: which descriptors are valid (the driver's rules for
// cuArray3DCreate and cuMipmappedArrayCreate), and the layout the emu stores them in.
//
// Layout (docs/arrays.md): an array is one block of device memory. Elements are
// format-bytes x channels, rows are `width` elements back to back (no padding), a slice is
// `height` rows (1 for a 1D array), and the array is `depth` slices: the z of a 3D array, the
// layer of a layered array, the face (+x, -x, +y, -y, +z, -z) of a cubemap, layer * 6 + face of
// a layered cubemap. A mipmapped array stores its levels one after the other, level 0 first, each
// laid out like a plain array of that level's extent. Shared by the client (validation,
// descriptors) and the server (validation, quota, the emu's storage).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpupool {

struct ArrayShape {
  uint64_t width = 0, height = 0, depth = 0;  // as CUDA_ARRAY3D_DESCRIPTOR: 0 for unused
  unsigned format = 0;                        // CUarray_format
  unsigned channels = 0;
  unsigned flags = 0;  // CUDA_ARRAY3D_*
};

// Device limits the descriptors are checked against (those of an H100/H200).
inline constexpr uint64_t kArrayMax1D = 131072, kArrayMax2DWidth = 131072,
                          kArrayMax2DHeight = 65536, kArrayMax3D = 16384, kArrayMaxLayered = 32768,
                          kArrayMaxLayers = 2048, kArrayMaxCubemap = 32768,
                          kArrayMaxCubemapLayers = 2046;
// What cuArrayGetMemoryRequirements reports as alignment: the texture alignment.
inline constexpr uint64_t kArrayAlignment = 512;

// Bytes of one channel of `format`; 0 when gpupool does not serve the format.
inline unsigned arrayChannelBytes(unsigned format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

// Whether cuda.h names `format` (so an unserved one is refused, not called invalid).
inline bool arrayFormatNamed(unsigned format) {
  return arrayChannelBytes(format) != 0 || format == CU_AD_FORMAT_NV12 ||
         format == CU_AD_FORMAT_UNORM_INT_101010_2 || (format >= 0x91 && format <= 0xb5) ||
         (format >= 0xc0 && format <= 0xcb);
}

inline uint64_t arrayElementBytes(const ArrayShape& s) {
  return uint64_t{arrayChannelBytes(s.format)} * s.channels;
}

// Slices that keep their count at every mip level: layers and faces.
inline bool arrayDepthIsLayers(const ArrayShape& s) {
  return (s.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
}

// The extent of mip level `level` (each dimension halved, at least 1; layers and faces kept).
inline ArrayShape arrayLevelShape(const ArrayShape& s, unsigned level) {
  ArrayShape l = s;
  auto shrink = [level](uint64_t v) { return v == 0 ? 0 : std::max<uint64_t>(1, v >> level); };
  l.width = shrink(s.width);
  l.height = shrink(s.height);
  if (!arrayDepthIsLayers(s)) l.depth = shrink(s.depth);
  return l;
}

inline uint64_t arrayRowBytes(const ArrayShape& s) { return arrayElementBytes(s) * s.width; }
inline uint64_t arrayRows(const ArrayShape& s) { return std::max<uint64_t>(1, s.height); }
inline uint64_t arraySlices(const ArrayShape& s) { return std::max<uint64_t>(1, s.depth); }
inline uint64_t arrayBytes(const ArrayShape& s) {
  return arrayRowBytes(s) * arrayRows(s) * arraySlices(s);
}

// Where level `level` starts in a mipmapped array's block, and the block's size for `levels`.
inline uint64_t arrayLevelOffset(const ArrayShape& s, unsigned level) {
  uint64_t offset = 0;
  for (unsigned l = 0; l < level; ++l) offset += arrayBytes(arrayLevelShape(s, l));
  return offset;
}
inline uint64_t arrayTotalBytes(const ArrayShape& s, unsigned levels) {
  return levels ? arrayLevelOffset(s, levels) : arrayBytes(s);
}

// Whether the region of widthBytes x height x depth at (xBytes, y, z) lies inside array `s`.
inline bool arrayRegionInside(const ArrayShape& s, uint64_t xBytes, uint64_t y, uint64_t z,
                              uint64_t widthBytes, uint64_t height, uint64_t depth) {
  uint64_t rowBytes = arrayRowBytes(s), rows = arrayRows(s), slices = arraySlices(s);
  return xBytes <= rowBytes && widthBytes <= rowBytes - xBytes && y <= rows && height <= rows - y &&
         z <= slices && depth <= slices - z;
}

// The most mip levels the extent allows: 1 + floor(log2(largest dimension)).
inline unsigned arrayMaxLevels(const ArrayShape& s) {
  uint64_t largest = std::max(s.width, s.height);
  if (!arrayDepthIsLayers(s)) largest = std::max(largest, s.depth);
  unsigned levels = 1;
  while (largest > 1) {
    largest >>= 1;
    ++levels;
  }
  return levels;
}

// CUDA_SUCCESS when the driver would create the array (levels: 0 for cuArray3DCreate, else
// cuMipmappedArrayCreate's numMipmapLevels, which the client has clamped to
// [1, arrayMaxLevels] as the driver does); otherwise the driver's error, with *reason.
// Valid requests gpupool cannot serve (sparse arrays, video and block-compressed formats) are
// CUDA_ERROR_NOT_SUPPORTED.
inline CUresult checkArrayShape(const ArrayShape& s, unsigned levels, bool mipmapped,
                                std::string* reason) {
  auto fail = [reason](CUresult r, const char* why) {
    *reason = why;
    return r;
  };
  constexpr unsigned kKnownFlags =
      CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
      CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE | CUDA_ARRAY3D_COLOR_ATTACHMENT |
      CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_VIDEO_ENCODE_DECODE;
  if (s.flags & ~kKnownFlags) return fail(CUDA_ERROR_INVALID_VALUE, "unknown array flags");
  if (!arrayFormatNamed(s.format)) return fail(CUDA_ERROR_INVALID_VALUE, "invalid array format");
  if (s.channels != 1 && s.channels != 2 && s.channels != 4) {
    return fail(CUDA_ERROR_INVALID_VALUE, "an array has 1, 2 or 4 channels");
  }
  if (s.flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) {
    return fail(CUDA_ERROR_NOT_SUPPORTED, "sparse and deferred-mapping arrays are not served");
  }
  if (s.flags & (CUDA_ARRAY3D_VIDEO_ENCODE_DECODE | CUDA_ARRAY3D_COLOR_ATTACHMENT)) {
    return fail(CUDA_ERROR_NOT_SUPPORTED, "video and graphics-interop arrays are not served");
  }
  if (arrayChannelBytes(s.format) == 0) {
    return fail(CUDA_ERROR_NOT_SUPPORTED,
                "only the 8-, 16- and 32-bit integer, half and float array formats are served");
  }
  bool layered = s.flags & CUDA_ARRAY3D_LAYERED, cubemap = s.flags & CUDA_ARRAY3D_CUBEMAP;
  if (s.width == 0) return fail(CUDA_ERROR_INVALID_VALUE, "array width is 0");
  if (cubemap) {
    if (s.width != s.height) return fail(CUDA_ERROR_INVALID_VALUE, "a cubemap's faces are square");
    if (s.width > kArrayMaxCubemap) return fail(CUDA_ERROR_INVALID_VALUE, "cubemap too large");
    if (!layered && s.depth != 6) return fail(CUDA_ERROR_INVALID_VALUE, "a cubemap has 6 faces");
    if (layered && (s.depth == 0 || s.depth % 6 != 0 || s.depth > kArrayMaxCubemapLayers)) {
      return fail(CUDA_ERROR_INVALID_VALUE, "a layered cubemap has 6 faces per layer");
    }
  } else if (layered) {
    if (s.depth == 0 || s.depth > kArrayMaxLayers) {
      return fail(CUDA_ERROR_INVALID_VALUE, "invalid layer count");
    }
    if (s.width > kArrayMaxLayered || s.height > kArrayMaxLayered) {
      return fail(CUDA_ERROR_INVALID_VALUE, "layered array too large");
    }
  } else if (s.depth != 0) {
    if (s.height == 0) return fail(CUDA_ERROR_INVALID_VALUE, "a 3D array needs a height");
    if (s.width > kArrayMax3D || s.height > kArrayMax3D || s.depth > kArrayMax3D) {
      return fail(CUDA_ERROR_INVALID_VALUE, "3D array too large");
    }
  } else if (s.height != 0) {
    if (s.width > kArrayMax2DWidth || s.height > kArrayMax2DHeight) {
      return fail(CUDA_ERROR_INVALID_VALUE, "2D array too large");
    }
  } else if (s.width > kArrayMax1D) {
    return fail(CUDA_ERROR_INVALID_VALUE, "1D array too large");
  }
  if (mipmapped && (levels == 0 || levels > arrayMaxLevels(s))) {
    return fail(CUDA_ERROR_INVALID_VALUE, "invalid mipmap level count for the extent");
  }
  return CUDA_SUCCESS;
}

}  // namespace gpupool
