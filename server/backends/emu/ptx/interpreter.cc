#include "interpreter.h"

#include "block_runner.h"

namespace gpupool::ptx {

void runBlock(LaunchContext& ctx, uint64_t blockIndex, unsigned worker) {
  execution::BlockRunner runner(ctx, blockIndex, worker);
  runner.run();
}

}  // namespace gpupool::ptx
