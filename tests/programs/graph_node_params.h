// Node parameters that the driver-API graph programs (graph_driver.cu, graph_update_driver.cu,
// cooperative_launch_driver.cu) build again and again: a 1D kernel launch and a 32-bit fill of one
// row.
#pragma once

#include <cuda.h>

#include <cstring>

inline CUDA_KERNEL_NODE_PARAMS kernelNodeParams(CUfunction f, void** args, unsigned blocks,
                                                unsigned threads) {
  CUDA_KERNEL_NODE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  p.func = f;
  p.gridDimX = blocks;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = threads;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

inline CUDA_MEMSET_NODE_PARAMS fill32NodeParams(CUdeviceptr dst, unsigned value, size_t count) {
  CUDA_MEMSET_NODE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  p.dst = dst;
  p.value = value;
  p.elementSize = 4;
  p.width = count;
  p.height = 1;
  return p;
}
