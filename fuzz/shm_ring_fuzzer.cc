// libFuzzer entry point; what one input exercises is described at consumeShmRing in fuzz_inputs.h.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpupool::fuzz::consumeShmRing({data, size});
  return 0;
}
