// libibverbs and librdmacm, loaded at run time instead of linked.
//
// So that libcuda.so.1, gpupoold and the tools start on machines without rdma-core (a GPU-less
// client usually has none): there the RDMA transport is simply unavailable, with the reason, and
// TCP carries everything. The transport calls the verbs and rdma_cm API as usual; the functions it
// uses are defined in verbs_library.cc (hidden, never exported) and forward to the loaded
// libraries. Every entry into the RDMA transport checks verbsLoadError() first.
#pragma once

#include <string>

namespace gpupool::transport::rdma {

// Loads both libraries and resolves every function the transport uses, once per process. Empty
// when all is there; otherwise why not, e.g. "librdmacm.so.1: cannot open shared object file: No
// such file or directory (install rdma-core: apt-get install librdmacm1 libibverbs1)". The
// environment variables GPU_POOL_LIBIBVERBS and GPU_POOL_LIBRDMACM name other files to load.
const std::string& verbsLoadError();

}  // namespace gpupool::transport::rdma
