// The second translation unit of managed_variables.cu: its own module, with its own __managed__
// variable and the kernel that changes it.
#include <cuda_runtime.h>

constexpr int kTallyCount = 64;

__managed__ int tally[kTallyCount];

__global__ void bumpTally(int by) { tally[threadIdx.x] += by; }

int* secondUnitTally() { return tally; }

void bumpSecondUnitTally(int by) { bumpTally<<<1, kTallyCount>>>(by); }
