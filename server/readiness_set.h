// What SessionReactor waits on: a set of descriptors, each watched one-shot, that any number of
// worker threads wait on at once, each woken for one ready descriptor. Two mechanisms behind one
// contract, chosen with gpupoold --event-loop: epoll (the default: EPOLLONESHOT on one epoll set)
// and io_uring (a one-shot IORING_OP_POLL_ADD per watch on one ring). docs/hardening.md has the
// measured comparison.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpupool::server {

class ReadinessSet {
 public:
  virtual ~ReadinessSet() = default;
  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT, EPOLLRDHUP) once: the next ready event is handed
  // to one next() caller as `tag`, and then the descriptor is silent until watched again. The
  // first watch of a descriptor has `again` false. Throws std::system_error where it cannot.
  virtual void watch(int fd, void* tag, uint32_t events, bool again) = 0;
  // Stops watching `fd` (it is not watched now: its event came and it was not watched again), so
  // it may be closed.
  virtual void forget(int fd) = 0;
  // Blocks until a watched descriptor is ready and returns its tag; nullptr once stop() was called
  // (to every caller from then on).
  virtual void* next() = 0;
  // next() without blocking: the tag of a descriptor ready now (nullptr once stop() was called),
  // or nothing when none is, or when a next() caller already waits and will take it.
  virtual std::optional<void*> nextIfReady() = 0;
  virtual void stop() = 0;
};

// `kind` is "epoll" or "io_uring". Throws std::system_error when the mechanism cannot be set up
// here (io_uring disabled by the kernel or a seccomp filter, say), std::invalid_argument for
// another name.
std::unique_ptr<ReadinessSet> makeReadinessSet(const std::string& kind);

}  // namespace gpupool::server
