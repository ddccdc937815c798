#include "client/host_function_fence.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace gpupool::client {
namespace {

struct Pending {
  std::mutex mutex;
  std::condition_variable closed;
  // Changed under the mutex; read without it first, so a process with no host function pending
  // pays one atomic load per call.
  std::atomic<unsigned> all{0};     // host functions placed and not yet returned
  std::atomic<unsigned> legacy{0};  // of them, on the legacy stream
};

Pending& pending() {
  static auto* p = new Pending();  // never destroyed: host-function threads may outlive statics
  return *p;
}

thread_local bool hostFunctionThread = false;

// What this thread's next request waited for: nothing, the legacy stream's host functions, or all.
enum class Need { kNothing, kLegacy, kAll };
thread_local Need need = Need::kNothing;

bool clearFor(const Pending& p, Need n) {
  switch (n) {
    case Need::kNothing:
      return true;
    case Need::kLegacy:
      return p.legacy.load() == 0;
    case Need::kAll:
      return p.all.load() == 0;
  }
  return true;
}

void waitUntilClear(Need n) {
  Pending& p = pending();
  if (clearFor(p, n)) return;
  std::unique_lock lock(p.mutex);
  p.closed.wait(lock, [&] { return clearFor(p, n); });
}

}  // namespace

void HostFunctionFence::await(Work work) {
  if (hostFunctionThread || work == Work::kNonBlockingStream) return;
  const Need n = work == Work::kBlockingStream ? Need::kLegacy : Need::kAll;
  if (n > need) need = n;
  waitUntilClear(n);
}

bool HostFunctionFence::clearToSend() { return clearFor(pending(), need); }

void HostFunctionFence::awaitAgain() { waitUntilClear(need); }

void HostFunctionFence::sent() { need = Need::kNothing; }

void HostFunctionFence::opened(bool legacyStream) {
  Pending& p = pending();
  std::lock_guard lock(p.mutex);
  ++p.all;
  if (legacyStream) ++p.legacy;
}

void HostFunctionFence::closed(bool legacyStream) {
  Pending& p = pending();
  {
    std::lock_guard lock(p.mutex);
    --p.all;
    if (legacyStream) --p.legacy;
  }
  p.closed.notify_all();
}

void HostFunctionFence::enterHostFunctionThread() { hostFunctionThread = true; }

bool HostFunctionFence::onHostFunctionThread() { return hostFunctionThread; }

}  // namespace gpupool::client
