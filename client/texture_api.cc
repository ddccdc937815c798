// Texture and surface objects: cuTexObjectCreate, cuSurfObjectCreate, their destruction and
// descriptor queries. The object lives on the server of the current context, which answers the
// handle kernels receive (docs/arrays.md, "Texture and surface objects"); the client keeps the
// descriptors, so the queries stay local. Descriptors are checked as the driver checks them
// (common/texture_descriptor.h); resource views are refused with the reason logged.
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "array_objects.h"
#include "client_log.h"
#include "common/texture_descriptor.h"
#include "driver_export.h"
#include "raw_enum.h"
#include "texture_request.h"

using namespace gpupool::client;
using gpupool::TextureDescription;

namespace {

struct TextureRecord {
  ContextObject* context = nullptr;
  bool surface = false;
  CUDA_RESOURCE_DESC resource{};
  CUDA_TEXTURE_DESC texture{};
};

// Handles are the servers' and only unique per context: records are keyed by both.
std::mutex textureRecordsMutex;
std::map<std::pair<uint64_t, ContextObject*>, TextureRecord> textureRecords;

// The record of `handle` of that kind: the current context's when it has one, else any.
bool findTextureRecord(uint64_t handle, bool surface, TextureRecord* out,
                       std::pair<uint64_t, ContextObject*>* key) {
  ContextObject* current = nullptr;
  (void)currentRemoteContext(&current);
  std::lock_guard lock(textureRecordsMutex);
  auto it = textureRecords.find({handle, current});
  if (it == textureRecords.end()) {
    it = textureRecords.lower_bound({handle, nullptr});
    if (it == textureRecords.end() || it->first.first != handle) return false;
  }
  if (it->second.surface != surface) return false;
  *out = it->second;
  *key = it->first;
  return true;
}

CUresult createTextureObject(const char* what, bool surface, const CUDA_RESOURCE_DESC* res,
                             const CUDA_TEXTURE_DESC* tex, uint64_t* out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!out || !res || (!surface && !tex)) return CUDA_ERROR_INVALID_VALUE;
  if (res->flags != 0) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(what) + ": resource descriptor flags must be 0");
  }
  TextureDescription d;
  d.surface = surface;
  d.resourceType = static_cast<unsigned>(rawEnumValue(res->resType));
  const ArrayObject* array = nullptr;
  switch (d.resourceType) {
    case CU_RESOURCE_TYPE_ARRAY:
      array = asArray(res->res.array.hArray);
      if (!array) return CUDA_ERROR_INVALID_HANDLE;
      d.handle = array->remote;
      break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      array = asMipmappedArray(res->res.mipmap.hMipmappedArray);
      if (!array) return CUDA_ERROR_INVALID_HANDLE;
      d.handle = array->remote;
      break;
    case CU_RESOURCE_TYPE_LINEAR:
      d.handle = res->res.linear.devPtr;
      d.format = static_cast<unsigned>(rawEnumValue(res->res.linear.format));
      d.channels = res->res.linear.numChannels;
      d.sizeBytes = res->res.linear.sizeInBytes;
      break;
    case CU_RESOURCE_TYPE_PITCH2D:
      d.handle = res->res.pitch2D.devPtr;
      d.format = static_cast<unsigned>(rawEnumValue(res->res.pitch2D.format));
      d.channels = res->res.pitch2D.numChannels;
      d.width = res->res.pitch2D.width;
      d.height = res->res.pitch2D.height;
      d.pitchBytes = res->res.pitch2D.pitchInBytes;
      break;
    default:
      break;  // invalid: checkTextureDescription says so
  }
  if (tex) {
    for (int i = 0; i < 3; ++i)
      d.addressMode[i] = static_cast<unsigned>(rawEnumValue(tex->addressMode[i]));
    d.filterMode = static_cast<unsigned>(rawEnumValue(tex->filterMode));
    d.flags = tex->flags;
    for (int i = 0; i < 4; ++i) d.borderColor[i] = tex->borderColor[i];
    d.mipmapFilterMode = static_cast<unsigned>(rawEnumValue(tex->mipmapFilterMode));
    d.mipmapLevelBias = tex->mipmapLevelBias;
    d.minMipmapLevelClamp = tex->minMipmapLevelClamp;
    d.maxMipmapLevelClamp = tex->maxMipmapLevelClamp;
    d.maxAnisotropy = tex->maxAnisotropy;
  }
  std::string reason;
  CUresult check = checkTextureDescription(d, &reason);
  if (check == CUDA_SUCCESS && array) check = checkTextureArray(d, array->shape, &reason);
  if (check != CUDA_SUCCESS) return refuseCall(check, std::string(what) + ": " + reason);
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  if (array && array->context != ctx) {
    return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                      std::string(what) + ": the array belongs to another context");
  }
  uint64_t handle = 0;
  CUresult r = ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initTextureOp();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::TextureOpKind::CREATE);
        setTextureDescription(m, d);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        handle = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  TextureRecord record;
  record.context = ctx;
  record.surface = surface;
  record.resource = *res;
  if (tex) record.texture = *tex;
  {
    std::lock_guard lock(textureRecordsMutex);
    textureRecords[{handle, ctx}] = record;
  }
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult destroyTextureObject(const char* what, bool surface, uint64_t handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureRecord record;
  std::pair<uint64_t, ContextObject*> key;
  if (!findTextureRecord(handle, surface, &record, &key)) return CUDA_ERROR_INVALID_HANDLE;
  ContextObject* ctx = record.context;
  CUresult r = ctx->server->call(what, [&](wire::Request::Builder b) {
    auto m = b.initTextureOp();
    m.setContext(ctx->remote);
    m.setOp(wire::Request::TextureOpKind::DESTROY);
    m.setSurface(surface);
    m.setHandle(handle);
  });
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(textureRecordsMutex);
  textureRecords.erase(key);
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuTexObjectCreate(CUtexObject* texObject,
                                              const CUDA_RESOURCE_DESC* resDesc,
                                              const CUDA_TEXTURE_DESC* texDesc,
                                              const CUDA_RESOURCE_VIEW_DESC* viewDesc) {
  if (viewDesc) {
    if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuTexObjectCreate: resource views (reinterpreting an array's format or "
                      "extent) are not served; create the texture without a view");
  }
  uint64_t handle = 0;
  CUresult r = createTextureObject("cuTexObjectCreate", false, resDesc, texDesc, &handle);
  if (r == CUDA_SUCCESS) *texObject = handle;
  return r;
}

GPUPOOL_DRIVER_API CUresult cuTexObjectDestroy(CUtexObject texObject) {
  return destroyTextureObject("cuTexObjectDestroy", false, texObject);
}

GPUPOOL_DRIVER_API CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* resDesc,
                                                       CUtexObject texObject) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureRecord record;
  std::pair<uint64_t, ContextObject*> key;
  if (!findTextureRecord(texObject, false, &record, &key)) return CUDA_ERROR_INVALID_HANDLE;
  if (!resDesc) return CUDA_ERROR_INVALID_VALUE;
  *resDesc = record.resource;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* texDesc,
                                                      CUtexObject texObject) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureRecord record;
  std::pair<uint64_t, ContextObject*> key;
  if (!findTextureRecord(texObject, false, &record, &key)) return CUDA_ERROR_INVALID_HANDLE;
  if (!texDesc) return CUDA_ERROR_INVALID_VALUE;
  *texDesc = record.texture;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* viewDesc,
                                                           CUtexObject texObject) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureRecord record;
  std::pair<uint64_t, ContextObject*> key;
  if (!findTextureRecord(texObject, false, &record, &key)) return CUDA_ERROR_INVALID_HANDLE;
  if (!viewDesc) return CUDA_ERROR_INVALID_VALUE;
  // Every texture served was created without a view; NVIDIA answers success for one (observed on
  // driver 580.159.04, H200; what it fills in was not observed). Answered as no view: zeroes, the
  // format CU_RES_VIEW_FORMAT_NONE (the resource's own).
  *viewDesc = {};
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuSurfObjectCreate(CUsurfObject* surfObject,
                                               const CUDA_RESOURCE_DESC* resDesc) {
  uint64_t handle = 0;
  CUresult r = createTextureObject("cuSurfObjectCreate", true, resDesc, nullptr, &handle);
  if (r == CUDA_SUCCESS) *surfObject = handle;
  return r;
}

GPUPOOL_DRIVER_API CUresult cuSurfObjectDestroy(CUsurfObject surfObject) {
  return destroyTextureObject("cuSurfObjectDestroy", true, surfObject);
}

GPUPOOL_DRIVER_API CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* resDesc,
                                                        CUsurfObject surfObject) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureRecord record;
  std::pair<uint64_t, ContextObject*> key;
  if (!findTextureRecord(surfObject, true, &record, &key)) return CUDA_ERROR_INVALID_HANDLE;
  if (!resDesc) return CUDA_ERROR_INVALID_VALUE;
  *resDesc = record.resource;
  return CUDA_SUCCESS;
}
