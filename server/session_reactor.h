// gpupoold's event loop (issue 21): one thread waits (epoll) on the descriptors of every
// connection that is not executing a call; when one turns readable, a worker of a bounded pool
// serves the frames that have fully arrived (Session::serveArrived), then hands the connection back
// to the loop. So an idle connection, or a stranger trickling its Hello, costs no thread, and a
// session busy in a long call holds one worker while the others serve everyone else.
//
// Only for connections whose transport has a readiness descriptor (TCP, TLS); PoolServer gives the
// others (RDMA) a thread each.
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "server/session.h"
#include "transport/file_descriptor.h"

namespace gpupool::server {

class SessionReactor {
 public:
  // `workers` threads run sessions' turns.
  explicit SessionReactor(unsigned workers);
  // stop()
  ~SessionReactor();
  SessionReactor(const SessionReactor&) = delete;
  SessionReactor& operator=(const SessionReactor&) = delete;

  // Serves `session` from now on; `ended` runs on a worker once the session has ended and left the
  // loop. Throws std::system_error when the descriptor cannot be watched.
  void add(std::shared_ptr<Session> session, std::function<void()> ended);
  // Waits until every session added has ended (the caller has shut their connections down), then
  // stops the loop and the workers.
  void stop();
  // Sessions being served.
  size_t sessions() const;

  // The workers gpupoold runs when --workers does not say: two per core, 8 to 48.
  static unsigned defaultWorkers();

 private:
  struct Watched {
    std::shared_ptr<Session> session;
    std::function<void()> ended;
    int fd = -1;
  };
  void loop();
  // On a worker: serves what has arrived on `w`, then watches it again, runs it again, or drops it.
  void turn(Watched* w);
  void watchAgain(Watched* w);
  void drop(Watched* w);

  transport::FileDescriptor epoll_;
  transport::FileDescriptor wake_;  // eventfd: stop() wakes the loop
  const unsigned workerCount_;
  std::atomic<unsigned> busyWorkers_{0};  // running a turn
  boost::asio::thread_pool workers_;
  mutable std::mutex mutex_;
  std::condition_variable emptied_;
  std::unordered_map<Watched*, std::unique_ptr<Watched>> watched_;
  bool stopped_ = false;
  std::thread loop_;
};

}  // namespace gpupool::server
