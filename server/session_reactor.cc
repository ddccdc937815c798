#include "server/session_reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <iostream>
#include <system_error>

namespace gpupool::server {
namespace {

[[noreturn]] void failSystem(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// One-shot: after an event the descriptor stays silent until watchAgain, so one worker at a time
// serves a session. RDHUP: a peer that closed is noticed while the session is idle.
constexpr uint32_t kWatchEvents = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;

// How long a worker that has just answered a session waits for the session's next request.
constexpr std::chrono::microseconds kLinger{200};

}  // namespace

unsigned SessionReactor::defaultWorkers() {
  return std::clamp(2 * std::max(1u, std::thread::hardware_concurrency()), 8u, 48u);
}

SessionReactor::SessionReactor(unsigned workers)
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      workerCount_(std::max(1u, workers)),
      workers_(workerCount_) {
  if (epoll_.get() < 0) failSystem("epoll_create1");
  if (wake_.get() < 0) failSystem("eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;  // the wake descriptor
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &event) < 0) failSystem("epoll_ctl");
  loop_ = std::thread([this] { loop(); });
}

SessionReactor::~SessionReactor() { stop(); }

void SessionReactor::add(std::shared_ptr<Session> session, std::function<void()> ended) {
  auto owned = std::make_unique<Watched>();
  Watched* w = owned.get();
  w->fd = session->readinessDescriptor();
  w->session = std::move(session);
  w->ended = std::move(ended);
  {
    std::lock_guard lock(mutex_);
    watched_.emplace(w, std::move(owned));
  }
  epoll_event event{};
  event.events = kWatchEvents;
  event.data.ptr = w;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, w->fd, &event) < 0) {
    int error = errno;
    std::unique_ptr<Watched> back;
    {
      std::lock_guard lock(mutex_);
      auto it = watched_.find(w);
      back = std::move(it->second);
      watched_.erase(it);
    }
    throw std::system_error(error, std::generic_category(), "epoll_ctl");
  }
}

size_t SessionReactor::sessions() const {
  std::lock_guard lock(mutex_);
  return watched_.size();
}

void SessionReactor::loop() {
  epoll_event events[256];
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::cerr << "gpupoold: event loop failed: " << std::generic_category().message(errno)
                << "\n";
      return;
    }
    for (int i = 0; i < n; ++i) {
      auto* w = static_cast<Watched*>(events[i].data.ptr);
      if (!w) return;  // stop()
      boost::asio::post(workers_, [this, w] { turn(w); });
    }
  }
}

void SessionReactor::turn(Watched* w) {
  // A turn lingers for its client's next request only while another worker is free for the rest.
  unsigned busy = ++busyWorkers_;
  struct Done {
    std::atomic<unsigned>& busy;
    ~Done() { --busy; }
  } done{busyWorkers_};
  auto linger = busy < workerCount_ ? kLinger : std::chrono::microseconds(0);
  switch (w->session->serveArrived(linger)) {
    case Session::Progress::kIdle:
      watchAgain(w);
      return;
    case Session::Progress::kMore:
      // Behind the sessions already waiting for a worker, so a busy one does not starve them.
      boost::asio::post(workers_, [this, w] { turn(w); });
      return;
    case Session::Progress::kEnded:
      drop(w);
      return;
  }
}

void SessionReactor::watchAgain(Watched* w) {
  epoll_event event{};
  event.events = kWatchEvents;
  event.data.ptr = w;
  // Watching again looks at the descriptor as it is now, so bytes that came since the last read are
  // not missed.
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, w->fd, &event) == 0) return;
  std::cerr << "gpupoold: session " << w->session->id()
            << " cannot be watched: " << std::generic_category().message(errno) << "\n";
  w->session->stop();
  // Served once more, it finds the connection shut and ends.
  boost::asio::post(workers_, [this, w] { turn(w); });
}

void SessionReactor::drop(Watched* w) {
  // Before the descriptor can be closed (the session may be destroyed as soon as `ended` ran).
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, w->fd, nullptr);
  std::unique_ptr<Watched> done;
  {
    std::lock_guard lock(mutex_);
    auto it = watched_.find(w);
    done = std::move(it->second);
    watched_.erase(it);
  }
  done->ended();
  done.reset();
  std::lock_guard lock(mutex_);
  if (watched_.empty()) emptied_.notify_all();
}

void SessionReactor::stop() {
  {
    std::unique_lock lock(mutex_);
    if (stopped_) return;
    emptied_.wait(lock, [&] { return watched_.empty(); });
    stopped_ = true;
  }
  uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof one) < 0) {
    // An eventfd write fails only when its counter is full, which then wakes the loop anyway.
  }
  if (loop_.joinable()) loop_.join();
  workers_.join();
}

}  // namespace gpupool::server
