// ReadinessSet over one io_uring: each watch is a one-shot IORING_OP_POLL_ADD. Submission and
// completion are two rings, each used under a lock of its own, so a worker can watch a descriptor
// again while another waits for completions (leader/followers: one waits in the kernel, the rest
// wait for its lock, and each takes one completion).
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <optional>
#include <system_error>

#include "server/readiness_set.h"
#include "transport/file_descriptor.h"

namespace gpupool::server {
namespace {

// Submission entries; completions get twice as many, and the kernel keeps any overflow.
constexpr unsigned kRingEntries = 4096;

// A watch hands its tag to the worker that takes its completion through the kernel, which
// ThreadSanitizer cannot see (it models epoll's calls, not io_uring's): tell it.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
void handingOver(void* tag) { __tsan_release(tag); }
void takingOver(void* tag) { __tsan_acquire(tag); }
#else
void handingOver(void*) {}
void takingOver(void*) {}
#endif

[[noreturn]] void failWith(int error, const char* what) {
  throw std::system_error(error, std::generic_category(), what);
}

class UringReadinessSet final : public ReadinessSet {
 public:
  UringReadinessSet() : stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (stop_.get() < 0) failWith(errno, "eventfd");
    if (int ret = io_uring_queue_init(kRingEntries, &ring_, 0); ret < 0)
      failWith(-ret, "io_uring_queue_init");
  }
  ~UringReadinessSet() override { io_uring_queue_exit(&ring_); }

  void watch(int fd, void* tag, uint32_t events, bool /*again*/) override { poll(fd, tag, events); }

  // A one-shot poll leaves nothing behind once it completed.
  void forget(int /*fd*/) override {}

  void* next() override {
    std::lock_guard leading(reaping_);
    if (stopped_) return nullptr;
    io_uring_cqe* cqe = nullptr;
    int ret;
    while ((ret = io_uring_wait_cqe(&ring_, &cqe)) == -EINTR) {
    }
    if (ret < 0) failWith(-ret, "io_uring_wait_cqe");
    void* tag = io_uring_cqe_get_data(cqe);
    io_uring_cqe_seen(&ring_, cqe);
    if (tag) takingOver(tag);
    // The stop eventfd: every later caller returns at once (checked above).
    if (!tag) stopped_ = true;
    return tag;
  }

  std::optional<void*> nextIfReady() override {
    // A worker waiting in the kernel (or about to) takes what is ready.
    std::unique_lock leading(reaping_, std::try_to_lock);
    if (!leading) return std::nullopt;
    if (stopped_) return nullptr;
    io_uring_cqe* cqe = nullptr;
    if (io_uring_peek_cqe(&ring_, &cqe) != 0 || !cqe) return std::nullopt;
    void* tag = io_uring_cqe_get_data(cqe);
    io_uring_cqe_seen(&ring_, cqe);
    if (tag) takingOver(tag);
    if (!tag) stopped_ = true;
    return tag;
  }

  void stop() override {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
    poll(stop_.get(), nullptr, POLLIN);
  }

 private:
  void poll(int fd, void* tag, uint32_t events) {
    std::lock_guard submitting(submitting_);
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
      // Full: what is queued goes first.
      io_uring_submit(&ring_);
      sqe = io_uring_get_sqe(&ring_);
      if (!sqe) failWith(EBUSY, "io_uring_get_sqe");
    }
    // EPOLLIN, EPOLLOUT and EPOLLRDHUP have poll(2)'s values.
    io_uring_prep_poll_add(sqe, fd, events & (POLLIN | POLLOUT | POLLRDHUP));
    io_uring_sqe_set_data(sqe, tag);
    if (tag) handingOver(tag);
    if (int ret = io_uring_submit(&ring_); ret < 0) failWith(-ret, "io_uring_submit");
  }

  transport::FileDescriptor stop_;
  io_uring ring_{};
  std::mutex submitting_;  // the submission ring
  std::mutex reaping_;     // the completion ring: held by the worker waiting in the kernel
  bool stopped_ = false;   // under reaping_
};

}  // namespace

std::unique_ptr<ReadinessSet> makeUringReadinessSet() {
  return std::make_unique<UringReadinessSet>();
}

}  // namespace gpupool::server
