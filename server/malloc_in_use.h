// Which malloc answers gpupoold's allocations (server/CMakeLists.txt, GPUPOOL_SERVER_ALLOCATOR):
// asked of the running process, so a build that links mimalloc without it taking over says so.
#pragma once

#include <string>

namespace gpupool::server {

// "mimalloc 2.0.9", "the C library's", or, where mimalloc is linked but another malloc answers
// (LD_PRELOAD), "not mimalloc: ...".
std::string mallocInUse();

}  // namespace gpupool::server
