// gpupoold's event loop (issue 21): a bounded pool of workers that all wait on one readiness set
// (readiness_set.h: epoll or io_uring) holding the descriptor of every connection not executing a
// call. When one turns
// readable, the kernel wakes one worker, which serves the frames that have fully arrived
// (Session::serveArrived) and watches the descriptor again. So an idle connection, or a stranger
// trickling its Hello, costs no thread; a request costs one wakeup, as a thread per connection
// did, with no handoff between threads; and a session busy in a long call holds one worker while
// the others serve everyone else.
//
// For connections whose transport has a readiness descriptor (TCP, TLS and RDMA all have one);
// PoolServer gives a session a thread of its own only where it has none or it cannot be watched.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/readiness_set.h"
#include "server/session.h"

namespace gpupool::server {

class SessionReactor {
 public:
  // Starts `workers` threads, waiting on a ReadinessSet of `eventLoop`'s kind ("epoll" or
  // "io_uring"; makeReadinessSet's errors when it cannot be set up).
  explicit SessionReactor(unsigned workers, const std::string& eventLoop = "epoll");
  // stop()
  ~SessionReactor();
  SessionReactor(const SessionReactor&) = delete;
  SessionReactor& operator=(const SessionReactor&) = delete;

  // Serves `session` from now on; `ended` runs on a worker once the session has ended and left the
  // set. Throws std::system_error when the descriptor cannot be watched.
  void add(std::shared_ptr<Session> session, std::function<void()> ended);
  // Waits until every session added has ended (the caller has shut their connections down), then
  // stops the workers.
  void stop();

  // The workers gpupoold runs when --workers does not say: two per core, 8 to 48.
  static unsigned defaultWorkers();

 private:
  struct Watched {
    std::shared_ptr<Session> session;
    std::function<void()> ended;
    int fd = -1;
    std::mutex turn;  // held for a turn (see turn())
  };
  // A worker: waits for a readable descriptor and serves its session, until stop().
  void work();
  // Serves what has arrived on `w`, then watches it again or drops it. Returns the tag of another
  // ready session it took meanwhile, for this worker to serve next (nullptr: none, or stopped, as
  // `stopped` says).
  void* turn(Watched* w, bool* stopped);
  // After a turn that left frames waiting: false when no other session is ready (go on serving);
  // true when one is, its tag in *next (or *stopped), or when the look failed.
  bool othersWait(void** next, bool* stopped);
  // Watches `w` for `events` again; false (logged) when it cannot be.
  bool watch(Watched* w, uint32_t events);
  void drop(Watched* w);

  std::unique_ptr<ReadinessSet> ready_;
  std::mutex mutex_;
  std::condition_variable emptied_;
  std::unordered_map<Watched*, std::unique_ptr<Watched>> watched_;
  bool stopped_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace gpupool::server
