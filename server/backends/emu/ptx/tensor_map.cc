// cuTensorMapEncodeTiled's rules as cuda.h states them, and the emu's 128-byte map (tensor_map.h).
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

}  // namespace

Status encodeTiledTensorMap(const TensorMapLayout& m, uint8_t* out) {
  if (m.dataType > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B)
    return invalidTensorMap("unknown tensorDataType");
  const unsigned elem = tensorMapElementBytes(m.dataType);
  if (elem == 0)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the packed 16U4/16U6 data types are sm_100 features the "
                         "emu does not offer");
  if (m.rank == 0 || m.rank > 5) return invalidTensorMap("tensorRank must be 1 to 5");
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
    if (m.boxDim[i] == 0 || m.boxDim[i] > 256)
      return invalidTensorMap("boxDim[" + std::to_string(i) + "] must be 1 to 256");
    if (m.elementStrides[i] == 0 || m.elementStrides[i] > 8)
      return invalidTensorMap("elementStrides[" + std::to_string(i) + "] must be 1 to 8");
  }
  const uint64_t strideUnit = m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  for (uint32_t i = 0; i + 1 < m.rank; ++i)
    if (m.globalStrides[i] % strideUnit || m.globalStrides[i] >= (uint64_t{1} << 40))
      return invalidTensorMap("globalStrides[" + std::to_string(i) + "] must be a multiple of " +
                              std::to_string(strideUnit) + " below 2^40");
  const uint64_t innerBytes = uint64_t{m.boxDim[0]} * elem;
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && innerBytes % 16)
    return invalidTensorMap("boxDim[0] * element size must be a multiple of 16 bytes");
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_32B && m.swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
    return invalidTensorMap("INTERLEAVE_32B needs SWIZZLE_32B");
  if (m.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && m.swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    const uint64_t span = m.swizzle == CU_TENSOR_MAP_SWIZZLE_32B   ? 32
                          : m.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                                                                   : 128;
    if (innerBytes > span)
      return invalidTensorMap("the box's inner dimension exceeds the swizzle span");
  }
  if (m.oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
      !isFloatTensorType(m.dataType))
    return invalidTensorMap("NaN out-of-bounds fill needs a floating-point tensorDataType");
  // Valid, but layouts the emu's copies do not produce: refused rather than copied wrongly.
  if (m.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: interleaved layouts are not implemented by the emu");
  if (m.swizzle >= CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B)
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "tensor map: the 128B atom swizzles are sm_100 features the emu does "
                         "not offer");
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
    out[44 + i] = static_cast<uint8_t>(m.boxDim[i] - 1);
    out[49 + i] = static_cast<uint8_t>(m.elementStrides[i]);
    if (i + 1 < m.rank) putField<uint64_t>(out, 56 + 8 * i, m.globalStrides[i]);
  }
  return Status::success();
}

bool decodeTensorMap(const uint8_t* in, TensorMapLayout* m) {
  if (getField<uint32_t>(in, 0) != kTensorMapMagic || in[10] != 0) return false;
  *m = TensorMapLayout{};
  m->rank = in[4];
  m->dataType = in[5];
  m->interleave = in[6];
  m->swizzle = in[7];
  m->l2Promotion = in[8];
  m->oobFill = in[9];
  m->globalAddress = getField<uint64_t>(in, 16);
  if (m->rank == 0 || m->rank > 5 || tensorMapElementBytes(m->dataType) == 0) return false;
  for (uint32_t i = 0; i < m->rank; ++i) {
    m->globalDim[i] = uint64_t{getField<uint32_t>(in, 24 + 4 * i)} + 1;
    m->boxDim[i] = uint32_t{in[44 + i]} + 1;
    m->elementStrides[i] = in[49 + i];
    if (i + 1 < m->rank) m->globalStrides[i] = getField<uint64_t>(in, 56 + 8 * i);
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
