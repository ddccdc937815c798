#include "transport/shm_ring.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "transport/connection.h"

namespace gpupool::transport {
namespace {

using std::chrono::nanoseconds;
using std::chrono::steady_clock;

// A sleeper wakes at least this often to look at its shutdown flag, deadline and peer: a peer
// process that dies cannot wake a futex.
constexpr long kSleepSliceNs = 50'000'000;
constexpr nanoseconds kMinSpin{1'000};
constexpr nanoseconds kMaxSpin{50'000};

uint32_t load(uint32_t& word) { return std::atomic_ref<uint32_t>(word).load(); }
void store(uint32_t& word, uint32_t value) { std::atomic_ref<uint32_t>(word).store(value); }

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// This thread's core plus one, as ShmRingCount::moverCpu holds it.
uint32_t currentCpu() {
  int cpu = ::sched_getcpu();
  return cpu < 0 ? 0 : static_cast<uint32_t>(cpu) + 1;
}

// Whether the side that moves `count` last did so from this thread's core. Spinning for it there
// holds it back: measured with both pinned to one core, a round trip took 38 us spinning (2.4 us
// on two cores), since each side spins through its time slice while the other cannot run.
bool moverSharesThisCore(const ShmRingCount& count) {
  uint32_t mover = std::atomic_ref<const uint32_t>(count.moverCpu).load(std::memory_order_relaxed);
  return mover != 0 && mover == currentCpu();
}

// Not FUTEX_PRIVATE: the word lies in a mapping shared with another process.
void futexWait(uint32_t* word, uint32_t seen) {
  timespec slice{0, kSleepSliceNs};
  ::syscall(SYS_futex, word, FUTEX_WAIT, seen, &slice, nullptr, 0);
}

void futexWake(uint32_t* word) {
  ::syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

uintptr_t pageBytes() {
  static const auto bytes = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return bytes;
}

// Gives back the whole pages within [begin, end) (a page partly outside is kept). Returns the
// bytes given back; 0 where the kernel refused (the file system cannot punch holes), which only
// costs memory.
size_t removeWholePages(std::byte* begin, std::byte* end) {
  const uintptr_t page = pageBytes();
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) & ~(page - 1);
  const uintptr_t last = reinterpret_cast<uintptr_t>(end) & ~(page - 1);
  if (last <= first) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_REMOVE) != 0) return 0;
  return last - first;
}

[[noreturn]] void corrupt(const std::string& what) {
  throw TransportError(TransportError::Kind::kMalformed, "shared-memory ring corrupt: " + what);
}

}  // namespace

uint32_t ShmRingEnd::peerHead() {
  uint32_t head = load(control_->head.value);
  if (static_cast<uint32_t>(head - tail_) > size_)
    corrupt("head " + std::to_string(head) + " is not within the ring from tail " +
            std::to_string(tail_));
  return head;
}

uint32_t ShmRingEnd::peerTail() {
  uint32_t tail = load(control_->tail.value);
  if (static_cast<uint32_t>(head_ - tail) > size_)
    corrupt("tail " + std::to_string(tail) + " is not within the ring behind head " +
            std::to_string(head_));
  return tail;
}

uint32_t ShmRingEnd::readable() { return peerHead() - tail_; }

void ShmRingEnd::wakePeer(ShmRingCount& count, ShmWaitHooks& hooks) {
  // Seq-cst on both sides (count stored, then `waiting` read here; `waiting` stored, then the
  // count read by the sleeper): one of the two always sees the other, so no wakeup is lost.
  std::atomic_ref<uint32_t> waiting(count.waiting);
  if (waiting.load() == kShmAwake) return;
  switch (waiting.exchange(kShmAwake)) {
    case kShmFutex:
      futexWake(&count.value);
      break;
    case kShmDoorbell:
      hooks.ringDoorbell();
      break;
    default:
      break;  // a hostile value asks for nothing
  }
}

bool ShmRingEnd::pollReadable(nanoseconds max) {
  // Resting after a run of misses, the rhythm spins only now and then, to find out whether the
  // client has started calling back to back again.
  if (!pollRhythm_.spinThisTurn()) return false;
  if (moverSharesThisCore(control_->head)) return false;
  std::atomic_ref<uint32_t> waiting(control_->head.waiting);
  if (waiting.load() == kShmDoorbell) waiting.store(kShmAwake);
  const auto start = steady_clock::now();
  do {
    for (int i = 0; i < 64; ++i) {
      if (readable() != 0) {
        pollRhythm_.caught();
        return true;
      }
      cpuRelax();
    }
  } while (steady_clock::now() - start < max);
  pollRhythm_.missed();
  return false;
}

void ShmRingEnd::wakeAll() {
  futexWake(&control_->head.value);
  futexWake(&control_->tail.value);
}

size_t ShmRingEnd::giveBackUnusedPages() {
  if (!mayGiveBack()) return 0;
  // The consumer reads only [tail, head), and its tail only grows: every byte from head round to
  // the tail read here is free, whatever it reads meanwhile.
  const uint32_t unread = head_ - peerTail();
  writtenSinceGiveBack_ = false;
  keptUnread_ = unread != 0;
  // All of it at once: split at head, the page holding head would be kept by both halves.
  if (unread == 0) return removeWholePages(data_, data_ + size_);
  const uint32_t from = head_ & (size_ - 1);
  const uint32_t free = size_ - unread;
  const uint32_t run = std::min(free, size_ - from);
  return removeWholePages(data_ + from, data_ + from + run) +
         removeWholePages(data_, data_ + (free - run));
}

void ShmRingEnd::askProducerToGiveBack() { store(control_->tail.giveBack, 1); }

bool ShmRingEnd::consumerAskedToGiveBack() {
  std::atomic_ref<uint32_t> asked(control_->tail.giveBack);
  return asked.load(std::memory_order_relaxed) != 0 && asked.exchange(0) != 0;
}

size_t ShmRingEnd::residentBytes() const {
  const uintptr_t page = pageBytes();
  const uintptr_t first = reinterpret_cast<uintptr_t>(data_) & ~(page - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(data_) + size_ + page - 1) & ~(page - 1);
  std::vector<unsigned char> pages((last - first) / page);
  if (::mincore(reinterpret_cast<void*>(first), last - first, pages.data()) != 0) return 0;
  return page * static_cast<size_t>(std::count_if(pages.begin(), pages.end(),
                                                  [](unsigned char p) { return p & 1; }));
}

namespace {

// Spins for up to `spin`, then sleeps on `count` in slices until `ready()`. Adapts `spin` to how
// long waits take: a wait that ended within kMaxSpin would have been caught by spinning a little
// longer, so the next spin covers it; a longer one shortens the spin, since the sleep came anyway.
template <class Ready>
void waitUntil(Ready ready, ShmRingCount& count, nanoseconds& spin, ShmWaitHooks& hooks) {
  auto start = steady_clock::now();
  if (!moverSharesThisCore(count)) {
    do {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return;
        cpuRelax();
      }
    } while (steady_clock::now() - start < spin);
  }
  std::atomic_ref<uint32_t> waiting(count.waiting);
  for (;;) {
    waiting.store(kShmFutex);
    uint32_t seen = load(count.value);
    if (ready()) break;
    futexWait(&count.value, seen);
    if (ready()) break;
    hooks.checkWhileWaiting();
  }
  waiting.store(kShmAwake);
  auto took = steady_clock::now() - start;
  spin = took < kMaxSpin
             ? std::clamp(std::chrono::duration_cast<nanoseconds>(took * 3 / 2), kMinSpin, kMaxSpin)
             : std::max(kMinSpin, spin / 2);
}

}  // namespace

void ShmRingEnd::write(std::span<const ConstBuffer> parts, ShmWaitHooks& hooks) {
  size_t part = 0, offset = 0;  // the next byte to copy in
  auto skipDone = [&] {
    while (part < parts.size() && offset == parts[part].size) {
      ++part;
      offset = 0;
    }
  };
  skipDone();
  while (part < parts.size()) {
    uint32_t room = size_ - (head_ - peerTail());
    if (room == 0) {
      waitUntil([&] { return (room = size_ - (head_ - peerTail())) != 0; }, control_->tail, spin_,
                hooks);
    }
    // At most a quarter of the ring per step, so the consumer copies out while the rest goes in;
    // what fits goes in whole, so a small frame is published (and its reader woken) once.
    size_t step = std::min<size_t>(room, std::max<uint32_t>(size_ / 4, 1));
    size_t done = 0;
    while (done < step && part < parts.size()) {
      size_t n = std::min(step - done, parts[part].size - offset);
      const auto* src = static_cast<const std::byte*>(parts[part].data) + offset;
      uint32_t at = (head_ + static_cast<uint32_t>(done)) & (size_ - 1);
      size_t first = std::min<size_t>(n, size_ - at);
      std::memcpy(data_ + at, src, first);
      std::memcpy(data_, src + first, n - first);
      done += n;
      offset += n;
      skipDone();
    }
    head_ += static_cast<uint32_t>(done);
    writtenSinceGiveBack_ = true;
    ++writes_;
    std::atomic_ref<uint32_t>(control_->head.moverCpu)
        .store(currentCpu(), std::memory_order_relaxed);
    store(control_->head.value, head_);
    wakePeer(control_->head, hooks);
  }
}

size_t ShmRingEnd::read(void* dst, size_t max, bool wait, ShmWaitHooks& hooks,
                        bool doorbellWhenEmpty) {
  if (max == 0) return 0;
  uint32_t avail = readable();
  if (avail == 0) {
    if (wait) {
      waitUntil([&] { return (avail = readable()) != 0; }, control_->head, spin_, hooks);
    } else {
      if (!doorbellWhenEmpty) return 0;
      std::atomic_ref<uint32_t> waiting(control_->head.waiting);
      waiting.store(kShmDoorbell);
      avail = readable();
      if (avail == 0) return 0;  // the producer rings when it next writes
      waiting.store(kShmAwake);
    }
  }
  size_t n = std::min<size_t>(max, avail);
  uint32_t at = tail_ & (size_ - 1);
  size_t first = std::min<size_t>(n, size_ - at);
  std::memcpy(dst, data_ + at, first);
  std::memcpy(static_cast<std::byte*>(dst) + first, data_, n - first);
  tail_ += static_cast<uint32_t>(n);
  std::atomic_ref<uint32_t>(control_->tail.moverCpu).store(currentCpu(), std::memory_order_relaxed);
  store(control_->tail.value, tail_);
  wakePeer(control_->tail, hooks);
  return n;
}

}  // namespace gpupool::transport
