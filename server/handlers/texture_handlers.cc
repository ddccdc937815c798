// Texture and surface objects: created on the context's backend (answered with the handle kernels
// receive) and destroyed. Texture and surface references of a module: looked up, and bound to a
// resource and sampler described as for an object. The handle is the context's own, so one session
// never names another's object, and the backend resolves the resource (array or device memory)
// within the context.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

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
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown texture operation");
}

constexpr RequestHandlerRow kRows[] = {
    {Request::TEXTURE_OP, textureOp},
};

}  // namespace

std::span<const RequestHandlerRow> textureHandlers() { return kRows; }

}  // namespace gpupool::server
