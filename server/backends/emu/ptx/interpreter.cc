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

bool BlockWorker::runInCluster(uint64_t blockIndex, ClusterGroup& group,
                               const std::function<bool()>& stop) {
  // Every CTA of the last cluster is done before any shared memory is reused; every CTA of this
  // one has published its shared memory before any runs.
  if (!group.gather(stop)) return false;
  runner_->start(blockIndex);
  runner_->joinCluster(&group);
  if (!group.gather(stop)) return false;
  runner_->run();
  return true;
}

}  // namespace gpupool::ptx
