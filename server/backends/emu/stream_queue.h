// In-order execution of one emu stream: operations run on a worker thread of their own, one after
// another, so work on different streams runs concurrently and work on one stream keeps its order.
#pragma once

#include <atomic>
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

  // `skipIfSet`, when given, is read just before the operation would run: set, it does not run
  // (a broken context runs nothing more). A flag rather than a wrapping lambda: a posted launch
  // then costs one allocation fewer.
  void enqueue(std::function<void()> operation, const std::atomic<bool>* skipIfSet = nullptr);
  // Blocks until every operation enqueued so far has run.
  void drain();
  bool idle() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  struct Operation {
    std::function<void()> run;
    const std::atomic<bool>* skipIfSet;
  };
  std::deque<Operation> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gpupool::server::emu
