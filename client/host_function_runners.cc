#include "host_function_runners.h"

#include <chrono>
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

namespace {

// How long a stream's thread waits for its next function once it has none: a program placing one
// host function per step (a launch, a function, a synchronize) keeps one thread, not one a step.
constexpr auto kLinger = std::chrono::milliseconds(100);

}  // namespace

struct HostFunctionRunners::State {
  struct Stream {
    std::deque<std::shared_ptr<Placement::Entry>> queue;
    std::condition_variable changed;  // a placement queued here was kept or dropped
  };
  std::mutex mutex;
  // A key is here exactly while a thread runs its functions, or is about to start for them.
  std::map<StreamKey, Stream> streams;
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
  auto [slot, fresh] = state_->streams.try_emplace(key);
  slot->second.queue.push_back(entry);
  return std::unique_ptr<Placement>(new Placement(*this, key, std::move(entry), fresh));
}

void HostFunctionRunners::runStream(StreamKey key) {
  using Status = Placement::Entry::Status;
  std::unique_lock lock(state_->mutex);
  State::Stream& stream = state_->streams.at(key);  // stays until this thread erases it
  for (;;) {
    if (!stream.changed.wait_for(lock, kLinger, [&] { return !stream.queue.empty(); })) {
      state_->streams.erase(key);
      return;
    }
    std::shared_ptr<Placement::Entry> next = std::move(stream.queue.front());
    stream.queue.pop_front();
    // Queued as its gate was framed; kept or dropped once the post that carries it returned.
    stream.changed.wait(lock, [&] { return next->status != Status::kPlacing; });
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
    // Notified under the lock: the stream's thread may erase its entry once the lock is free.
    std::lock_guard lock(runners_.state_->mutex);
    entry_->status = kept ? Entry::Status::kKept : Entry::Status::kDropped;
    runners_.state_->streams.at(key_).changed.notify_one();
  }
  // The queue's first placement starts its thread, kept or not: later ones on the key rely on it.
  if (startRunner_) {
    HostFunctionRunners* runners = &runners_;
    StreamKey key = key_;
    std::thread([runners, key] { runners->runStream(key); }).detach();
  }
}

}  // namespace gpupool::client
