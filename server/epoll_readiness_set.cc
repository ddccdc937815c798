// ReadinessSet over one epoll set: EPOLLONESHOT watches, and a level-triggered stop eventfd that,
// never read, wakes every waiter.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <system_error>

#include "server/readiness_set.h"
#include "transport/file_descriptor.h"

namespace gpupool::server {
namespace {

[[noreturn]] void failSystem(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

class EpollReadinessSet final : public ReadinessSet {
 public:
  EpollReadinessSet()
      : epoll_(::epoll_create1(EPOLL_CLOEXEC)), stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (epoll_.get() < 0) failSystem("epoll_create1");
    if (stop_.get() < 0) failSystem("eventfd");
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = nullptr;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_.get(), &event) < 0) failSystem("epoll_ctl");
  }

  void watch(int fd, void* tag, uint32_t events, bool again) override {
    epoll_event event{};
    event.events = events | EPOLLONESHOT;
    event.data.ptr = tag;
    // Watching again looks at the descriptor as it is now, so what came meanwhile is not missed.
    if (::epoll_ctl(epoll_.get(), again ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &event) < 0)
      failSystem("epoll_ctl");
  }

  void forget(int fd) override { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

  void* next() override {
    for (;;) {
      if (std::optional<void*> tag = takeOne(-1)) return *tag;
    }
  }

  std::optional<void*> nextIfReady() override { return takeOne(0); }

  void stop() override {
    uint64_t one = 1;
    // Fails only when the counter is full, which means it was written already.
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
  }

 private:
  // One event per wait (the kernel wakes one waiting worker per ready descriptor): its tag, or
  // nothing when `timeoutMs` passed or a signal came first.
  std::optional<void*> takeOne(int timeoutMs) {
    epoll_event event{};
    int n = ::epoll_wait(epoll_.get(), &event, 1, timeoutMs);
    if (n < 0 && errno != EINTR) failSystem("epoll_wait");
    if (n != 1) return std::nullopt;
    void* tag = event.data.ptr;
    return tag;
  }

  transport::FileDescriptor epoll_;
  transport::FileDescriptor stop_;
};

}  // namespace

std::unique_ptr<ReadinessSet> makeEpollReadinessSet() {
  return std::make_unique<EpollReadinessSet>();
}

}  // namespace gpupool::server
