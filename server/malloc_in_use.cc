#include "server/malloc_in_use.h"

#include <cstdlib>

#if GPUPOOL_MIMALLOC
#include <mimalloc.h>
#endif

namespace gpupool::server {

std::string mallocInUse() {
#if GPUPOOL_MIMALLOC
  // A block from the C interface lies in mimalloc's heap only when mimalloc answered it (calloc:
  // the block is read, through a pointer to const, by the check).
  void* probe = std::calloc(1, 64);
  const bool mimallocAnswers = probe && mi_is_in_heap_region(probe);
  std::free(probe);
  if (!mimallocAnswers)
    return "not mimalloc: it is linked, but another malloc (preloaded?) answers";
  const int version = mi_version();  // 209 is 2.0.9
  return "mimalloc " + std::to_string(version / 100) + "." + std::to_string(version / 10 % 10) +
         "." + std::to_string(version % 10);
#else
  return "the C library's";
#endif
}

}  // namespace gpupool::server
