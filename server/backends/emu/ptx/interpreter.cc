#include "interpreter.h"

#include "block_runner.h"

namespace gpupool::ptx {

BlockWorker::BlockWorker(LaunchContext& ctx, unsigned worker)
    : runner_(std::make_unique<execution::BlockRunner>(ctx, worker)) {}

BlockWorker::~BlockWorker() = default;

void BlockWorker::run(uint64_t blockIndex) {
  runner_->start(blockIndex);
  runner_->run();
}

}  // namespace gpupool::ptx
