#include "server/session_reactor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <system_error>

namespace gpupool::server {
namespace {

[[noreturn]] void failSystem(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// One-shot: after an event the descriptor stays silent until watched again, so one worker at a
// time serves a session. RDHUP: a peer that closed is noticed while the session is idle.
constexpr uint32_t kWatchEvents = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;

}  // namespace

unsigned SessionReactor::defaultWorkers() {
  return std::clamp(2 * std::max(1u, std::thread::hardware_concurrency()), 8u, 48u);
}

SessionReactor::SessionReactor(unsigned workers)
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)), stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (epoll_.get() < 0) failSystem("epoll_create1");
  if (stop_.get() < 0) failSystem("eventfd");
  // Level-triggered and never read: once written, it wakes every worker, each on its next wait.
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_.get(), &event) < 0) failSystem("epoll_ctl");
  for (unsigned i = 0; i < std::max(1u, workers); ++i) workers_.emplace_back([this] { work(); });
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
  int added;
  {
    // The first turn takes the lock after this: what was set up here happened before it.
    std::lock_guard handingOver(w->turn);
    added = ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, w->fd, &event);
  }
  if (added < 0) {
    int error = errno;
    std::unique_ptr<Watched> back;  // destroyed outside the lock
    {
      std::lock_guard lock(mutex_);
      auto it = watched_.find(w);
      back = std::move(it->second);
      watched_.erase(it);
    }
    throw std::system_error(error, std::generic_category(), "epoll_ctl");
  }
}

void SessionReactor::work() {
  for (;;) {
    // One event per wait: the kernel wakes one waiting worker per ready descriptor, and each
    // worker takes only what it serves.
    epoll_event event{};
    int n = ::epoll_wait(epoll_.get(), &event, 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::cerr << "gpupoold: a worker's wait failed: " << std::generic_category().message(errno)
                << "\n";
      return;
    }
    if (n == 0) continue;
    auto* w = static_cast<Watched*>(event.data.ptr);
    if (!w) return;  // stop()
    turn(w);
  }
}

void SessionReactor::turn(Watched* w) {
  // Held until the descriptor is watched again: the worker that takes its next event waits here
  // for this one to finish. One-shot watching already keeps turns apart, but through the kernel,
  // which ThreadSanitizer cannot see.
  std::unique_lock turning(w->turn);
  for (;;) {
    Session::Progress progress = w->session->serveArrived();
    if (progress == Session::Progress::kEnded) break;
    // kMore: frames wait, perhaps already taken into the connection, so readability may not come:
    // the connection makes its descriptor readable (RDMA), or writability (a socket nearly always
    // has room) brings the session back at once. Either way behind the sessions already ready, so
    // a busy one does not starve them.
    uint32_t events = kWatchEvents;
    if (progress == Session::Progress::kMore && !w->session->readyAgain()) events |= EPOLLOUT;
    if (watch(w, events)) return;
    // It cannot be watched: served once more now, it finds its connection shut and ends.
    w->session->stop();
  }
  turning.unlock();
  drop(w);
}

bool SessionReactor::watch(Watched* w, uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = w;
  // Watching again looks at the descriptor as it is now, so bytes that came since the last read are
  // not missed.
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, w->fd, &event) == 0) return true;
  std::cerr << "gpupoold: session " << w->session->id()
            << " cannot be watched: " << std::generic_category().message(errno) << "\n";
  return false;
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
  if (::write(stop_.get(), &one, sizeof one) < 0) {
    // Fails only when the counter is full, which means it was written already.
  }
  for (auto& t : workers_) t.join();
}

}  // namespace gpupool::server
