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

// What the tickets this thread holds waited for: nothing, the legacy stream's functions, or all.
enum class Need { kNothing, kLegacy, kAll };
thread_local Need need = Need::kNothing;

Need needOf(HostFunctionFence::Work work) {
  if (work == HostFunctionFence::Work::kNonBlockingStream) return Need::kNothing;
  return work == HostFunctionFence::Work::kBlockingStream ? Need::kLegacy : Need::kAll;
}

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
  if (hostFunctionThread) return;
  waitUntilClear(needOf(work));
}

HostFunctionFence::Ticket HostFunctionFence::hold(Work work) {
  Ticket ticket;
  if (hostFunctionThread) return ticket;
  const Need n = needOf(work);
  waitUntilClear(n);
  ticket.held_ = true;
  ticket.before_ = static_cast<int>(need);
  if (n > need) need = n;
  return ticket;
}

HostFunctionFence::Ticket::~Ticket() {
  if (held_) need = static_cast<Need>(before_);
}

HostFunctionFence::Ticket::Ticket(Ticket&& other) noexcept
    : held_(other.held_), before_(other.before_) {
  other.held_ = false;
}

bool HostFunctionFence::clearToSend() { return clearFor(pending(), need); }

void HostFunctionFence::awaitAgain() { waitUntilClear(need); }

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
