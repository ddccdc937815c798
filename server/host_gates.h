// A session's host-function gates (cuLaunchHostFunc, cuStreamAddCallback): a point in a stream's
// order where the stream stops until the client has run its host function and releases it.
//
// The stream's host work (BackendContext::streamHostWork) calls arrive(): it marks the gate reached
// and blocks that stream only (the emu's stream worker, or the real driver's callback thread),
// never the session's thread. A waiter thread answers the client's hostGateWait once the gate is
// reached; the client's release lets the stream go on. Teardown (the client gone, its context
// destroyed) releases every gate, so no stream and no wait is left blocked.
//
// The release can only arrive through the session's serving thread. When that thread itself waits
// for the device behind a reached gate (a call that drains a stream arrived after the gate opened:
// a client racing its own host function, or a hostile one), nothing could ever release it, and an
// event-loop worker would stay pinned. The session marks the requests its serving thread serves
// (ServingRequest); a reached gate whose serving thread has stayed in one request for
// kSelfDeadlockAfter without using the CPU (so it is waiting, not compiling or copying) breaks:
// the stream goes on, and the client's wait for the gate answers CUDA_ERROR_ILLEGAL_STATE, so the
// host function is reported as not run rather than run out of order. A request that named only
// another context (servingFor) waits for that context's work, which no gate of this one holds:
// such a wait breaks nothing (a context's drains are its own; our libcuda, the cuda backend's
// driver in the chained tests, lets one context's calls go while another's function is pending).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "common/status.h"

namespace gpupool::server {

class HostGates {
 public:
  static constexpr auto kSelfDeadlockAfter = std::chrono::milliseconds(1000);

  HostGates() : core_(std::make_shared<Core>()) {}
  // Releases every gate still open.
  ~HostGates() { releaseAll(); }
  HostGates(const HostGates&) = delete;
  HostGates& operator=(const HostGates&) = delete;

  // Opens gate `id` of `context`; returns the host work to queue on the stream, which blocks that
  // stream at the gate until it is released. CUDA_ERROR_INVALID_VALUE for an id already open.
  Status open(uint64_t context, uint64_t id, std::function<void()>* work);
  // Forgets an opened gate whose work could not be queued.
  void abandon(uint64_t id);
  // CUDA_SUCCESS once the stream reached gate `id` (or it was released), CUDA_ERROR_NOT_READY
  // before, CUDA_ERROR_INVALID_HANDLE for an unknown gate, CUDA_ERROR_ILLEGAL_STATE for a gate
  // broken as a self-deadlock (above). wait() blocks until it is not NOT_READY.
  Status reached(uint64_t context, uint64_t id) const;
  Status wait(uint64_t context, uint64_t id) const;
  // Lets the stream go on past gate `id` and forgets it.
  Status release(uint64_t context, uint64_t id);
  // Releases the gates of `context` (it is being destroyed), or all (the session is ending).
  void releaseContext(uint64_t context);
  void releaseAll();
  size_t openCount() const;
  // Gates broken as self-deadlocks so far (for tests and logs).
  uint64_t brokenCount() const { return core_->broken.load(); }

  // Called as a request finds its context (RequestContext::context): when it is the serving
  // thread's request, it works on `context` (several named: on any).
  void servingFor(uint64_t context);

  // Held by the session's serving thread while it serves one request that carried no bulk (a
  // thread reading a client's bulk is waiting for the client, not for a gate).
  class ServingRequest {
   public:
    explicit ServingRequest(HostGates& gates);
    ~ServingRequest();
    ServingRequest(const ServingRequest&) = delete;
    ServingRequest& operator=(const ServingRequest&) = delete;

   private:
    HostGates& gates_;
  };

 private:
  struct Gate {
    uint64_t context = 0;
    bool reached = false;
    bool released = false;
    bool broken = false;
  };
  // Shared with the queued host work, which may run after this object is gone.
  struct Core {
    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    std::map<uint64_t, std::shared_ptr<Gate>> gates;
    // The request the serving thread serves now: a number that changes with each one (0: none),
    // and that thread's CPU clock.
    std::atomic<uint64_t> serving{0};
    // The context that request named: 0 none yet, kSeveralContexts more than one.
    std::atomic<uint64_t> servingContext{0};
    std::atomic<clockid_t> servingClock{CLOCK_THREAD_CPUTIME_ID};
    std::atomic<uint64_t> servedRequests{0};
    std::atomic<uint64_t> broken{0};
  };
  class SelfDeadlockWatch;
  static constexpr uint64_t kSeveralContexts = ~uint64_t{0};
  static void holdAtGate(Core& core, Gate& gate);
  void releaseIf(bool (*match)(const Gate&, uint64_t), uint64_t context);

  std::shared_ptr<Core> core_;
};

}  // namespace gpupool::server
