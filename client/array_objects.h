// CUDA arrays on the client (client/array_api.cc): a CUarray or CUmipmappedArray is the address
// of one of these objects; the array itself lives on the server of its context, named there by
// `remote`. Shared with the 3D copies (client/copy3d_api.cc).
#pragma once

#include <cuda.h>

#include <vector>

#include "common/cuda_array_layout.h"
#include "driver_state.h"

namespace gpupool::client {

struct ArrayObject {
  Tag tag = Tag::kArray;  // kMipmappedArray for a mipmapped array
  ContextObject* context = nullptr;
  uint64_t remote = 0;
  ArrayShape shape;                        // a level: the level's extent
  unsigned levels = 0;                     // a mipmapped array: its level count
  ArrayObject* parent = nullptr;           // a level: its mipmapped array
  std::vector<ArrayObject*> levelObjects;  // a mipmapped array: levels asked for (null: not yet)
};

// Validating casts; null when the handle is not a live array of that kind.
ArrayObject* asArray(CUarray h);
ArrayObject* asMipmappedArray(CUmipmappedArray h);

// A 3D copy (cuMemcpy3D's parameters; cuMemcpy2D with an array end comes here as Depth 1)
// between host memory, device memory and arrays, on `stream`.
CUresult copyRegion3D(const char* what, const CUDA_MEMCPY3D& copy, CUstream stream, bool async);

}  // namespace gpupool::client
