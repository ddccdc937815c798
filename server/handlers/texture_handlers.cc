// Texture and surface objects: created on the context's backend (answered with the handle kernels
// receive) and destroyed. Tensor maps: encoded by the context's backend, whose layout they have.
// Texture and surface references of a module: looked up, and bound to a resource and sampler
// described as for an object. The handle is the context's own, so one session never names another's
// object, and the backend resolves the resource (array or device memory) within the context.
#include <cstring>

#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// The reply's 128 bytes live in the session's scratch buffer, which outlives the request.
uint8_t* replyMap(RequestContext& request) {
  request.session.staging.resize(kTensorMapBytes);
  auto* map = reinterpret_cast<uint8_t*>(request.session.staging.data());
  std::memset(map, 0, kTensorMapBytes);
  request.replyBulk.push_back({map, kTensorMapBytes});
  return map;
}

template <typename List, typename T>
bool copyList(List from, std::vector<T>* to) {
  if (from.size() > kMaxTensorRank) return false;
  for (auto v : from) to->push_back(v);
  return true;
}

Status encodeTensorMap(RequestContext& request, BackendContext& context,
                       Request::TextureOp::Reader m) {
  TensorMapRequest t;
  if (m.getTensorMode() > static_cast<uint32_t>(TensorMapMode::kIm2colWide)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown tensor map mode");
  }
  t.mode = static_cast<TensorMapMode>(m.getTensorMode());
  t.dataType = m.getFormat();
  t.globalAddress = m.getHandle();
  if (!copyList(m.getGlobalDims(), &t.globalDims) ||
      !copyList(m.getGlobalStrides(), &t.globalStrides) || !copyList(m.getBoxDims(), &t.boxDims) ||
      !copyList(m.getElementStrides(), &t.elementStrides) ||
      !copyList(m.getPixelBoxLower(), &t.pixelBoxLower) ||
      !copyList(m.getPixelBoxUpper(), &t.pixelBoxUpper)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "a tensor map has at most 5 dimensions");
  }
  t.interleave = m.getInterleave();
  t.swizzle = m.getSwizzle();
  t.l2Promotion = m.getL2Promotion();
  t.oobFill = m.getOobFill();
  t.channelsPerPixel = m.getChannelsPerPixel();
  t.pixelsPerColumn = m.getPixelsPerColumn();
  t.wideMode = m.getWideMode();
  if (!tensorMapShapeConsistent(t)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "tensor map: tensorRank out of range, or lists of other lengths");
  }
  Status st = context.tensorMapEncode(t, replyMap(request));
  if (!st.ok()) request.replyBulk.clear();
  return st;
}

Status textureOp(RequestContext& request, Request::Reader r) {
  auto m = r.getTextureOp();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  switch (m.getOp()) {
    case Request::TextureOpKind::FIND_REFERENCE:
      return context->textureReferenceFind(m.getModule(), m.getName(), m.getSurface());
    case Request::TextureOpKind::CHECK_BOUND:
      return context->textureReferencesBound(m.getHandle());
    case Request::TextureOpKind::BIND_REFERENCE:
    case Request::TextureOpKind::CREATE: {
      TextureDescription d;
      d.surface = m.getSurface();
      d.resourceType = m.getResourceType();
      d.handle = m.getHandle();
      d.format = m.getFormat();
      d.channels = m.getChannels();
      d.width = m.getWidth();
      d.height = m.getHeight();
      d.pitchBytes = m.getPitchBytes();
      d.sizeBytes = m.getSizeBytes();
      auto modes = m.getAddressMode();
      for (unsigned i = 0; i < 3 && i < modes.size(); ++i) d.addressMode[i] = modes[i];
      d.filterMode = m.getFilterMode();
      d.flags = m.getFlags();
      auto border = m.getBorderColor();
      for (unsigned i = 0; i < 4 && i < border.size(); ++i) d.borderColor[i] = border[i];
      d.mipmapFilterMode = m.getMipmapFilterMode();
      d.mipmapLevelBias = m.getMipmapLevelBias();
      d.minMipmapLevelClamp = m.getMinMipmapLevelClamp();
      d.maxMipmapLevelClamp = m.getMaxMipmapLevelClamp();
      d.maxAnisotropy = m.getMaxAnisotropy();
      std::string reason;
      if (CUresult res = checkTextureDescription(d, &reason); res != CUDA_SUCCESS) {
        return Status::error(res, reason);
      }
      if (m.getOp() == Request::TextureOpKind::BIND_REFERENCE) {
        return context->textureReferenceBind(m.getModule(), m.getName(), d);
      }
      uint64_t handle = 0;
      if (Status st = context->textureCreate(d, &handle); !st.ok()) return st;
      request.reply.setHandle(handle);
      return Status::success();
    }
    case Request::TextureOpKind::DESTROY:
      return context->textureDestroy(m.getHandle(), m.getSurface());
    case Request::TextureOpKind::ENCODE_TENSOR_MAP:
      return encodeTensorMap(request, *context, m);
    case Request::TextureOpKind::REPLACE_TENSOR_MAP_ADDRESS: {
      if (request.bulkBytes() != kTensorMapBytes) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "a tensor map is 128 bytes");
      }
      uint8_t* map = replyMap(request);
      request.receiveBulk(map, kTensorMapBytes);
      Status st = context->tensorMapReplaceAddress(map, m.getHandle());
      if (!st.ok()) request.replyBulk.clear();
      return st;
    }
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown texture operation");
}

constexpr RequestHandlerRow kRows[] = {
    {Request::TEXTURE_OP, textureOp},
};

}  // namespace

std::span<const RequestHandlerRow> textureHandlers() { return kRows; }

}  // namespace gpupool::server
