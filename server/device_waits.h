// The threads a session runs its device waits on (a RequestTable row's `waitFor` step),
// so the session's own thread keeps serving the client's other calls while the device works.
//
// A thread is started only when every existing one is busy, and one idle for kIdleExit leaves, so
// a session that is not waiting for its device holds no waiter thread at all.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace gpupool::server {

class DeviceWaits {
 public:
  static constexpr auto kIdleExit = std::chrono::seconds(5);

  // At most `maxThreads` waits run at once; a thread idle for `idleExit` leaves.
  explicit DeviceWaits(unsigned maxThreads,
                       std::chrono::milliseconds idleExit = std::chrono::milliseconds(kIdleExit))
      : maxThreads_(maxThreads), idleExit_(idleExit) {}
  // Waits for every running wait (the owner first makes them return: BackendContext::cancel).
  ~DeviceWaits();
  DeviceWaits(const DeviceWaits&) = delete;
  DeviceWaits& operator=(const DeviceWaits&) = delete;

  // Runs `wait` on a waiter thread; false (running nothing) when maxThreads waits already run.
  bool start(std::function<void()> wait) { return start(std::move(wait), {}); }
  // The same, then runs `then` (answering the wait) on the same thread. A thread in `then` takes
  // the next wait queued instead of a new thread starting for it: a client waiting for one
  // stream after another would otherwise leave a thread behind each time its next wait came in
  // while the previous answer was still on its way out.
  bool start(std::function<void()> wait, std::function<void()> then);
  // Waits running or about to.
  unsigned busy() const;
  // Blocks until no wait runs; then reaps the threads that have left.
  void finishAll();
  // Waiter threads that exist now, busy or idle (for tests and status).
  unsigned threads() const;

 private:
  struct Worker {
    std::thread thread;
    bool exited = false;
  };
  void work(Worker& self);
  void reapExited(std::unique_lock<std::mutex>& lock);

  const unsigned maxThreads_;
  const std::chrono::milliseconds idleExit_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;    // a wait was queued, or stopping
  std::condition_variable drained_;  // a wait finished
  struct Job {
    std::function<void()> wait, then;
  };
  std::deque<Job> queue_;
  std::list<Worker> workers_;
  unsigned idle_ = 0;
  unsigned running_ = 0;
  unsigned finishing_ = 0;  // running, past their wait (in `then`)
  bool stopping_ = false;
};

}  // namespace gpupool::server
