// Conditional graph nodes as the driver defines them, checked alike by the client
// (cuGraphAddNode) and the server (graph_handlers.cc, for what arrives on the wire).
#pragma once

#include <cuda.h>

#include <cstddef>

namespace gpupool {

// Why a conditional node of `type` with `bodies` bodies is invalid (CUDA_ERROR_INVALID_VALUE), or
// null: an if node has 1 or 2 bodies, a while node 1, a switch node at least 1.
inline const char* conditionalNodeRefusal(unsigned type, size_t bodies) {
  switch (type) {
    case CU_GRAPH_COND_TYPE_IF:
      if (bodies == 1 || bodies == 2) return nullptr;
      break;
    case CU_GRAPH_COND_TYPE_WHILE:
      if (bodies == 1) return nullptr;
      break;
    case CU_GRAPH_COND_TYPE_SWITCH:
      if (bodies >= 1) return nullptr;
      break;
    default:
      return "unknown conditional node type";
  }
  return "an if node has 1 or 2 bodies, a while node 1, a switch node at least 1";
}

}  // namespace gpupool
