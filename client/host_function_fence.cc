#include "client/host_function_fence.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

namespace gpupool::client {
namespace {

struct Counts {
  unsigned all = 0;     // host functions placed and not yet returned
  unsigned legacy = 0;  // of them, on the legacy stream
};

struct Pending {
  std::mutex mutex;
  std::condition_variable closed;
  std::map<FenceScope, Counts> byScope;  // under the mutex; scopes with none are erased
  // The totals, changed under the mutex and read without it first, so a process with no host
  // function pending pays one atomic load per call.
  std::atomic<unsigned> all{0};
  std::atomic<unsigned> legacy{0};
};

Pending& pending() {
  static auto* p = new Pending();  // never destroyed: host-function threads may outlive statics
  return *p;
}

// Set when the driver initializes; constant-initialized, so setting it allocates nothing (a
// failed initialization, after which cudart unloads the library, leaves nothing behind).
std::atomic<FenceScope (*)()> scopeSource{nullptr};

thread_local bool hostFunctionThread = false;

// What the tickets this thread holds waited for: nothing, the legacy stream's functions, or all;
// and of which context.
enum class Need { kNothing, kLegacy, kAll };
thread_local Need need = Need::kNothing;
thread_local FenceScope needScope;

Need needOf(HostFunctionFence::Work work) {
  if (work == HostFunctionFence::Work::kNonBlockingStream) return Need::kNothing;
  return work == HostFunctionFence::Work::kBlockingStream ? Need::kLegacy : Need::kAll;
}

// Whether nothing `n` waits for is pending; without the mutex only when the totals say so.
bool clearByTotals(const Pending& p, Need n) {
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

// Under the mutex.
bool clearFor(const Pending& p, Need n, const FenceScope& scope) {
  if (clearByTotals(p, n)) return true;
  if (scope.isAny()) return false;
  auto it = p.byScope.find(scope);
  if (it == p.byScope.end()) return true;
  return n == Need::kLegacy ? it->second.legacy == 0 : it->second.all == 0;
}

void waitUntilClear(Need n, const FenceScope& scope) {
  Pending& p = pending();
  if (clearByTotals(p, n)) return;
  std::unique_lock lock(p.mutex);
  p.closed.wait(lock, [&] { return clearFor(p, n, scope); });
}

}  // namespace

void HostFunctionFence::await(Work work, FenceScope scope) {
  if (hostFunctionThread) return;
  waitUntilClear(needOf(work), scope);
}

HostFunctionFence::Ticket HostFunctionFence::hold(Work work, FenceScope scope) {
  Ticket ticket;
  if (hostFunctionThread) return ticket;
  const Need n = needOf(work);
  waitUntilClear(n, scope);
  ticket.held_ = true;
  ticket.before_ = static_cast<int>(need);
  ticket.beforeScope_ = needScope;
  if (n != Need::kNothing) {
    // Nested tickets for two contexts: the requests framed under both wait for every context.
    if (need != Need::kNothing && needScope != scope) scope = FenceScope::any();
    needScope = scope;
  }
  if (n > need) need = n;
  return ticket;
}

HostFunctionFence::Ticket HostFunctionFence::holdForThread(Work work) {
  // Looking the context up would make the thread's context stack, whose destruction at the end of
  // a detached host-function thread ThreadSanitizer cannot order with glibc's reuse of its TLS.
  if (hostFunctionThread) return Ticket{};
  return hold(work, threadScope());
}

HostFunctionFence::Ticket::~Ticket() {
  if (held_) {
    need = static_cast<Need>(before_);
    needScope = beforeScope_;
  }
}

HostFunctionFence::Ticket::Ticket(Ticket&& other) noexcept
    : held_(other.held_), before_(other.before_), beforeScope_(other.beforeScope_) {
  other.held_ = false;
}

void HostFunctionFence::setThreadScopeSource(FenceScope (*source)()) { scopeSource.store(source); }

FenceScope HostFunctionFence::threadScope() {
  auto* source = scopeSource.load();
  return source ? source() : FenceScope::any();
}

bool HostFunctionFence::clearToSend() {
  Pending& p = pending();
  if (clearByTotals(p, need)) return true;
  std::lock_guard lock(p.mutex);
  return clearFor(p, need, needScope);
}

void HostFunctionFence::awaitAgain() { waitUntilClear(need, needScope); }

void HostFunctionFence::opened(bool legacyStream, FenceScope scope) {
  Pending& p = pending();
  std::lock_guard lock(p.mutex);
  Counts& c = p.byScope[scope];
  ++c.all;
  ++p.all;
  if (legacyStream) {
    ++c.legacy;
    ++p.legacy;
  }
}

void HostFunctionFence::closed(bool legacyStream, FenceScope scope) {
  Pending& p = pending();
  {
    std::lock_guard lock(p.mutex);
    auto it = p.byScope.find(scope);
    if (it != p.byScope.end()) {
      --it->second.all;
      if (legacyStream) --it->second.legacy;
      if (it->second.all == 0) p.byScope.erase(it);
    }
    --p.all;
    if (legacyStream) --p.legacy;
  }
  p.closed.notify_all();
}

void HostFunctionFence::enterHostFunctionThread() { hostFunctionThread = true; }

bool HostFunctionFence::onHostFunctionThread() { return hostFunctionThread; }

}  // namespace gpupool::client
