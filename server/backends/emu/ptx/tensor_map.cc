// cuTensorMapEncodeTiled's and cuTensorMapEncodeIm2col's rules as cuda.h states them, and the
// emu's 128-byte map (tensor_map.h).
#include "tensor_map.h"

#include <cuda.h>

#include <cstring>
#include <string>

namespace gpupool::ptx {

unsigned tensorMapElementBytes(uint32_t dataType) {
  switch (dataType) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
      return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

namespace {

bool isFloatTensorType(uint32_t t) {
  return t == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
         t == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 || t == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
         t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
         t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

Status invalidTensorMap(const std::string& why) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, "tensor map: " + why);
}

Status checkTensorMapAddress(uint64_t address, uint32_t interleave) {
  if (address % 16) return invalidTensorMap("globalAddress must be 16-byte aligned");
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && address % 32)
    return invalidTensorMap("globalAddress must be 32-byte aligned with INTERLEAVE_32B");
  return Status::success();
}

template <class T>
void putField(uint8_t* out, unsigned at, T v) {
  std::memcpy(out + at, &v, sizeof(T));
}
template <class T>
T getField(const uint8_t* in, unsigned at) {
  T v;
  std::memcpy(&v, in + at, sizeof(T));
  return v;
}

// The rules both encoders share: the data type, the tensor in global memory, and the layout enums.
Status checkCommonArguments(const TensorMapLayout& m, uint32_t minRank) {
  if (m.dataType > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
    return invalidTensorMap("unknown tensorDataType");
  if (tensorMapElementBytes(m.dataType) == 0)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the packed 16U4/16U6 data types are sm_100 features the "
                         "emu does not offer");
  if (m.rank < minRank || m.rank > 5)
    return invalidTensorMap("tensorRank must be " + std::to_string(minRank) + " to 5");
  if (m.interleave > CU_TENSOR_MAP_INTERLEAVE_32B) return invalidTensorMap("unknown interleave");
  if (m.swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) return invalidTensorMap("unknown swizzle");
  if (m.l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    return invalidTensorMap("unknown l2Promotion");
  if (m.oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return invalidTensorMap("unknown oobFill");
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && m.rank < 3)
    return invalidTensorMap("an interleaved layout needs tensorRank >= 3");
  if (Status s = checkTensorMapAddress(m.globalAddress, m.interleave); !s.ok()) return s;
  for (uint32_t i = 0; i < m.rank; ++i) {
    if (m.globalDim[i] == 0 || m.globalDim[i] > (uint64_t{1} << 32))
      return invalidTensorMap("globalDim[" + std::to_string(i) + "] must be 1 to 2^32");
    if (m.elementStrides[i] == 0 || m.elementStrides[i] > 8)
      return invalidTensorMap("elementStrides[" + std::to_string(i) + "] must be 1 to 8");
  }
  const uint64_t strideUnit = m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  for (uint32_t i = 0; i + 1 < m.rank; ++i)
    if (m.globalStrides[i] % strideUnit || m.globalStrides[i] >= (uint64_t{1} << 40))
      return invalidTensorMap("globalStrides[" + std::to_string(i) + "] must be a multiple of " +
                              std::to_string(strideUnit) + " below 2^40");
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B && m.swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    return invalidTensorMap("INTERLEAVE_32B needs SWIZZLE_32B");
  if (m.oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
      !isFloatTensorType(m.dataType))
    return invalidTensorMap("NaN out-of-bounds fill needs a floating-point tensorDataType");
  return Status::success();
}

// The swizzle span rule: the box's inner dimension (`innerBytes`) fits the swizzle's span.
Status checkSwizzleSpan(const TensorMapLayout& m, uint64_t innerBytes, const char* inner) {
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE || m.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE)
    return Status::success();
  const uint64_t span = m.swizzle == CU_TENSOR_MAP_SWIZZLE_32B   ? 32
                        : m.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                                                                 : 128;
  if (innerBytes > span)
    return invalidTensorMap(std::string(inner) + " * element size exceeds the swizzle span");
  return Status::success();
}

// Valid, but layouts the emu's copies do not produce: refused rather than copied wrongly.
Status checkEmuLayout(const TensorMapLayout& m) {
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: interleaved layouts are not implemented by the emu");
  if (m.swizzle >= CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the 128B atom swizzles are sm_100 features the emu does "
                         "not offer");
  return Status::success();
}

// The fields both modes store (tensor_map.h's layout).
void putCommonFields(const TensorMapLayout& m, uint8_t* out) {
  std::memset(out, 0, kTensorMapBytes);
  putField<uint32_t>(out, 0, kTensorMapMagic);
  out[4] = static_cast<uint8_t>(m.rank);
  out[5] = static_cast<uint8_t>(m.dataType);
  out[6] = static_cast<uint8_t>(m.interleave);
  out[7] = static_cast<uint8_t>(m.swizzle);
  out[8] = static_cast<uint8_t>(m.l2Promotion);
  out[9] = static_cast<uint8_t>(m.oobFill);
  putField<uint64_t>(out, 16, m.globalAddress);
  for (uint32_t i = 0; i < m.rank; ++i) {
    putField<uint32_t>(out, 24 + 4 * i, static_cast<uint32_t>(m.globalDim[i] - 1));
    out[49 + i] = static_cast<uint8_t>(m.elementStrides[i]);
    if (i + 1 < m.rank) putField<uint64_t>(out, 56 + 8 * i, m.globalStrides[i]);
  }
}

}  // namespace

Status encodeTiledTensorMap(const TensorMapLayout& m, uint8_t* out) {
  if (Status s = checkCommonArguments(m, 1); !s.ok()) return s;
  for (uint32_t i = 0; i < m.rank; ++i)
    if (m.boxDim[i] == 0 || m.boxDim[i] > 256)
      return invalidTensorMap("boxDim[" + std::to_string(i) + "] must be 1 to 256");
  const uint64_t innerBytes = uint64_t{m.boxDim[0]} * tensorMapElementBytes(m.dataType);
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && innerBytes % 16)
    return invalidTensorMap("boxDim[0] * element size must be a multiple of 16 bytes");
  if (Status s = checkSwizzleSpan(m, innerBytes, "boxDim[0]"); !s.ok()) return s;
  if (Status s = checkEmuLayout(m); !s.ok()) return s;
  putCommonFields(m, out);
  out[10] = kTensorMapTiled;
  for (uint32_t i = 0; i < m.rank; ++i) out[44 + i] = static_cast<uint8_t>(m.boxDim[i] - 1);
  return Status::success();
}

Status encodeIm2colTensorMap(const TensorMapLayout& m, uint8_t* out) {
  if (Status s = checkCommonArguments(m, 3); !s.ok()) return s;
  // The corners' range narrows with the rank: 16, 8 and 5 signed bits (cuda.h).
  const int32_t cornerLimit = m.rank == 3 ? 32768 : m.rank == 4 ? 128 : 16;
  const uint32_t spatial = m.rank - 2;
  for (uint32_t i = 0; i < spatial; ++i) {
    for (int32_t corner : {m.pixelBoxLower[i], m.pixelBoxUpper[i]})
      if (corner < -cornerLimit || corner >= cornerLimit)
        return invalidTensorMap("a pixel box corner is outside [" + std::to_string(-cornerLimit) +
                                ", " + std::to_string(cornerLimit - 1) + "] for tensorRank " +
                                std::to_string(m.rank));
    if (static_cast<int64_t>(m.globalDim[i + 1]) + m.pixelBoxUpper[i] - m.pixelBoxLower[i] <= 0)
      return invalidTensorMap("the pixel bounding box has zero area along dimension " +
                              std::to_string(i + 1));
  }
  if (m.channelsPerPixel == 0 || m.channelsPerPixel > 256)
    return invalidTensorMap("channelsPerPixel must be 1 to 256");
  if (m.pixelsPerColumn == 0 || m.pixelsPerColumn > 1024)
    return invalidTensorMap("pixelsPerColumn must be 1 to 1024");
  const uint64_t innerBytes = uint64_t{m.channelsPerPixel} * tensorMapElementBytes(m.dataType);
  if (Status s = checkSwizzleSpan(m, innerBytes, "channelsPerPixel"); !s.ok()) return s;
  if (Status s = checkEmuLayout(m); !s.ok()) return s;
  // A pixel whose channels are not whole 16-byte chunks, and a traversal stride along N: cuda.h
  // does not say how the box lies in shared memory then, or how the walk steps through images
  // (CUTLASS strides only the spatial dimensions), so the emu refuses them rather than guess.
  if (innerBytes % 16)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the emu's im2col copies need channelsPerPixel * element "
                         "size to be a multiple of 16 bytes");
  if (m.elementStrides[m.rank - 1] != 1)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the emu's im2col copies take no traversal stride along N "
                         "(elementStrides[" +
                             std::to_string(m.rank - 1) + "] is " +
                             std::to_string(m.elementStrides[m.rank - 1]) + ")");
  putCommonFields(m, out);
  out[10] = kTensorMapIm2col;
  putField<uint16_t>(out, 88, static_cast<uint16_t>(m.channelsPerPixel));
  putField<uint16_t>(out, 90, static_cast<uint16_t>(m.pixelsPerColumn));
  for (uint32_t i = 0; i < spatial; ++i) {
    putField<int16_t>(out, 92 + 2 * i, static_cast<int16_t>(m.pixelBoxLower[i]));
    putField<int16_t>(out, 98 + 2 * i, static_cast<int16_t>(m.pixelBoxUpper[i]));
  }
  return Status::success();
}

bool decodeTensorMap(const uint8_t* in, TensorMapLayout* m) {
  if (getField<uint32_t>(in, 0) != kTensorMapMagic || in[10] > kTensorMapIm2col) return false;
  *m = TensorMapLayout{};
  m->rank = in[4];
  m->dataType = in[5];
  m->interleave = in[6];
  m->swizzle = in[7];
  m->l2Promotion = in[8];
  m->oobFill = in[9];
  m->mode = in[10];
  m->globalAddress = getField<uint64_t>(in, 16);
  const uint32_t minRank = m->mode == kTensorMapIm2col ? 3 : 1;
  if (m->rank < minRank || m->rank > 5 || tensorMapElementBytes(m->dataType) == 0) return false;
  for (uint32_t i = 0; i < m->rank; ++i) {
    m->globalDim[i] = uint64_t{getField<uint32_t>(in, 24 + 4 * i)} + 1;
    if (m->mode == kTensorMapTiled) m->boxDim[i] = uint32_t{in[44 + i]} + 1;
    m->elementStrides[i] = in[49 + i];
    if (i + 1 < m->rank) m->globalStrides[i] = getField<uint64_t>(in, 56 + 8 * i);
  }
  if (m->mode == kTensorMapIm2col) {
    m->channelsPerPixel = getField<uint16_t>(in, 88);
    m->pixelsPerColumn = getField<uint16_t>(in, 90);
    for (uint32_t i = 0; i + 2 < m->rank; ++i) {
      m->pixelBoxLower[i] = getField<int16_t>(in, 92 + 2 * i);
      m->pixelBoxUpper[i] = getField<int16_t>(in, 98 + 2 * i);
    }
  }
  return true;
}

Status replaceTensorMapAddress(uint8_t* map, uint64_t globalAddress) {
  TensorMapLayout m;
  if (!decodeTensorMap(map, &m)) return invalidTensorMap("not an encoded tensor map");
  if (Status s = checkTensorMapAddress(globalAddress, m.interleave); !s.ok()) return s;
  putField<uint64_t>(map, 16, globalAddress);
  return Status::success();
}

}  // namespace gpupool::ptx
