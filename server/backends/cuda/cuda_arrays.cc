// CUDA arrays on the real driver: cuArray3DCreate and cuMipmappedArrayCreate under ids this
// context mints (the driver would take any tenant's CUarray), and cuMemcpy3D between host, this
// context's device memory and its arrays, each region checked first.
#include <algorithm>

#include "server/backends/cuda/cuda_context.h"

namespace gpupool::server {
namespace {

Status cudaArrayInvalid(const std::string& what) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, what);
}

CUDA_ARRAY3D_DESCRIPTOR descriptorOf(const ArrayShape& shape) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  d.Width = shape.width;
  d.Height = shape.height;
  d.Depth = shape.depth;
  d.Format = static_cast<CUarray_format>(shape.format);
  d.NumChannels = shape.channels;
  d.Flags = shape.flags;
  return d;
}

}  // namespace

Status CudaContext::arrayCreate(const ArrayShape& shape, unsigned levels, uint64_t* array) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  std::string reason;
  if (CUresult r = checkArrayShape(shape, levels, levels != 0, &reason); r != CUDA_SUCCESS) {
    return Status::error(r, reason);
  }
  CUDA_ARRAY3D_DESCRIPTOR d = descriptorOf(shape);
  CudaArray a;
  a.shape = shape;
  a.levels = levels;
  if (levels) {
    if (Status s = driver_->call(driver_->mipmappedArrayCreate, &a.mipmapped, &d, levels);
        !s.ok()) {
      return s;
    }
    a.levelIds.assign(levels, 0);
  } else if (Status s = driver_->call(driver_->array3DCreate, &a.array, &d); !s.ok()) {
    return s;
  }
  uint64_t bytes = arrayTotalBytes(shape, levels);
  memoryUsed_ += bytes;
  memoryPeak_ = std::max(memoryPeak_.load(), memoryUsed_.load());
  *deviceMemoryUsed_ += bytes;
  *array = mintId();
  arrays_.emplace(*array, std::move(a));
  return Status::success();
}

Status CudaContext::arrayDestroy(uint64_t array, uint64_t* bytes) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = arrays_.find(array);
  if (it == arrays_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown array");
  CudaArray& a = it->second;
  if (a.parent) return cudaArrayInvalid("a mipmap level is destroyed with its mipmapped array");
  Status s = a.mipmapped ? driver_->call(driver_->mipmappedArrayDestroy, a.mipmapped)
                         : driver_->call(driver_->arrayDestroy, a.array);
  if (!s.ok()) return s;
  *bytes = arrayTotalBytes(a.shape, a.levels);
  memoryUsed_ -= *bytes;
  *deviceMemoryUsed_ -= *bytes;
  for (uint64_t level : a.levelIds) arrays_.erase(level);
  arrays_.erase(array);
  return Status::success();
}

Status CudaContext::arrayLevel(uint64_t mipmapped, unsigned level, uint64_t* array) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  auto it = arrays_.find(mipmapped);
  if (it == arrays_.end() || !it->second.mipmapped) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown mipmapped array");
  }
  if (level >= it->second.levels) return cudaArrayInvalid("mipmap level out of range");
  if (!it->second.levelIds[level]) {
    CudaArray l;
    if (Status s =
            driver_->call(driver_->mipmappedArrayGetLevel, &l.array, it->second.mipmapped, level);
        !s.ok()) {
      return s;
    }
    l.shape = arrayLevelShape(it->second.shape, level);
    l.parent = mipmapped;
    it->second.levelIds[level] = mintId();
    arrays_.emplace(it->second.levelIds[level], std::move(l));
  }
  *array = it->second.levelIds[level];
  return Status::success();
}

void CudaContext::arrayReleaseAll() {
  for (auto& [id, a] : arrays_) {
    if (a.mipmapped) (void)driver_->call(driver_->mipmappedArrayDestroy, a.mipmapped);
    if (a.array && !a.parent) (void)driver_->call(driver_->arrayDestroy, a.array);
  }
  arrays_.clear();
}

Status CudaContext::fillCopyEnd(const CopyEnd3D& end, bool source, const Copy3D& copy,
                                CUDA_MEMCPY3D* p) {
  const char* which = source ? "3D copy source" : "3D copy destination";
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  CUarray array = nullptr;
  uint64_t pitch = end.pitch, height = end.height, device = 0;
  switch (end.kind) {
    case CopyEnd3D::Kind::kHost:
      pitch = copy.widthBytes;  // packed by the handler
      height = copy.height;
      break;
    case CopyEnd3D::Kind::kDevice: {
      type = CU_MEMORYTYPE_DEVICE;
      device = end.handle;
      if (pitch == 0) pitch = copy.widthBytes;
      if (height == 0) height = copy.height;
      if ((copy.height > 1 || copy.depth > 1) && pitch < end.xBytes + copy.widthBytes) {
        return cudaArrayInvalid(std::string(which) + ": pitch is smaller than the row");
      }
      if (copy.depth > 1 && height < end.y + copy.height) {
        return cudaArrayInvalid(std::string(which) + ": height is smaller than the region");
      }
      uint64_t start = (end.z * height + end.y) * pitch + end.xBytes;
      uint64_t rows = (copy.depth - 1) * height + copy.height;
      if (Status s = checkPitchedRange(which, end.handle + start, pitch, copy.widthBytes, rows);
          !s.ok()) {
        return s;
      }
      break;
    }
    case CopyEnd3D::Kind::kArray: {
      auto it = arrays_.find(end.handle);
      if (it == arrays_.end() || !it->second.array) {
        return Status::error(CUDA_ERROR_INVALID_HANDLE, std::string(which) + " is not an array");
      }
      if (!arrayRegionInside(it->second.shape, end.xBytes, end.y, end.z, copy.widthBytes,
                             copy.height, copy.depth)) {
        return cudaArrayInvalid(std::string(which) + " region lies outside the array");
      }
      type = CU_MEMORYTYPE_ARRAY;
      array = it->second.array;
      break;
    }
  }
  if (source) {
    p->srcMemoryType = type;
    p->srcXInBytes = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.xBytes;
    p->srcY = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.y;
    p->srcZ = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.z;
    p->srcHost = end.srcHost;
    p->srcDevice = device;
    p->srcArray = array;
    p->srcPitch = type == CU_MEMORYTYPE_ARRAY ? 0 : pitch;
    p->srcHeight = type == CU_MEMORYTYPE_ARRAY ? 0 : height;
  } else {
    p->dstMemoryType = type;
    p->dstXInBytes = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.xBytes;
    p->dstY = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.y;
    p->dstZ = end.kind == CopyEnd3D::Kind::kHost ? 0 : end.z;
    p->dstHost = end.dstHost;
    p->dstDevice = device;
    p->dstArray = array;
    p->dstPitch = type == CU_MEMORYTYPE_ARRAY ? 0 : pitch;
    p->dstHeight = type == CU_MEMORYTYPE_ARRAY ? 0 : height;
  }
  return Status::success();
}

Status CudaContext::copy3D(const Copy3D& copy, uint64_t stream, bool async) {
  if (Status s = makeCurrent(); !s.ok()) return s;
  CUstream cuStream = nullptr;
  if (Status s = findStream(stream, &cuStream); !s.ok()) return s;
  if (copy.widthBytes == 0 || copy.height == 0 || copy.depth == 0) return Status::success();
  CUDA_MEMCPY3D params{};
  if (Status s = fillCopyEnd(copy.src, true, copy, &params); !s.ok()) return s;
  if (Status s = fillCopyEnd(copy.dst, false, copy, &params); !s.ok()) return s;
  params.WidthInBytes = copy.widthBytes;
  params.Height = copy.height;
  params.Depth = copy.depth;
  // Always in the request's stream: a synchronous copy (the handler makes one of every copy into
  // host memory) still comes after the stream's earlier work, which cuMemcpy3D on the legacy stream
  // would not wait for when the stream is non-blocking.
  if (Status s = driver_->call(driver_->memcpy3DAsync, &params, cuStream); !s.ok()) return s;
  // A host end is the caller's buffer: it must be consumed (or filled) before we return.
  if (async && copy.src.kind != CopyEnd3D::Kind::kHost && copy.dst.kind != CopyEnd3D::Kind::kHost) {
    return Status::success();
  }
  return driver_->call(driver_->streamSynchronize, cuStream);
}

}  // namespace gpupool::server
