#include "host_function_runners.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace gpupool::client {

struct HostFunctionRunners::Placement::Entry {
  enum class Status { kPlacing, kKept, kDropped };
  std::function<void()> run;
  Status status = Status::kPlacing;
};

struct HostFunctionRunners::State {
  std::mutex mutex;
  std::condition_variable settled;
  // A key is here exactly while a thread runs its functions, or is about to start for them.
  std::map<StreamKey, std::deque<std::shared_ptr<Placement::Entry>>> queues;
};

HostFunctionRunners::HostFunctionRunners() : state_(std::make_unique<State>()) {}

HostFunctionRunners& HostFunctionRunners::get() {
  static auto* runners = new HostFunctionRunners();
  return *runners;
}

std::unique_ptr<HostFunctionRunners::Placement> HostFunctionRunners::queue(
    StreamKey key, std::function<void()> run) {
  auto entry = std::make_shared<Placement::Entry>();
  entry->run = std::move(run);
  std::lock_guard lock(state_->mutex);
  auto [slot, fresh] = state_->queues.try_emplace(key);
  slot->second.push_back(entry);
  return std::unique_ptr<Placement>(new Placement(*this, key, std::move(entry), fresh));
}

void HostFunctionRunners::runStream(StreamKey key) {
  using Status = Placement::Entry::Status;
  std::unique_lock lock(state_->mutex);
  for (;;) {
    auto& queue = state_->queues.at(key);
    if (queue.empty()) {
      state_->queues.erase(key);
      return;
    }
    std::shared_ptr<Placement::Entry> next = std::move(queue.front());
    queue.pop_front();
    // Queued as its gate was framed; kept or dropped once the post that carries it returned.
    state_->settled.wait(lock, [&] { return next->status != Status::kPlacing; });
    if (next->status == Status::kDropped) continue;
    lock.unlock();
    next->run();
    next.reset();  // what the function's closure holds goes on this thread, outside the lock
    lock.lock();
  }
}

HostFunctionRunners::Placement::Placement(HostFunctionRunners& runners, StreamKey key,
                                          std::shared_ptr<Entry> entry, bool startRunner)
    : runners_(runners), key_(key), entry_(std::move(entry)), startRunner_(startRunner) {}

HostFunctionRunners::Placement::~Placement() {
  if (!settled_) settle(false);
}

void HostFunctionRunners::Placement::keep() { settle(true); }

void HostFunctionRunners::Placement::settle(bool kept) {
  settled_ = true;
  {
    std::lock_guard lock(runners_.state_->mutex);
    entry_->status = kept ? Entry::Status::kKept : Entry::Status::kDropped;
  }
  runners_.state_->settled.notify_all();
  // The queue's first placement starts its thread, kept or not: later ones on the key rely on it.
  if (startRunner_) {
    HostFunctionRunners* runners = &runners_;
    StreamKey key = key_;
    std::thread([runners, key] { runners->runStream(key); }).detach();
  }
}

}  // namespace gpupool::client
