// CUDA arrays on the emu: each is one block of the context's device memory, laid out as
// common/cuda_array_layout.h describes (row-major, no padding, slices = z, layers or faces, mip
// levels one after the other), so texture and surface instructions can address it later. 3D
// copies between host, device memory and arrays move rows, in stream order.
#include <cstring>
#include <memory>
#include <vector>

#include "common/hex.h"
#include "server/backends/emu/emu_context.h"

namespace gpupool::server::emu {
namespace {

Status arrayInvalid(const std::string& what) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, what);
}

}  // namespace

Status EmuContext::arrayCreate(const ArrayShape& shape, unsigned levels, uint64_t* array) {
  if (Status st = sticky(); !st.ok()) return st;
  std::string reason;
  if (CUresult r = checkArrayShape(shape, levels, levels != 0, &reason); r != CUDA_SUCCESS) {
    return Status::error(r, reason);
  }
  EmuArray a;
  a.shape = shape;
  a.levels = levels;
  a.levelHandles.assign(levels, 0);
  if (Status st = memAlloc(arrayTotalBytes(shape, levels), &a.address); !st.ok()) return st;
  *array = nextHandle_++;
  arrays_.emplace(*array, std::move(a));
  return Status::success();
}

Status EmuContext::arrayDestroy(uint64_t array, uint64_t* bytes) {
  auto it = arrays_.find(array);
  if (it == arrays_.end()) return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown array");
  if (it->second.parent) {
    return arrayInvalid("a mipmap level is destroyed with its mipmapped array");
  }
  *bytes = arrayTotalBytes(it->second.shape, it->second.levels);
  for (uint64_t level : it->second.levelHandles) arrays_.erase(level);
  uint64_t address = it->second.address;
  arrays_.erase(array);
  return memFree(address);  // waits for the queued work, as cuArrayDestroy does
}

Status EmuContext::arrayLevel(uint64_t mipmapped, unsigned level, uint64_t* array) {
  auto it = arrays_.find(mipmapped);
  if (it == arrays_.end() || it->second.levels == 0) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown mipmapped array");
  }
  EmuArray& parent = it->second;
  if (level >= parent.levels) return arrayInvalid("mipmap level out of range");
  if (!parent.levelHandles[level]) {
    EmuArray l;
    l.address = parent.address + arrayLevelOffset(parent.shape, level);
    l.shape = arrayLevelShape(parent.shape, level);
    l.parent = mipmapped;
    parent.levelHandles[level] = nextHandle_++;
    arrays_.emplace(parent.levelHandles[level], std::move(l));
  }
  *array = parent.levelHandles[level];
  return Status::success();
}

Status EmuContext::resolveCopyEnd(const CopyEnd3D& end, bool source, const Copy3D& c,
                                  EmuCopyEnd* out) {
  const char* which = source ? "source" : "destination";
  switch (end.kind) {
    case CopyEnd3D::Kind::kHost:
      // Packed by the handler: the region is the whole buffer.
      out->base = source ? static_cast<uint8_t*>(const_cast<void*>(end.srcHost))
                         : static_cast<uint8_t*>(end.dstHost);
      out->pitch = c.widthBytes;
      out->slicePitch = c.widthBytes * c.height;
      return Status::success();
    case CopyEnd3D::Kind::kDevice: {
      if ((c.height > 1 || c.depth > 1) && end.pitch < end.xBytes + c.widthBytes) {
        return arrayInvalid(std::string("3D copy ") + which + " pitch is smaller than the row");
      }
      if (c.depth > 1 && end.height < end.y + c.height) {
        return arrayInvalid(std::string("3D copy ") + which + " height is smaller than the region");
      }
      uint64_t pitch = end.pitch ? end.pitch : c.widthBytes;
      uint64_t rowsPerSlice = end.height ? end.height : c.height;
      uint64_t start = (end.z * rowsPerSlice + end.y) * pitch + end.xBytes;
      uint64_t extent = ((c.depth - 1) * rowsPerSlice + (c.height - 1)) * pitch + c.widthBytes;
      out->base = view(end.handle + start, extent);
      if (!out->base) return arrayInvalid(std::string("invalid device range for 3D copy ") + which);
      out->pitch = pitch;
      out->slicePitch = pitch * rowsPerSlice;
      return Status::success();
    }
    case CopyEnd3D::Kind::kArray: {
      auto it = arrays_.find(end.handle);
      if (it == arrays_.end() || it->second.levels != 0) {
        return Status::error(CUDA_ERROR_INVALID_HANDLE,
                             std::string("3D copy ") + which + " is not an array");
      }
      const ArrayShape& s = it->second.shape;
      uint64_t rowBytes = arrayRowBytes(s), rows = arrayRows(s);
      if (!arrayRegionInside(s, end.xBytes, end.y, end.z, c.widthBytes, c.height, c.depth)) {
        return arrayInvalid(std::string("3D copy ") + which + " region lies outside the array");
      }
      out->pitch = rowBytes;
      out->slicePitch = rowBytes * rows;
      out->base = view(it->second.address, arrayBytes(s));
      if (!out->base) return arrayInvalid("array memory is gone");
      out->base += end.z * out->slicePitch + end.y * rowBytes + end.xBytes;
      return Status::success();
    }
  }
  return arrayInvalid("unknown 3D copy end");
}

Status EmuContext::copy3D(const Copy3D& c, uint64_t stream, bool async) {
  if (Status st = sticky(); !st.ok()) return st;
  if (c.widthBytes == 0 || c.height == 0 || c.depth == 0) return Status::success();
  EmuCopyEnd s, d;
  if (Status st = resolveCopyEnd(c.src, true, c, &s); !st.ok()) return st;
  if (Status st = resolveCopyEnd(c.dst, false, c, &d); !st.ok()) return st;
  auto rows = [c](EmuCopyEnd d, EmuCopyEnd s) {
    for (uint64_t z = 0; z < c.depth; ++z) {
      for (uint64_t y = 0; y < c.height; ++y) {
        std::memmove(d.base + z * d.slicePitch + y * d.pitch,
                     s.base + z * s.slicePitch + y * s.pitch, c.widthBytes);
      }
    }
  };
  bool hostDst = c.dst.kind == CopyEnd3D::Kind::kHost;
  if (async && !hostDst) {
    std::shared_ptr<std::vector<uint8_t>> hostCopy;
    if (c.src.kind == CopyEnd3D::Kind::kHost) {
      // The caller's buffer is gone once this returns: the packed bytes go with the operation.
      hostCopy = std::make_shared<std::vector<uint8_t>>(s.base,
                                                        s.base + c.widthBytes * c.height * c.depth);
      s.base = hostCopy->data();
    }
    return enqueue(stream, [rows, d, s, hostCopy] { rows(d, s); });
  }
  if (Status st = waitForStream(stream); !st.ok()) return st;
  rows(d, s);
  return Status::success();
}

}  // namespace gpupool::server::emu
