#include "server/host_gates.h"

#include <cuda.h>

namespace gpupool::server {

Status HostGates::open(uint64_t context, uint64_t id, std::function<void()>* work) {
  auto gate = std::make_shared<Gate>();
  gate->context = context;
  {
    std::lock_guard lock(core_->mutex);
    if (!core_->gates.emplace(id, gate).second) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "host gate already open");
    }
  }
  *work = [core = core_, gate] {
    std::unique_lock lock(core->mutex);
    gate->reached = true;
    core->changed.notify_all();
    core->changed.wait(lock, [&] { return gate->released; });
  };
  return Status::success();
}

void HostGates::abandon(uint64_t id) {
  std::lock_guard lock(core_->mutex);
  core_->gates.erase(id);
}

Status HostGates::reached(uint64_t context, uint64_t id) const {
  std::lock_guard lock(core_->mutex);
  auto it = core_->gates.find(id);
  if (it == core_->gates.end() || it->second->context != context) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown host gate");
  }
  if (!it->second->reached) return Status::error(CUDA_ERROR_NOT_READY, "host gate not reached");
  return Status::success();
}

Status HostGates::wait(uint64_t context, uint64_t id) const {
  std::unique_lock lock(core_->mutex);
  auto it = core_->gates.find(id);
  if (it == core_->gates.end() || it->second->context != context) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown host gate");
  }
  std::shared_ptr<Gate> gate = it->second;
  // Teardown releases the gate, so this wait ends with the session too.
  core_->changed.wait(lock, [&] { return gate->reached || gate->released; });
  return Status::success();
}

Status HostGates::release(uint64_t context, uint64_t id) {
  std::lock_guard lock(core_->mutex);
  auto it = core_->gates.find(id);
  if (it == core_->gates.end() || it->second->context != context) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "unknown host gate");
  }
  it->second->released = true;
  core_->gates.erase(it);
  core_->changed.notify_all();
  return Status::success();
}

void HostGates::releaseIf(bool (*match)(const Gate&, uint64_t), uint64_t context) {
  std::lock_guard lock(core_->mutex);
  for (auto it = core_->gates.begin(); it != core_->gates.end();) {
    if (match(*it->second, context)) {
      it->second->released = true;
      it = core_->gates.erase(it);
    } else {
      ++it;
    }
  }
  core_->changed.notify_all();
}

void HostGates::releaseContext(uint64_t context) {
  releaseIf([](const Gate& g, uint64_t c) { return g.context == c; }, context);
}

void HostGates::releaseAll() {
  releaseIf([](const Gate&, uint64_t) { return true; }, 0);
}

size_t HostGates::openCount() const {
  std::lock_guard lock(core_->mutex);
  return core_->gates.size();
}

}  // namespace gpupool::server
