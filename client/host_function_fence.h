// Holds back the work that could stop the server's session thread at a pending host function's
// gate (server/host_gates.h), until that host function has returned.
//
// The gate's release reaches the server through the session's thread. A synchronous call, or work
// that the legacy-stream rules make the server order on that thread (work on the legacy stream
// while any gate is pending; work on a blocking stream while a gate is pending on the legacy
// stream), could block that thread behind the gate, and the release would never be read. So such
// work waits here, on the caller's thread, for the pending host functions instead: order holds,
// and nothing the gate needs waits behind it. The host-function threads themselves pass freely.
//
// The wait alone would leave a race: thread B passes it, thread A then places a host function, and
// A's gate reaches the server before B's call. So a call, and the frees, copies and unloads that
// wait here before they post, hold a Ticket while they build and send their request: the session
// checks the ticket's wait again where it frames the request (clearToSend, under the lock that
// orders requests on the wire), while the gate's own request counts the function as placed under
// that same lock (opened, from its build): one of the two is first on the wire.
#pragma once

#include <compare>
#include <cstdint>

namespace gpupool::client {

// Whose host functions a wait is for. The server's gate holds only its own context's streams (a
// free or an unload drains that context, not the device), so a call for one context waits only
// for that context's pending functions: inside gpupoold, where our library is the cuda backend's
// driver for many programs at once, one program's functions must not hold every other program's
// calls (tests/e2e/chained_backend_test.cc). A scope is a context of one server (its id there; 0
// for one not made there yet, which has no functions), or every context (any()).
struct FenceScope {
  const void* server = nullptr;
  uint64_t context = 0;
  static FenceScope any() { return {}; }
  bool isAny() const { return server == nullptr; }
  auto operator<=>(const FenceScope&) const = default;
};

class HostFunctionFence {
 public:
  enum class Work { kCall, kLegacyStream, kBlockingStream, kNonBlockingStream };

  // Blocks until `work` for `scope` may go to the server (at once on a host-function thread).
  static void await(Work work, FenceScope scope);

  // await(), then, while the ticket lives, the requests this thread frames are checked again
  // (clearToSend). Tickets nest (two of different scopes wait for every scope); an empty one
  // (Ticket{}) checks nothing.
  class [[nodiscard]] Ticket {
   public:
    Ticket() = default;
    ~Ticket();
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&&) = delete;

   private:
    friend class HostFunctionFence;
    bool held_ = false;
    int before_ = 0;          // the thread's requirement before this ticket
    FenceScope beforeScope_;  // and its scope
  };
  static Ticket hold(Work work, FenceScope scope);
  // hold() for the calling thread's current context (threadScope()); a host-function thread,
  // which passes freely, does not look its context up.
  static Ticket holdForThread(Work work);

  // The scope of a call whose request does not say (RemoteSession::call): the calling thread's
  // current context, as the driver state knows it; every context until one is set.
  static void setThreadScopeSource(FenceScope (*source)());
  static FenceScope threadScope();

  // For the session, under its framing lock: whether this thread's request may go out now (what
  // its tickets waited for is still clear). awaitAgain() blocks, without that lock, until it may.
  static bool clearToSend();
  static void awaitAgain();
  // A host function was placed in stream order on a stream of `scope`'s context (on its legacy
  // stream or another; called while its gate's request is framed), or has returned.
  static void opened(bool legacyStream, FenceScope scope);
  static void closed(bool legacyStream, FenceScope scope);
  // Marks the calling thread as a host-function thread for its lifetime.
  static void enterHostFunctionThread();
  static bool onHostFunctionThread();
};

}  // namespace gpupool::client
