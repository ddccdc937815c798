// A session's host-function gates (cuLaunchHostFunc, cuStreamAddCallback): a point in a stream's
// order where the stream stops until the client has run its host function and releases it.
//
// The stream's host work (BackendContext::streamHostWork) calls arrive(): it marks the gate reached
// and blocks that stream only (the emu's stream worker, or the real driver's callback thread),
// never the session's thread. A waiter thread answers the client's hostGateWait once the gate is
// reached; the client's release lets the stream go on. Teardown (the client gone, its context
// destroyed) releases every gate, so no stream and no wait is left blocked.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "common/status.h"

namespace gpupool::server {

class HostGates {
 public:
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
  // before, CUDA_ERROR_INVALID_HANDLE for an unknown gate. wait() blocks until it is not NOT_READY.
  Status reached(uint64_t context, uint64_t id) const;
  Status wait(uint64_t context, uint64_t id) const;
  // Lets the stream go on past gate `id` and forgets it.
  Status release(uint64_t context, uint64_t id);
  // Releases the gates of `context` (it is being destroyed), or all (the session is ending).
  void releaseContext(uint64_t context);
  void releaseAll();
  size_t openCount() const;

 private:
  struct Gate {
    uint64_t context = 0;
    bool reached = false;
    bool released = false;
  };
  // Shared with the queued host work, which may run after this object is gone.
  struct Core {
    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    std::map<uint64_t, std::shared_ptr<Gate>> gates;
  };
  void releaseIf(bool (*match)(const Gate&, uint64_t), uint64_t context);

  std::shared_ptr<Core> core_;
};

}  // namespace gpupool::server
