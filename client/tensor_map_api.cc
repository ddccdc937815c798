// Tensor maps (cuTensorMapEncode*, cuTensorMapReplaceAddress). A CUtensorMap is opaque and its
// layout is the encoder's, so the server of the current context encodes it: the cuda backend with
// the real driver, whose kernels read it; the emu in its own layout, which its cp.async.bulk.tensor
// reads (im2col wide maps, sm_100's, are refused there). The argument checks are the server's, as
// cuda.h documents them; a NULL pointer or a rank out of range is refused here.
#include <cstring>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"

using namespace gpupool::client;

namespace {

constexpr uint32_t kMaxRank = 5;
constexpr size_t kMapBytes = sizeof(CUtensorMap);

struct Encoding {
  uint32_t mode = 0;  // 0 tiled, 1 im2col, 2 im2col wide (TextureOp.tensorMode)
  int dataType = 0;
  uint32_t rank = 0;
  const void* address = nullptr;
  const cuuint64_t* dims = nullptr;
  const cuuint64_t* strides = nullptr;
  const cuuint32_t* box = nullptr;  // tiled
  const cuuint32_t* elementStrides = nullptr;
  int interleave = 0, swizzle = 0, l2Promotion = 0, oobFill = 0;
  const int* lower = nullptr;  // im2col: rank - 2 corners; wide: one width each
  const int* upper = nullptr;
  uint32_t corners = 0;
  uint32_t channelsPerPixel = 0, pixelsPerColumn = 0;
  int wideMode = 0;
};

// The map the server sent back as the reply's bulk: exactly 128 bytes.
CUresult readMap(const char* what, ReplyBulk& bulk, CUtensorMap* map) {
  if (bulk.remaining() != kMapBytes || !bulk.read(map, kMapBytes)) {
    return refuseCall(CUDA_ERROR_UNKNOWN, std::string(what) + ": the server sent no map");
  }
  return CUDA_SUCCESS;
}

// What every encoding names: the tensor in global memory and how it is read.
Encoding describe(uint32_t mode, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
                  const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                  const cuuint32_t* elementStrides, const CUtensorMapInterleave& interleave,
                  const CUtensorMapSwizzle& swizzle, const CUtensorMapL2promotion& l2Promotion,
                  const CUtensorMapFloatOOBfill& oobFill) {
  Encoding e;
  e.mode = mode;
  e.dataType = rawEnumValue(dataType);
  e.rank = rank;
  e.address = address;
  e.dims = globalDim;
  e.strides = globalStrides;
  e.elementStrides = elementStrides;
  e.interleave = rawEnumValue(interleave);
  e.swizzle = rawEnumValue(swizzle);
  e.l2Promotion = rawEnumValue(l2Promotion);
  e.oobFill = rawEnumValue(oobFill);
  return e;
}

// The server of the current context answers; the map's bytes come back in the reply.
CUresult encode(const char* what, CUtensorMap* map, const Encoding& e) {
  if (!map || !e.dims || (e.rank > 1 && !e.strides) || !e.elementStrides ||
      (e.mode == 0 && !e.box) || (e.corners && (!e.lower || !e.upper))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (e.rank == 0 || e.rank > kMaxRank || (e.mode != 0 && e.rank < 3)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(what) + ": tensorRank " + std::to_string(e.rank) +
                          " is out of range (tiled 1 to 5, im2col 3 to 5)");
  }
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  CUtensorMap encoded;
  CUresult r = ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initTextureOp();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::TextureOpKind::ENCODE_TENSOR_MAP);
        m.setTensorMode(e.mode);
        m.setFormat(static_cast<uint32_t>(e.dataType));
        m.setHandle(reinterpret_cast<uint64_t>(e.address));
        auto dims = m.initGlobalDims(e.rank);
        auto elementStrides = m.initElementStrides(e.rank);
        for (uint32_t i = 0; i < e.rank; ++i) {
          dims.set(i, e.dims[i]);
          elementStrides.set(i, e.elementStrides[i]);
        }
        auto strides = m.initGlobalStrides(e.rank - 1);
        for (uint32_t i = 0; i + 1 < e.rank; ++i) strides.set(i, e.strides[i]);
        if (e.box) {
          auto box = m.initBoxDims(e.rank);
          for (uint32_t i = 0; i < e.rank; ++i) box.set(i, e.box[i]);
        }
        auto lower = m.initPixelBoxLower(e.corners);
        auto upper = m.initPixelBoxUpper(e.corners);
        for (uint32_t i = 0; i < e.corners; ++i) {
          lower.set(i, e.lower[i]);
          upper.set(i, e.upper[i]);
        }
        m.setInterleave(static_cast<uint32_t>(e.interleave));
        m.setSwizzle(static_cast<uint32_t>(e.swizzle));
        m.setL2Promotion(static_cast<uint32_t>(e.l2Promotion));
        m.setOobFill(static_cast<uint32_t>(e.oobFill));
        m.setChannelsPerPixel(e.channelsPerPixel);
        m.setPixelsPerColumn(e.pixelsPerColumn);
        m.setWideMode(static_cast<uint32_t>(e.wideMode));
      },
      {}, [&](wire::Response::Reader, ReplyBulk& bulk) { return readMap(what, bulk, &encoded); });
  if (r == CUDA_SUCCESS) std::memcpy(map, &encoded, kMapBytes);
  return r;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuTensorMapEncodeTiled(
    CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
    const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const cuuint32_t* boxDim,
    const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  Encoding e = describe(0, dataType, rank, address, globalDim, globalStrides, elementStrides,
                        interleave, swizzle, l2Promotion, oobFill);
  e.box = boxDim;
  return encode("cuTensorMapEncodeTiled", map, e);
}

GPUPOOL_DRIVER_API CUresult cuTensorMapEncodeIm2col(
    CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
    const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const int* pixelBoxLowerCorner,
    const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
    const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  Encoding e = describe(1, dataType, rank, address, globalDim, globalStrides, elementStrides,
                        interleave, swizzle, l2Promotion, oobFill);
  e.lower = pixelBoxLowerCorner;
  e.upper = pixelBoxUpperCorner;
  e.corners = rank >= 3 && rank <= kMaxRank ? rank - 2 : 0;
  e.channelsPerPixel = channelsPerPixel;
  e.pixelsPerColumn = pixelsPerColumn;
  return encode("cuTensorMapEncodeIm2col", map, e);
}

GPUPOOL_DRIVER_API CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap* map, CUtensorMapDataType dataType, cuuint32_t rank, void* address,
    const cuuint64_t* globalDim, const cuuint64_t* globalStrides, int pixelBoxLowerCornerWidth,
    int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
    const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  Encoding e = describe(2, dataType, rank, address, globalDim, globalStrides, elementStrides,
                        interleave, swizzle, l2Promotion, oobFill);
  e.lower = &pixelBoxLowerCornerWidth;
  e.upper = &pixelBoxUpperCornerWidth;
  e.corners = 1;
  e.channelsPerPixel = channelsPerPixel;
  e.pixelsPerColumn = pixelsPerColumn;
  e.wideMode = rawEnumValue(mode);
  return encode("cuTensorMapEncodeIm2colWide", map, e);
}

GPUPOOL_DRIVER_API CUresult cuTensorMapReplaceAddress(CUtensorMap* map, void* address) {
  if (!map) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  CUtensorMap replaced;
  const gpupool::transport::ConstBuffer bulk[] = {{map, kMapBytes}};
  CUresult r = ctx->server->call(
      "cuTensorMapReplaceAddress",
      [&](wire::Request::Builder b) {
        auto m = b.initTextureOp();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::TextureOpKind::REPLACE_TENSOR_MAP_ADDRESS);
        m.setHandle(reinterpret_cast<uint64_t>(address));
      },
      bulk,
      [&](wire::Response::Reader, ReplyBulk& reply) {
        return readMap("cuTensorMapReplaceAddress", reply, &replaced);
      });
  if (r == CUDA_SUCCESS) std::memcpy(map, &replaced, kMapBytes);
  return r;
}
