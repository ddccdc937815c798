#include "server/backends/emu/stream_queue.h"

#include <pthread.h>

namespace gpupool::server::emu {

StreamQueue::StreamQueue() : worker_([this] { run(); }) {}

StreamQueue::~StreamQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void StreamQueue::enqueue(std::function<void()> operation, const std::atomic<bool>* skipIfSet) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(Operation{std::move(operation), skipIfSet});
  }
  wake_.notify_one();
}

void StreamQueue::drain() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

bool StreamQueue::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && !busy_;
}

void StreamQueue::run() {
  // Named, so operators (top -H) and tests tell the emulated device's queues from the server's own
  // threads.
  pthread_setname_np(pthread_self(), "emu-stream");
  std::unique_lock lock(mutex_);
  std::deque<Operation> batch;
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and nothing left
    // Everything queued so far, under one acquisition: a burst of posted launches then costs the
    // enqueuing worker no wait for this lock per operation.
    batch.swap(queue_);
    busy_ = true;
    lock.unlock();
    for (auto& operation : batch) {
      if (!operation.skipIfSet || !operation.skipIfSet->load(std::memory_order_acquire))
        operation.run();
      operation.run = nullptr;  // what it holds goes now, as when operations were taken one by one
    }
    batch.clear();
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace gpupool::server::emu
