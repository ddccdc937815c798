// listenOnBoth (transport_factory.h): one Listener over two, each accepting on a thread of its own.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <variant>

#include "transport/transport_factory.h"

namespace gpupool::transport {
namespace {

class DualListener final : public Listener {
 public:
  DualListener(std::unique_ptr<Listener> first, std::unique_ptr<Listener> second) {
    listeners_[0] = std::move(first);
    listeners_[1] = std::move(second);
    // Each listener blocks in its own accept(); a thread per listener is the simplest way to wait
    // on both without knowing how either one waits.
    for (auto& l : listeners_) threads_.emplace_back([this, listener = l.get()] { run(listener); });
  }

  ~DualListener() override {
    shutdown();
    for (auto& t : threads_) t.join();
  }

  std::unique_ptr<Connection> accept() override {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
    if (stopped_) throw TransportError(TransportError::Kind::kDisconnected, "listener shut down");
    auto item = std::move(queue_.front());
    queue_.pop_front();
    if (auto* error = std::get_if<TransportError>(&item)) throw *error;
    return std::move(std::get<std::unique_ptr<Connection>>(item));
  }

  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    for (auto& l : listeners_) l->shutdown();
    ready_.notify_all();
  }

  std::string url() const override { return listeners_[0]->url(); }

 private:
  void run(Listener* listener) {
    for (;;) {
      std::variant<std::unique_ptr<Connection>, TransportError> item;
      try {
        item = listener->accept();
      } catch (const TransportError& e) {
        item = e;
      }
      bool failed = std::holds_alternative<TransportError>(item);
      {
        std::lock_guard lock(mutex_);
        if (stopped_) return;
        queue_.push_back(std::move(item));
        ready_.notify_one();
      }
      // A listener that keeps failing (e.g. out of descriptors) must not spin.
      if (failed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::unique_ptr<Listener> listeners_[2];
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::variant<std::unique_ptr<Connection>, TransportError>> queue_;
  bool stopped_ = false;
};

}  // namespace

std::unique_ptr<Listener> listenOnBoth(std::unique_ptr<Listener> first,
                                       std::unique_ptr<Listener> second) {
  return std::make_unique<DualListener>(std::move(first), std::move(second));
}

}  // namespace gpupool::transport
