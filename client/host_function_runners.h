// The client threads that run host functions (cuLaunchHostFunc, cuStreamAddCallback): one per
// stream with functions pending, not one per function. A stream's thread waits a moment (100 ms)
// for its next function before it goes, so a function placed every step reuses it.
//
// A stream's functions can only run one after another: each one's gate comes after the one before
// it in the stream, and the stream reaches a gate only once the gate before it is released. So one
// thread per stream runs them all, in the order their gates went on the wire, and functions on
// different streams still never wait for each other (one stream may wait, through an event, for
// work after another's function). A burst of functions on one stream then costs one thread and
// one outstanding gate wait on the server, not one of each per function.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace gpupool::client {

class HostFunctionRunners {
 public:
  // A stream of one context of one server: the functions of one key run in order, on one thread.
  struct StreamKey {
    const void* server = nullptr;
    uint64_t context = 0;  // remote
    uint64_t stream = 0;   // remote; 0 for the legacy default stream
    auto operator<=>(const StreamKey&) const = default;
  };
  class Placement;

  // The process's runners; never destroyed (their threads may outlive static destructors).
  static HostFunctionRunners& get();

  // Queues `run` behind `key`'s earlier functions. Call it where the function's gate is framed,
  // under the lock that orders requests on the wire, so the queue's order is the stream's. The
  // function runs only once the placement is kept, and never when it is dropped (its gate did not
  // reach the server). Dropping the placement unkept drops it.
  std::unique_ptr<Placement> queue(StreamKey key, std::function<void()> run);

  class Placement {
   public:
    ~Placement();
    Placement(const Placement&) = delete;
    Placement& operator=(const Placement&) = delete;
    // The gate went out: the function runs in turn (a thread for its stream starts if none runs).
    void keep();

   private:
    friend class HostFunctionRunners;
    struct Entry;
    Placement(HostFunctionRunners& runners, StreamKey key, std::shared_ptr<Entry> entry,
              bool startRunner);
    void settle(bool kept);
    HostFunctionRunners& runners_;
    StreamKey key_;
    std::shared_ptr<Entry> entry_;
    bool startRunner_;
    bool settled_ = false;
  };

 private:
  struct State;
  HostFunctionRunners();
  void runStream(StreamKey key);
  std::unique_ptr<State> state_;
};

}  // namespace gpupool::client
