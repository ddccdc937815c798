// CUDA arrays: cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate and their descriptors,
// levels and destruction. The array lives on the server of the current context (its layout there:
// docs/arrays.md); the client keeps its descriptor, so descriptor queries stay local. Sparse,
// deferred-mapping and multi-planar arrays are refused, with the reason logged.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

#include "array_objects.h"
#include "client_log.h"
#include "driver_export.h"
#include "raw_enum.h"

using namespace gpupool::client;
using gpupool::ArrayShape;

namespace gpupool::client {

ArrayObject* asArray(CUarray h) {
  if (!h || !isRegistered(h)) return nullptr;
  auto* a = reinterpret_cast<ArrayObject*>(h);
  return a->tag == Tag::kArray ? a : nullptr;
}

ArrayObject* asMipmappedArray(CUmipmappedArray h) {
  if (!h || !isRegistered(h)) return nullptr;
  auto* a = reinterpret_cast<ArrayObject*>(h);
  return a->tag == Tag::kMipmappedArray ? a : nullptr;
}

}  // namespace gpupool::client

namespace {

std::mutex arrayLevelsMutex;  // guards levelObjects of every mipmapped array

CUresult createArray(const char* what, const ArrayShape& shape, unsigned levels, bool mipmapped,
                     ArrayObject** out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::string reason;
  if (CUresult r = checkArrayShape(shape, levels, mipmapped, &reason); r != CUDA_SUCCESS) {
    return refuseCall(r, std::string(what) + ": " + reason);
  }
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  auto array = std::make_unique<ArrayObject>();
  array->tag = mipmapped ? Tag::kMipmappedArray : Tag::kArray;
  array->context = ctx;
  array->shape = shape;
  array->levels = levels;
  array->levelObjects.assign(levels, nullptr);
  CUresult r = ctx->server->call(
      what,
      [&](wire::Request::Builder b) {
        auto m = b.initArrayOp();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::ArrayOpKind::CREATE);
        m.setWidth(shape.width);
        m.setHeight(shape.height);
        m.setDepth(shape.depth);
        m.setFormat(shape.format);
        m.setChannels(shape.channels);
        m.setFlags(shape.flags);
        m.setLevels(levels);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        array->remote = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  registerObject(array.get());
  *out = array.release();
  return CUDA_SUCCESS;
}

CUresult destroyArray(const char* what, ArrayObject* array) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!array) return CUDA_ERROR_INVALID_HANDLE;
  if (array->parent) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(what) + ": a mipmap level goes with its mipmapped array");
  }
  ContextObject* ctx = array->context;
  CUresult r = ctx->server->call(what, [&](wire::Request::Builder b) {
    auto m = b.initArrayOp();
    m.setContext(ctx->remote);
    m.setOp(wire::Request::ArrayOpKind::DESTROY);
    m.setArray(array->remote);
  });
  if (r != CUDA_SUCCESS) return r;
  for (ArrayObject* level : array->levelObjects) {
    if (!level) continue;
    unregisterObject(level);
    delete level;
  }
  unregisterObject(array);
  array->tag = Tag::kDead;
  delete array;
  return CUDA_SUCCESS;
}

CUDA_ARRAY3D_DESCRIPTOR descriptor3DOf(const ArrayShape& s) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = s.width;
  d.Height = s.height;
  d.Depth = s.depth;
  d.Format = static_cast<CUarray_format>(s.format);
  d.NumChannels = s.channels;
  d.Flags = s.flags;
  return d;
}

ArrayShape shapeOf(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  ArrayShape s;
  s.width = d.Width;
  s.height = d.Height;
  s.depth = d.Depth;
  s.format = static_cast<unsigned>(rawEnumValue(d.Format));  // any number may arrive
  s.channels = d.NumChannels;
  s.flags = d.Flags;
  return s;
}

CUresult memoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, const ArrayObject* array,
                            CUdevice device) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  int count = 0;
  if (CUresult r = cuDeviceGetCount(&count); r != CUDA_SUCCESS) return r;
  if (device < 0 || device >= count) return CUDA_ERROR_INVALID_DEVICE;
  // NVIDIA answers only for arrays created with CUDA_ARRAY3D_DEFERRED_MAPPING; an ordinary array
  // gets CUDA_ERROR_INVALID_VALUE (observed on driver 580.159.04, H200). Deferred-mapping arrays
  // are refused at creation, so every array served here is an ordinary one.
  if (!(array->shape.flags & CUDA_ARRAY3D_DEFERRED_MAPPING)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "memory requirements are only for arrays created with "
                      "CUDA_ARRAY3D_DEFERRED_MAPPING");
  }
  *out = {};
  uint64_t bytes = arrayTotalBytes(array->shape, array->levels);
  out->size =
      (bytes + gpupool::kArrayAlignment - 1) / gpupool::kArrayAlignment * gpupool::kArrayAlignment;
  out->alignment = gpupool::kArrayAlignment;
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (!handle || !desc) return CUDA_ERROR_INVALID_VALUE;
  ArrayShape s;
  s.width = desc->Width;
  s.height = desc->Height;
  s.format = static_cast<unsigned>(rawEnumValue(desc->Format));
  s.channels = desc->NumChannels;
  ArrayObject* array = nullptr;
  if (CUresult r = createArray("cuArrayCreate", s, 0, false, &array); r != CUDA_SUCCESS) return r;
  *handle = reinterpret_cast<CUarray>(array);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuArray3DCreate_v2(CUarray* handle,
                                               const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (!handle || !desc) return CUDA_ERROR_INVALID_VALUE;
  ArrayObject* array = nullptr;
  if (CUresult r = createArray("cuArray3DCreate", shapeOf(*desc), 0, false, &array);
      r != CUDA_SUCCESS) {
    return r;
  }
  *handle = reinterpret_cast<CUarray>(array);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuArrayDestroy(CUarray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return destroyArray("cuArrayDestroy", asArray(handle));
}

GPUPOOL_DRIVER_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* desc, CUarray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ArrayObject* array = asArray(handle);
  if (!array) return CUDA_ERROR_INVALID_HANDLE;
  if (!desc) return CUDA_ERROR_INVALID_VALUE;
  desc->Width = array->shape.width;
  desc->Height = array->shape.height;
  desc->Format = static_cast<CUarray_format>(array->shape.format);
  desc->NumChannels = array->shape.channels;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                      CUarray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ArrayObject* array = asArray(handle);
  if (!array) return CUDA_ERROR_INVALID_HANDLE;
  if (!desc) return CUDA_ERROR_INVALID_VALUE;
  *desc = descriptor3DOf(array->shape);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out,
                                                         CUarray handle, CUdevice device) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ArrayObject* array = asArray(handle);
  if (!array) return CUDA_ERROR_INVALID_HANDLE;
  return memoryRequirements(out, array, device);
}

GPUPOOL_DRIVER_API CUresult cuArrayGetPlane(CUarray* plane, CUarray handle, unsigned int index) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asArray(handle)) return CUDA_ERROR_INVALID_HANDLE;
  (void)plane;
  (void)index;
  // Only the multi-planar formats (NV12, ...) have planes, and those are not served.
  return refuseCall(CUDA_ERROR_INVALID_VALUE,
                    "cuArrayGetPlane: the array is not multi-planar (multi-planar formats are not "
                    "served)");
}

GPUPOOL_DRIVER_API CUresult cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES* properties,
                                                       CUarray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asArray(handle)) return CUDA_ERROR_INVALID_HANDLE;
  (void)properties;
  return refuseCall(CUDA_ERROR_INVALID_VALUE,
                    "cuArrayGetSparseProperties: the array is not sparse (sparse arrays are not "
                    "served)");
}

GPUPOOL_DRIVER_API CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle,
                                                   const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                   unsigned int levels) {
  if (!handle || !desc) return CUDA_ERROR_INVALID_VALUE;
  // NVIDIA clamps the level count to [1, 1 + floor(log2(largest extent))] (documented; more levels
  // than the extent has were accepted on driver 580.159.04, H200).
  ArrayShape shape = shapeOf(*desc);
  levels = std::clamp(levels, 1u, arrayMaxLevels(shape));
  ArrayObject* array = nullptr;
  if (CUresult r = createArray("cuMipmappedArrayCreate", shape, levels, true, &array);
      r != CUDA_SUCCESS) {
    return r;
  }
  *handle = reinterpret_cast<CUmipmappedArray>(array);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return destroyArray("cuMipmappedArrayDestroy", asMipmappedArray(handle));
}

GPUPOOL_DRIVER_API CUresult cuMipmappedArrayGetLevel(CUarray* out, CUmipmappedArray handle,
                                                     unsigned int level) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ArrayObject* mipmapped = asMipmappedArray(handle);
  if (!mipmapped) return CUDA_ERROR_INVALID_HANDLE;
  if (!out || level >= mipmapped->levels) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(arrayLevelsMutex);
  if (ArrayObject* known = mipmapped->levelObjects[level]) {
    *out = reinterpret_cast<CUarray>(known);
    return CUDA_SUCCESS;
  }
  ContextObject* ctx = mipmapped->context;
  auto array = std::make_unique<ArrayObject>();
  array->context = ctx;
  array->shape = arrayLevelShape(mipmapped->shape, level);
  array->parent = mipmapped;
  CUresult r = ctx->server->call(
      "cuMipmappedArrayGetLevel",
      [&](wire::Request::Builder b) {
        auto m = b.initArrayOp();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::ArrayOpKind::LEVEL);
        m.setArray(mipmapped->remote);
        m.setLevel(level);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        array->remote = reply.getHandle();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  registerObject(array.get());
  mipmapped->levelObjects[level] = array.get();
  *out = reinterpret_cast<CUarray>(array.release());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuMipmappedArrayGetMemoryRequirements(
    CUDA_ARRAY_MEMORY_REQUIREMENTS* out, CUmipmappedArray handle, CUdevice device) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ArrayObject* array = asMipmappedArray(handle);
  if (!array) return CUDA_ERROR_INVALID_HANDLE;
  return memoryRequirements(out, array, device);
}

GPUPOOL_DRIVER_API CUresult cuMipmappedArrayGetSparseProperties(
    CUDA_ARRAY_SPARSE_PROPERTIES* properties, CUmipmappedArray handle) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asMipmappedArray(handle)) return CUDA_ERROR_INVALID_HANDLE;
  (void)properties;
  return refuseCall(CUDA_ERROR_INVALID_VALUE,
                    "cuMipmappedArrayGetSparseProperties: the array is not sparse (sparse arrays "
                    "are not served)");
}
