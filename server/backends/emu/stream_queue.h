// In-order execution of one emu stream: operations run on a worker thread of their own, one after
// another, so work on different streams runs concurrently and work on one stream keeps its order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gpupool::server::emu {

class StreamQueue {
 public:
  StreamQueue();
  // Runs what is queued, then stops the worker.
  ~StreamQueue();
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  void enqueue(std::function<void()> operation);
  // Blocks until every operation enqueued so far has run.
  void drain();
  bool idle() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gpupool::server::emu
