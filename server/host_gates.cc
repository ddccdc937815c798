#include "server/host_gates.h"

#include <cuda.h>
#include <pthread.h>

#include <iostream>

namespace gpupool::server {
namespace {

// How often a stream stopped at a reached gate looks at the serving thread.
constexpr auto kWatchSlice = std::chrono::milliseconds(50);
// Below this much CPU over kSelfDeadlockAfter, the serving thread is waiting, not working.
constexpr int64_t kWorkingCpuNs = 20'000'000;

int64_t cpuNanos(clockid_t clock) {
  timespec t{};
  if (clock_gettime(clock, &t) != 0) return 0;
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

// Whether the serving thread has stayed in one request, waiting, for kSelfDeadlockAfter while this
// gate was reached: then only this gate's release, which that thread would have to read, could
// let it go on.
class HostGates::SelfDeadlockWatch {
 public:
  SelfDeadlockWatch(const Core& core, uint64_t gateContext)
      : core_(core), gateContext_(gateContext) {}

  bool stalled() {
    const uint64_t request = core_.serving.load();
    const uint64_t context = core_.servingContext.load();
    const auto now = std::chrono::steady_clock::now();
    if (request == 0 || (context != 0 && context != kSeveralContexts && context != gateContext_)) {
      request_ = 0;
      return false;
    }
    const int64_t cpu = cpuNanos(core_.servingClock.load());
    if (request != request_ || cpu - cpuAtStart_ > kWorkingCpuNs) {
      request_ = request;
      since_ = now;
      cpuAtStart_ = cpu;
      return false;
    }
    return now - since_ >= kSelfDeadlockAfter;
  }

 private:
  const Core& core_;
  const uint64_t gateContext_;
  uint64_t request_ = 0;
  std::chrono::steady_clock::time_point since_;
  int64_t cpuAtStart_ = 0;
};

namespace {
// The gates whose serving thread this is, while it serves a request (servingFor ignores others:
// a waiter thread finding a context is not the serving thread).
thread_local const void* servingGates = nullptr;
}  // namespace

HostGates::ServingRequest::ServingRequest(HostGates& gates) : gates_(gates) {
  Core& core = *gates_.core_;
  clockid_t clock = CLOCK_THREAD_CPUTIME_ID;
  if (pthread_getcpuclockid(pthread_self(), &clock) == 0) core.servingClock.store(clock);
  core.servingContext.store(0);
  core.serving.store(core.servedRequests.fetch_add(1) + 1);
  servingGates = &core;
}

HostGates::ServingRequest::~ServingRequest() {
  servingGates = nullptr;
  gates_.core_->serving.store(0);  // the next request's constructor clears servingContext
}

void HostGates::servingFor(uint64_t context) {
  Core& core = *core_;
  if (servingGates != &core) return;
  const uint64_t named = core.servingContext.load();
  core.servingContext.store(named == 0 || named == context ? context : kSeveralContexts);
}

void HostGates::holdAtGate(Core& core, Gate& gate) {
  std::unique_lock lock(core.mutex);
  gate.reached = true;
  core.changed.notify_all();
  SelfDeadlockWatch watch(core, gate.context);
  while (!gate.released) {
    core.changed.wait_for(lock, kWatchSlice);
    if (gate.released || !watch.stalled()) continue;
    gate.broken = true;
    gate.released = true;
    ++core.broken;
    core.changed.notify_all();
    std::cerr << "gpupoold: a host function's gate was let go unrun: the session's thread waited "
                 "for the device behind it, so its release could never be read\n";
  }
}

Status HostGates::open(uint64_t context, uint64_t id, std::function<void()>* work) {
  auto gate = std::make_shared<Gate>();
  gate->context = context;
  {
    std::lock_guard lock(core_->mutex);
    if (!core_->gates.emplace(id, gate).second) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "host gate already open");
    }
  }
  *work = [core = core_, gate] { holdAtGate(*core, *gate); };
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
  if (it->second->broken) {
    return Status::error(
        CUDA_ERROR_ILLEGAL_STATE,
        "the host function was not run: a call that waits for the device (a free, a synchronous "
        "copy, a synchronize) reached the server while this function was pending, and the stream "
        "went on without it; do not race such calls with host functions of the same context");
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
