#include "server/device_waits.h"

#include <vector>

namespace gpupool::server {

DeviceWaits::~DeviceWaits() {
  finishAll();
  std::list<Worker> workers;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    workers.swap(workers_);
  }
  ready_.notify_all();
  for (auto& w : workers) w.thread.join();
}

bool DeviceWaits::start(std::function<void()> wait, std::function<void()> then) {
  std::unique_lock lock(mutex_);
  if (running_ + queue_.size() >= maxThreads_) return false;
  queue_.push_back(Job{std::move(wait), std::move(then)});
  // An idle thread, or one finishing (its device wait is over), takes it soon.
  if (idle_ + finishing_ >= queue_.size()) {
    ready_.notify_one();
    return true;
  }
  reapExited(lock);
  workers_.emplace_back();
  Worker& worker = workers_.back();
  worker.thread = std::thread([this, &worker] { work(worker); });
  return true;
}

unsigned DeviceWaits::busy() const {
  std::lock_guard lock(mutex_);
  return running_ + static_cast<unsigned>(queue_.size());
}

unsigned DeviceWaits::threads() const {
  std::lock_guard lock(mutex_);
  unsigned n = 0;
  for (const auto& w : workers_) n += w.exited ? 0 : 1;
  return n;
}

void DeviceWaits::finishAll() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return running_ == 0 && queue_.empty(); });
  reapExited(lock);
}

void DeviceWaits::reapExited(std::unique_lock<std::mutex>& lock) {
  std::vector<std::thread> done;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->exited) {
      done.push_back(std::move(it->thread));
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  lock.unlock();
  for (auto& t : done) t.join();  // each has left work() already: returns at once
  lock.lock();
}

void DeviceWaits::work(Worker& self) {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    bool woken = ready_.wait_for(lock, idleExit_, [&] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (!woken || stopping_) break;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    job.wait();
    lock.lock();
    if (job.then) {
      ++finishing_;
      lock.unlock();
      job.then();
      lock.lock();
      --finishing_;
    }
    --running_;
    drained_.notify_all();
  }
  self.exited = true;
}

}  // namespace gpupool::server
