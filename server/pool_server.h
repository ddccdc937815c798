// gpupoold's core: accepts connections on its listeners and runs one Session per connection on a
// thread of its own, over one shared Backend.
#pragma once

#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "protocol/gpupool.capnp.h"
#include "server/backend.h"
#include "server/module_cache.h"
#include "server/session.h"
#include "transport/connection.h"

namespace gpupool::server {

class PoolServer {
 public:
  PoolServer(std::unique_ptr<Backend> backend, bool verbose);
  ~PoolServer();

  // Serves `listener` until shutdown(). Blocks.
  void serve(std::unique_ptr<transport::Listener> listener);
  // Stops accepting, ends every session, and makes serve() return. Safe from any thread.
  void shutdown();

  void fillStatus(wire::Response::StatusReply::Builder status);
  bool verbose() const { return verbose_; }
  static const char* version();

 private:
  struct Running {
    std::shared_ptr<Session> session;
    std::thread thread;
    bool finished = false;
  };
  void reapFinished();

  std::unique_ptr<Backend> backend_;
  ModuleCache modules_;
  bool verbose_;
  std::chrono::steady_clock::time_point started_;
  std::string listenUrl_;

  std::mutex mutex_;
  std::list<Running> sessions_;
  std::unique_ptr<transport::Listener> listener_;
  bool stopping_ = false;
  uint64_t nextSession_ = 1;
};

}  // namespace gpupool::server
