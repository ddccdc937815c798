#include "server/session_reactor.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <system_error>

namespace gpupool::server {
namespace {

// One-shot (ReadinessSet): after an event the descriptor stays silent until watched again, so one
// worker at a time serves a session. RDHUP: a peer that closed is noticed while the session is
// idle.
constexpr uint32_t kWatchEvents = EPOLLIN | EPOLLRDHUP;

}  // namespace

unsigned SessionReactor::defaultWorkers() {
  return std::clamp(2 * std::max(1u, std::thread::hardware_concurrency()), 8u, 48u);
}

SessionReactor::SessionReactor(unsigned workers, const std::string& eventLoop)
    : ready_(makeReadinessSet(eventLoop)) {
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
  try {
    // The first turn takes the lock after this: what was set up here happened before it.
    std::lock_guard handingOver(w->turn);
    ready_->watch(w->fd, w, kWatchEvents, false);
  } catch (const std::system_error&) {
    std::unique_ptr<Watched> back;  // destroyed outside the lock
    {
      std::lock_guard lock(mutex_);
      auto it = watched_.find(w);
      back = std::move(it->second);
      watched_.erase(it);
    }
    throw;
  }
}

void SessionReactor::work() {
  void* tag = nullptr;
  for (;;) {
    if (!tag) {
      try {
        tag = ready_->next();
      } catch (const std::system_error& e) {
        std::cerr << "gpupoold: a worker's wait failed: " << e.what() << "\n";
        return;
      }
      if (!tag) return;  // stop()
    }
    bool stopped = false;
    tag = turn(static_cast<Watched*>(tag), &stopped);
    if (stopped) return;
  }
}

void* SessionReactor::turn(Watched* w, bool* stopped) {
  // Held until the descriptor is watched again: the worker that takes its next event waits here
  // for this one to finish. One-shot watching already keeps turns apart, but through the kernel,
  // which ThreadSanitizer cannot see.
  std::unique_lock turning(w->turn);
  void* next = nullptr;  // another ready session's tag this turn took: served next
  for (;;) {
    Session::Progress progress = w->session->serveArrived();
    if (progress == Session::Progress::kEnded) break;
    // kMore: frames wait. While no other session is ready, this worker goes on serving: through
    // the readiness set the session would go to whichever worker the kernel wakes, a wakeup (and
    // often a move to another core) every 16 frames, whether the client calls back to back or
    // posts a stream of launches (docs/performance.md, "A posted launch's costs on the server";
    // not a stream posted over RDMA: Session::keepsItsWorker).
    if (progress == Session::Progress::kMore && !next && !*stopped &&
        w->session->keepsItsWorker() && !othersWait(&next, stopped))
      continue;
    // Watched again, frames waiting perhaps already taken into the connection, so readability
    // may not come: the connection makes its descriptor readable (RDMA), or writability (a socket
    // nearly always has room) brings the session back at once. Either way behind the sessions
    // already ready (the one taken above is served first), so a busy one does not starve them.
    uint32_t events = kWatchEvents;
    if (progress == Session::Progress::kMore && !w->session->readyAgain()) events |= EPOLLOUT;
    if (watch(w, events)) return next;
    // It cannot be watched: served once more now, it finds its connection shut and ends.
    w->session->stop();
  }
  turning.unlock();
  drop(w);
  return next;
}

bool SessionReactor::othersWait(void** next, bool* stopped) {
  std::optional<void*> ready;
  try {
    ready = ready_->nextIfReady();
  } catch (const std::system_error& e) {
    // As if others waited: the session goes back to the readiness set, as every busy one did.
    std::cerr << "gpupoold: a worker's look for ready sessions failed: " << e.what() << "\n";
    return true;
  }
  if (!ready) return false;
  *next = *ready;
  *stopped = *ready == nullptr;
  return true;
}

bool SessionReactor::watch(Watched* w, uint32_t events) {
  try {
    // Watching again looks at the descriptor as it is now, so bytes that came since the last read
    // are not missed.
    ready_->watch(w->fd, w, events, true);
    return true;
  } catch (const std::system_error& e) {
    std::cerr << "gpupoold: session " << w->session->id() << " cannot be watched: " << e.what()
              << "\n";
    return false;
  }
}

void SessionReactor::drop(Watched* w) {
  // Before the descriptor can be closed (the session may be destroyed as soon as `ended` ran).
  ready_->forget(w->fd);
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
  ready_->stop();
  for (auto& t : workers_) t.join();
}

}  // namespace gpupool::server
