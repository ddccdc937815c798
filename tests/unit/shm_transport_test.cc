// The shared-memory transport (shm://) over real Unix sockets and memory files: rings far smaller
// than what crosses them, many small frames, a peer process killed mid-frame (and its memory file
// unmapped afterwards), and a hostile client that hands over a bad memory file or writes counts
// outside its ring: each such session fails alone, and the listener goes on serving.
#include "transport/shm_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loopback_pair.h"
#include "transport/framed_connection.h"
#include "transport/shm_ring.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint32_t kSmallRing = 4096;

struct ShmPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

Endpoint shmEndpoint(const std::string& path) {
  Endpoint e;
  e.scheme = "shm";
  e.host = path;
  return e;
}

ShmPair shmPair(uint32_t ringBytes) {
  ShmPair pair;
  std::string path = freeShmSocketPath();
  pair.listener = shmListen(shmEndpoint(path));
  pair.client = shmConnect(shmEndpoint(path), ringBytes);
  pair.server = pair.listener->accept();
  // A broken test must fail, not hang the suite.
  pair.server->setReceiveTimeoutMs(20000);
  pair.client->setReceiveTimeoutMs(20000);
  return pair;
}

// Mappings of gpupool memory files in this process.
int shmMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find("memfd:gpupool-shm") != std::string::npos;
  return n;
}

// One ring in plain memory, its producer and consumer ends, and hooks that never need to act.
struct RingInMemory {
  static constexpr uint32_t kBytes = 4096;
  ShmRingControl control{};
  std::vector<std::byte> data = std::vector<std::byte>(kBytes);
  ShmRingEnd producer{&control, data.data(), kBytes};
  ShmRingEnd consumer{&control, data.data(), kBytes};
  struct Hooks : ShmWaitHooks {
    unsigned doorbells = 0;
    void checkWhileWaiting() override {}
    void ringDoorbell() override { ++doorbells; }
  } hooks;
};

// A frame sent as several pieces (header, message segments) is published whole, so a consumer
// never wakes to a part of it.
TEST(ShmRingTest, PiecesOfAWriteArePublishedTogether) {
  RingInMemory ring;
  const char header[] = "head", body[] = "the message";
  ConstBuffer parts[] = {{header, 4}, {nullptr, 0}, {body, sizeof body}};
  ring.control.head.waiting = kShmDoorbell;
  ring.producer.write(parts, ring.hooks);
  EXPECT_EQ(ring.hooks.doorbells, 1u);
  ASSERT_EQ(ring.consumer.readable(), 4 + sizeof body);
  char got[64] = {};
  ASSERT_EQ(ring.consumer.read(got, sizeof got, false, ring.hooks, false), 4 + sizeof body);
  EXPECT_EQ(std::string(got, 4), "head");
  EXPECT_STREQ(got + 4, "the message");
}

// After kPollMissesBeforeRest misses in a row the poll rests: it looks only on every
// kPollProbeEvery-th call (so a client that stopped calling back to back costs no spinning),
// and one catch makes it look every time again.
TEST(ShmRingTest, PollingRestsAfterMissesAndWakesOnACatch) {
  RingInMemory ring;
  const auto brief = std::chrono::microseconds(1);
  for (unsigned i = 0; i < ShmRingEnd::kPollMissesBeforeRest; ++i) {
    EXPECT_FALSE(ring.consumer.pollReadable(brief)) << "miss " << i;
  }
  const char byte = 7;
  ConstBuffer part{&byte, 1};
  ring.producer.write(std::span<const ConstBuffer>(&part, 1), ring.hooks);
  ring.control.head.moverCpu = 0;  // as if from another core (this thread wrote it)
  for (unsigned i = 1; i < ShmRingEnd::kPollProbeEvery; ++i) {
    EXPECT_FALSE(ring.consumer.pollReadable(brief)) << "resting call " << i;
  }
  EXPECT_TRUE(ring.consumer.pollReadable(brief));  // the probe
  char got = 0;
  ASSERT_EQ(ring.consumer.read(&got, 1, false, ring.hooks, false), 1u);
  ring.producer.write(std::span<const ConstBuffer>(&part, 1), ring.hooks);
  ring.control.head.moverCpu = 0;
  EXPECT_TRUE(ring.consumer.pollReadable(brief));  // awake again: looks at once
}

// A poll does not spin for a producer that last wrote from the poller's own core (it could not
// run meanwhile): it leaves the frame to the doorbell. The thread is pinned to its core so the
// producer's core and the poller's are the same for certain.
TEST(ShmRingTest, NoSpinForAProducerOnThisCore) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  cpu_set_t here;
  CPU_ZERO(&here);
  CPU_SET(sched_getcpu(), &here);
  ASSERT_EQ(sched_setaffinity(0, sizeof here, &here), 0);
  RingInMemory ring;
  const char byte = 7;
  ConstBuffer part{&byte, 1};
  ring.producer.write(std::span<const ConstBuffer>(&part, 1), ring.hooks);
  EXPECT_EQ(ring.control.head.moverCpu, static_cast<uint32_t>(sched_getcpu()) + 1);
  EXPECT_FALSE(ring.consumer.pollReadable(std::chrono::microseconds(50)));
  EXPECT_EQ(ring.consumer.readable(), 1u);  // there all along: the poll did not look
  ring.control.head.moverCpu = 0;           // a producer on another core, or one not known
  EXPECT_TRUE(ring.consumer.pollReadable(std::chrono::microseconds(50)));
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
}

// A ring of 16 pages in shared memory (giving pages back needs a shared mapping), its producer
// and consumer ends, and hooks that never need to act.
struct SharedRing {
  static constexpr uint32_t kBytes = 64 << 10;
  static constexpr size_t kMapped = kShmDataOffset + kBytes;
  std::byte* base = static_cast<std::byte*>(
      ::mmap(nullptr, kMapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ShmRingControl* control = reinterpret_cast<ShmRingControl*>(base);
  ShmRingEnd producer{control, base + kShmDataOffset, kBytes};
  ShmRingEnd consumer{control, base + kShmDataOffset, kBytes};
  RingInMemory::Hooks hooks;
  ~SharedRing() { ::munmap(base, kMapped); }

  // `n` bytes of pattern `seed` in, or out and checked.
  void write(size_t n, unsigned seed) {
    std::vector<unsigned char> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + seed);
    ConstBuffer part{bytes.data(), n};
    producer.write(std::span<const ConstBuffer>(&part, 1), hooks);
  }
  void readAndCheck(size_t n, unsigned seed) {
    std::vector<unsigned char> bytes(n);
    ASSERT_EQ(consumer.read(bytes.data(), n, false, hooks, false), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7 + seed)) << "byte " << i;
  }
};

// The producer gives back every page that holds no unread byte, keeps those that do (across the
// wrap too), and gives them back once read; the bytes kept arrive intact, and the ring goes on.
TEST(ShmRingTest, GivingBackKeepsOnlyThePagesWithUnreadBytes) {
  ASSERT_EQ(::sysconf(_SC_PAGESIZE), 4096) << "the figures below count 4 KiB pages";
  SharedRing ring;
  ASSERT_NE(ring.base, MAP_FAILED);
  EXPECT_EQ(ring.producer.residentBytes(), 0u);
  ring.write(60 << 10, 1);
  ring.readAndCheck(60 << 10, 1);
  EXPECT_EQ(ring.producer.residentBytes(), 60u << 10);
  EXPECT_EQ(ring.producer.giveBackUnusedPages(), 64u << 10);  // nothing unread: all of it
  EXPECT_EQ(ring.producer.residentBytes(), 0u);
  EXPECT_EQ(ring.producer.giveBackUnusedPages(), 0u);  // nothing written since
  // 10 KiB from 60 KiB on: unread on the last page and the first two (the second in part).
  ring.write(10 << 10, 2);
  EXPECT_EQ(ring.producer.giveBackUnusedPages(), 52u << 10);
  EXPECT_EQ(ring.consumer.residentBytes(), 12u << 10);
  ring.readAndCheck(10 << 10, 2);
  EXPECT_EQ(ring.producer.giveBackUnusedPages(), 64u << 10);  // read now: they go too
  EXPECT_EQ(ring.producer.residentBytes(), 0u);
  ring.write(40 << 10, 3);
  ring.readAndCheck(40 << 10, 3);
}

// The consumer's ask is seen once by the producer.
TEST(ShmRingTest, AnAskToGiveBackIsTakenOnce) {
  RingInMemory ring;
  EXPECT_FALSE(ring.producer.consumerAskedToGiveBack());
  ring.consumer.askProducerToGiveBack();
  EXPECT_TRUE(ring.producer.consumerAskedToGiveBack());
  EXPECT_FALSE(ring.producer.consumerAskedToGiveBack());
}

TEST(ShmTransportTest, SaysWhatItIs) {
  auto pair = shmPair(kSmallRing);
  EXPECT_EQ(pair.client->kind(), "shm");
  EXPECT_TRUE(pair.client->fullDuplex());
  EXPECT_GE(pair.server->readinessDescriptor(), 0);
  // Both ends name the other process by its user and pid.
  EXPECT_EQ(pair.server->peer(),
            "local-uid-" + std::to_string(::getuid()) + ":" + std::to_string(::getpid()));
  EXPECT_EQ(pair.listener->url().rfind("shm:///", 0), 0u) << pair.listener->url();
}

// A 1 MiB message and 3 MiB of bulk through 4 KiB rings, both ways at once: each crosses in
// hundreds of pieces while the other direction is busy too.
TEST(ShmTransportTest, MessagesAndBulkFarLargerThanTheRingBothWays) {
  auto pair = shmPair(kSmallRing);
  auto send = [](Connection& c, uint64_t seed) {
    auto message = words(128 * 1024, seed);
    std::vector<uint8_t> bulk(3 << 20);
    for (size_t i = 0; i < bulk.size(); ++i) bulk[i] = static_cast<uint8_t>(i * 31 + seed);
    ConstBuffer m{message.data(), message.size() * 8};
    ConstBuffer b[] = {{bulk.data(), 1000}, {bulk.data() + 1000, bulk.size() - 1000}};
    c.sendFrame(std::span(&m, 1), b);
  };
  auto check = [](Connection& c, uint64_t seed) {
    ReceivedFrame frame = c.receiveFrame();
    EXPECT_EQ(asWords(frame.message), words(128 * 1024, seed));
    ASSERT_EQ(frame.bulkBytes, 3u << 20);
    std::vector<uint8_t> bulk(frame.bulkBytes);
    c.receiveBulk(bulk.data(), bulk.size());
    for (size_t i = 0; i < bulk.size(); ++i)
      ASSERT_EQ(bulk[i], static_cast<uint8_t>(i * 31 + seed)) << "bulk byte " << i;
  };
  auto clientSends = std::async(std::launch::async, [&] { send(*pair.client, 1); });
  auto serverSends = std::async(std::launch::async, [&] { send(*pair.server, 2); });
  auto clientChecks = std::async(std::launch::async, [&] { check(*pair.client, 2); });
  check(*pair.server, 1);
  clientSends.get();
  serverSends.get();
  clientChecks.get();
}

// An idle session gives both rings' pages back: the client's look, once a whole period passed
// without a send, gives back its own ring and asks the server, which gives back its ring at its
// next idle turn and not before it is asked. Frames cross as before afterwards.
TEST(ShmTransportTest, AnIdleSessionGivesBackBothRingsWhenTheClientAsks) {
  constexpr uint32_t kRing = 1 << 20;
  constexpr size_t kBulk = 900 << 10;
  auto pair = shmPair(kRing);
  auto send = [&](Connection& c, unsigned seed) {
    auto message = words(16, seed);
    std::vector<uint8_t> bulk(kBulk);
    for (size_t i = 0; i < kBulk; ++i) bulk[i] = static_cast<uint8_t>(i * 13 + seed);
    ConstBuffer m{message.data(), message.size() * 8};
    ConstBuffer b{bulk.data(), kBulk};
    c.sendFrame(std::span(&m, 1), std::span(&b, 1));
  };
  auto check = [&](Connection& c, unsigned seed) {
    ReceivedFrame frame = c.receiveFrame();
    EXPECT_EQ(asWords(frame.message), words(16, seed));
    ASSERT_EQ(frame.bulkBytes, kBulk);
    std::vector<uint8_t> bulk(kBulk);
    c.receiveBulk(bulk.data(), kBulk);
    for (size_t i = 0; i < kBulk; ++i)
      ASSERT_EQ(bulk[i], static_cast<uint8_t>(i * 13 + seed)) << "bulk byte " << i;
  };
  auto exchange = [&](unsigned seed) {
    auto sending = std::async(std::launch::async, [&] { send(*pair.client, seed); });
    check(*pair.server, seed);
    sending.get();
    sending = std::async(std::launch::async, [&] { send(*pair.server, seed + 1); });
    check(*pair.client, seed + 1);
    sending.get();
  };
  ASSERT_TRUE(pair.client->givesBackIdleSendMemory());
  exchange(1);
  const uint64_t filled = 2 * kBulk;
  EXPECT_GE(*pair.client->ringBytesResident(), filled);
  pair.server->giveBackIdleSendMemory();  // not asked
  EXPECT_GE(*pair.server->ringBytesResident(), filled);
  pair.client->giveBackIdleSendMemory();  // the first look notes the sends
  EXPECT_GE(*pair.client->ringBytesResident(), filled);
  pair.client->giveBackIdleSendMemory();  // none since: its own ring goes
  EXPECT_LT(*pair.client->ringBytesResident(), kBulk + (64 << 10));
  EXPECT_GE(*pair.client->ringBytesResident(), kBulk);
  pair.server->giveBackIdleSendMemory();  // asked now
  EXPECT_LE(*pair.server->ringBytesResident(), 64u << 10);
  exchange(3);
}

// 20000 small frames, queued and flushed in batches as posted calls are, through a 4 KiB ring and
// taken in by the server without blocking reads (the event loop's way); every one arrives once,
// in order.
TEST(ShmTransportTest, ManySmallQueuedFramesArriveInOrderThroughTheEventLoopPath) {
  auto pair = shmPair(kSmallRing);
  constexpr uint64_t kFrames = 20000;
  auto sending = std::async(std::launch::async, [&] {
    for (uint64_t i = 0; i < kFrames; ++i) {
      uint64_t body[2] = {i, ~i};
      ConstBuffer m{body, 8 * (1 + i % 2)};
      pair.client->sendFrameLater(std::span(&m, 1), {});
      if (i % 37 == 36) pair.client->flush();
    }
    pair.client->flush();
  });
  for (uint64_t i = 0; i < kFrames; ++i) {
    waitForFrame(*pair.server);
    ReceivedFrame frame = pair.server->receiveFrame();
    auto got = asWords(frame.message);
    ASSERT_EQ(got.size(), 1 + i % 2);
    ASSERT_EQ(got[0], i);
    if (got.size() == 2) {
      ASSERT_EQ(got[1], ~i);
    }
  }
  sending.get();
  EXPECT_FALSE(pair.server->frameArrived());
}

// The look right after a served frame (nextFrameArrived) takes a frame already in the ring without
// a system call. A forked child under strict seccomp, which the kernel kills at any system call but
// read, write and exit, takes it and reads it; the same look finding the ring empty (the way back
// to the event loop drains the socket) is killed, which shows the check can fail.
TEST(ShmTransportTest, AFrameInTheRingIsTakenWithoutASystemCall) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's runtime may make system calls of its own";
#endif
  auto pair = shmPair(kSmallRing);
  uint64_t word = 1;
  ConstBuffer m{&word, sizeof word};
  pair.client->sendFrame(std::span(&m, 1), {});
  waitForFrame(*pair.server);
  pair.server->receiveFrame();  // the receive buffers exist from here on
  // In a child under strict seccomp: 0 when the next look found a frame holding `expected`, 1 when
  // it found none, 2 when it found another; killed by SIGKILL at a system call.
  auto lookInAChild = [&](uint64_t expected) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) ::syscall(SYS_exit, 3);
      long code = 1;
      if (pair.server->nextFrameArrived()) {
        ReceivedFrame frame = pair.server->receiveFrame();
        code = frame.message.size() == sizeof expected &&
                       std::memcmp(frame.message.data(), &expected, sizeof expected) == 0
                   ? 0
                   : 2;
      }
      ::syscall(SYS_exit, code);
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return status;
  };
  word = 2;
  pair.client->sendFrame(std::span(&m, 1), {});
  int status = lookInAChild(2);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ", signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  // The parent's connection did not take the frame the child took: empty it here first.
  ASSERT_TRUE(pair.server->nextFrameArrived());
  pair.server->receiveFrame();
  status = lookInAChild(3);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
}

// A client process killed inside a frame: the server's wait ends with kDisconnected, not a hang,
// and once the connection goes the client's memory file is no longer mapped here.
TEST(ShmTransportTest, ClientKilledMidFrameEndsTheSessionAndLeavesNothingMapped) {
  std::string path = freeShmSocketPath();
  auto listener = shmListen(shmEndpoint(path));
  int before = shmMappings();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      auto client = shmConnect(shmEndpoint(path), kSmallRing);
      uint64_t word = 7;
      ConstBuffer m{&word, sizeof word};
      char some[1000] = {};
      client->startFrame(std::span(&m, 1), 1000000);
      client->sendBulk(some, sizeof some);  // fits the ring; the rest never comes
      ::raise(SIGKILL);
    } catch (...) {
    }
    ::_exit(1);  // never back into the test runner
  }
  auto server = listener->accept();
  server->setReceiveTimeoutMs(20000);
  ReceivedFrame frame = server->receiveFrame();
  ASSERT_EQ(frame.bulkBytes, 1000000u);
  EXPECT_EQ(shmMappings(), before + 1);
  std::vector<char> bulk(frame.bulkBytes);
  auto start = steady_clock::now();
  try {
    server->receiveBulk(bulk.data(), bulk.size());
    ADD_FAILURE() << "the bulk of a killed client arrived";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kDisconnected) << e.what();
  }
  EXPECT_LT(steady_clock::now() - start, milliseconds(5000));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  server.reset();
  EXPECT_EQ(shmMappings(), before);
}

// A client that speaks the setup by hand, for memory files and counts no ShmConnection makes.
class HostileClient {
 public:
  explicit HostileClient(const std::string& path)
      : socket_(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::connect(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("connect failed");
  }
  ~HostileClient() {
    if (base_) ::munmap(base_, bytes_);
    ::close(socket_);
  }

  // A memory file of `fileBytes` with `seals`, mapped here; sent with a setup naming `ringBytes`
  // (and a second descriptor when `twoFiles`).
  void setUp(uint32_t ringBytes, size_t fileBytes, int seals, bool twoFiles = false,
             uint64_t magic = kShmSetupMagic) {
    ring_ = ringBytes;
    bytes_ = fileBytes;
    int file = ::memfd_create("gpupool-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ASSERT_GE(file, 0);
    ASSERT_EQ(::ftruncate(file, static_cast<off_t>(fileBytes)), 0);
    if (seals) {
      ASSERT_EQ(::fcntl(file, F_ADD_SEALS, seals), 0);
    }
    base_ = static_cast<std::byte*>(
        ::mmap(nullptr, fileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0));
    ASSERT_NE(base_, MAP_FAILED);
    ShmSetup setup{magic, kShmSetupVersion, ringBytes};
    iovec io{&setup, sizeof setup};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    int files[2] = {file, file};
    size_t count = twoFiles ? 2 : 1;
    message.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    std::memcpy(CMSG_DATA(c), files, count * sizeof(int));
    ASSERT_EQ(::sendmsg(socket_, &message, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof setup));
    ::close(file);
  }

  ShmRingControl& toServer() { return *reinterpret_cast<ShmRingControl*>(base_); }
  ShmRingControl& toClient() {
    return *reinterpret_cast<ShmRingControl*>(base_ + sizeof(ShmRingControl));
  }
  // Writes `bytes` into the client-to-server ring at its head and publishes them.
  void write(const void* bytes, size_t size) {
    std::byte* data = base_ + kShmDataOffset;
    uint32_t& head = toServer().head.value;
    for (size_t i = 0; i < size; ++i)
      data[(head + i) & (ring_ - 1)] = static_cast<const std::byte*>(bytes)[i];
    std::atomic_ref<uint32_t>(head).fetch_add(static_cast<uint32_t>(size));
    ringIfAsked();
  }
  void setHead(uint32_t value) {
    std::atomic_ref<uint32_t>(toServer().head.value).store(value);
    ringIfAsked();
  }
  void ringIfAsked() {
    char bell = 1;
    (void)::send(socket_, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

 private:
  int socket_;
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t ring_ = 0;
};

constexpr int kGoodSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// Takes in, the event loop's way, whatever the server's connection makes of its client; returns
// the error it ends with (none when a frame arrived).
std::optional<TransportError> serverOutcome(Connection& server) {
  try {
    waitForFrame(server);
    return std::nullopt;
  } catch (const TransportError& e) {
    return e;
  }
}

// After each bad session the same listener still serves a well-behaved client.
void expectListenerStillServes(Listener& listener, const std::string& path) {
  auto client = shmConnect(shmEndpoint(path), kSmallRing);
  uint64_t word = 99;
  ConstBuffer m{&word, sizeof word};
  client->sendFrame(std::span(&m, 1), {});
  auto server = listener.accept();
  server->setReceiveTimeoutMs(20000);
  EXPECT_EQ(asWords(server->receiveFrame().message), std::vector<uint64_t>{99});
}

TEST(ShmTransportTest, BadMemoryFilesAreRefusedAtSetup) {
  std::string path = freeShmSocketPath();
  auto listener = shmListen(shmEndpoint(path));
  struct Case {
    const char* what;
    uint32_t ring;
    size_t file;
    int seals;
    bool twoFiles;
    uint64_t magic;
  } cases[] = {
      {"unsealed (could shrink under the mapping)", kSmallRing, shmFileBytes(kSmallRing), 0, false,
       kShmSetupMagic},
      {"sealed but still sealable", kSmallRing, shmFileBytes(kSmallRing),
       F_SEAL_SHRINK | F_SEAL_GROW, false, kShmSetupMagic},
      {"smaller than its rings", 1u << 20, shmFileBytes(kSmallRing), kGoodSeals, false,
       kShmSetupMagic},
      {"ring not a power of two", 5000, shmFileBytes(5000), kGoodSeals, false, kShmSetupMagic},
      {"two descriptors", kSmallRing, shmFileBytes(kSmallRing), kGoodSeals, true, kShmSetupMagic},
      {"wrong magic", kSmallRing, shmFileBytes(kSmallRing), kGoodSeals, false, 42},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int before = shmMappings();
    HostileClient hostile(path);
    hostile.setUp(c.ring, c.file, c.seals, c.twoFiles, c.magic);
    auto server = listener->accept();
    auto outcome = serverOutcome(*server);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind(), TransportError::Kind::kMalformed) << outcome->what();
    server.reset();
    EXPECT_EQ(shmMappings(), before + 1);  // the hostile client's own mapping only
    expectListenerStillServes(*listener, path);
  }
}

// A client that connects and never sends its setup holds nothing: the server's connection reports
// no frame, and a shutdown (gpupoold's handshake deadline) ends both ways of waiting for it.
TEST(ShmTransportTest, SilentClientWithoutSetupEndsOnShutdown) {
  std::string path = freeShmSocketPath();
  auto listener = shmListen(shmEndpoint(path));
  HostileClient silent(path);
  auto server = listener->accept();
  EXPECT_FALSE(server->frameArrived());
  auto blocked = std::async(std::launch::async, [&]() -> std::optional<TransportError> {
    try {
      server->receiveFrame();
      return std::nullopt;
    } catch (const TransportError& e) {
      return e;
    }
  });
  std::this_thread::sleep_for(milliseconds(100));
  server->shutdown();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto error = blocked.get();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), TransportError::Kind::kDisconnected) << error->what();
  auto outcome = serverOutcome(*server);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->kind(), TransportError::Kind::kDisconnected) << outcome->what();
}

// A head past what the ring holds, or behind the server's tail: refused, whatever bytes the ring
// holds; a good frame before it is still served.
TEST(ShmTransportTest, CountsOutsideTheRingFailTheSessionOnly) {
  std::string path = freeShmSocketPath();
  auto listener = shmListen(shmEndpoint(path));
  std::mt19937 random(12345);
  std::vector<uint32_t> badHeads = {kSmallRing + 1, 0xffffffffu, 0x80000000u};
  for (int i = 0; i < 20; ++i)
    badHeads.push_back(kSmallRing + 1 + random() % (0xffffffffu - kSmallRing - 1));
  for (uint32_t bad : badHeads) {
    SCOPED_TRACE("head " + std::to_string(bad));
    HostileClient hostile(path);
    hostile.setUp(kSmallRing, shmFileBytes(kSmallRing), kGoodSeals);
    FrameHeader header{kFrameMagic, 8, 0};
    uint64_t word = 5;
    hostile.write(&header, sizeof header);
    hostile.write(&word, sizeof word);
    auto server = listener->accept();
    server->setReceiveTimeoutMs(20000);
    waitForFrame(*server);
    EXPECT_EQ(asWords(server->receiveFrame().message), std::vector<uint64_t>{5});
    // The server's tail is now 24: a head more than a ring ahead of it, or behind it.
    hostile.setHead(24 + bad);
    auto outcome = serverOutcome(*server);
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->kind(), TransportError::Kind::kMalformed) << outcome->what();
  }
  expectListenerStillServes(*listener, path);
}

// The server-to-client ring's tail is the client's to move: one that runs ahead of what the server
// wrote fails the server's next send instead of letting it overwrite unread bytes.
TEST(ShmTransportTest, ATailAheadOfTheHeadFailsTheServersSend) {
  std::string path = freeShmSocketPath();
  auto listener = shmListen(shmEndpoint(path));
  HostileClient hostile(path);
  hostile.setUp(kSmallRing, shmFileBytes(kSmallRing), kGoodSeals);
  FrameHeader header{kFrameMagic, 8, 0};
  uint64_t word = 5;
  hostile.write(&header, sizeof header);
  hostile.write(&word, sizeof word);
  auto server = listener->accept();
  server->setReceiveTimeoutMs(20000);
  waitForFrame(*server);
  server->receiveFrame();
  ConstBuffer m{&word, sizeof word};
  server->sendFrame(std::span(&m, 1), {});  // 24 bytes: head 24
  std::atomic_ref<uint32_t>(hostile.toClient().tail.value).store(1000);
  try {
    server->sendFrame(std::span(&m, 1), {});
    ADD_FAILURE() << "a send went on past a corrupt tail";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kMalformed) << e.what();
  }
}

}  // namespace
}  // namespace gpupool::transport

namespace gpupool::transport {
namespace {

// A memory file holding `text`, for passing.
FileDescriptor memoryFileWith(const std::string& text) {
  FileDescriptor file(::memfd_create("gpupool-test-file", MFD_CLOEXEC));
  EXPECT_GE(file.get(), 0);
  EXPECT_EQ(::write(file.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return file;
}

std::string contentsOf(int fd) {
  char buffer[64] = {};
  ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

// Files the client passes reach the server in order, interleaved with frames and doorbells, each
// taken once; a client takes none (the server passes nothing), and a server with none to give
// hands out an empty descriptor.
TEST(ShmTransportTest, PassedFilesArriveInOrderBesideFrames) {
  auto pair = shmPair(kSmallRing);
  EXPECT_EQ(pair.server->takeFile().get(), -1);
  for (int i = 0; i < 3; ++i) {
    FileDescriptor file = memoryFileWith("file " + std::to_string(i));
    ASSERT_TRUE(pair.client->sendFile(file.get()));
    auto message = words(4, static_cast<uint64_t>(i));
    ConstBuffer m{message.data(), message.size() * 8};
    pair.client->sendFrame(std::span(&m, 1), {});
  }
  for (int i = 0; i < 3; ++i) {
    ReceivedFrame frame = pair.server->receiveFrame();
    EXPECT_EQ(asWords(frame.message), words(4, static_cast<uint64_t>(i)));
    FileDescriptor file = pair.server->takeFile();
    ASSERT_GE(file.get(), 0);
    EXPECT_EQ(contentsOf(file.get()), "file " + std::to_string(i));
  }
  EXPECT_EQ(pair.server->takeFile().get(), -1);
  EXPECT_EQ(pair.client->takeFile().get(), -1);
}

// A client that passes files nothing takes fails its own session (a malformed peer), rather than
// piling up descriptors in the server.
TEST(ShmTransportTest, FilesNoRequestTakesFailTheSession) {
  auto pair = shmPair(kSmallRing);
  int before = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++before;
  }
  for (int i = 0; i < 40; ++i) {
    FileDescriptor file = memoryFileWith("unasked");
    ASSERT_TRUE(pair.client->sendFile(file.get()));
  }
  try {
    (void)pair.server->takeFile();
    ADD_FAILURE() << "40 untaken files were accepted";
  } catch (const TransportError& e) {
    EXPECT_EQ(e.kind(), TransportError::Kind::kMalformed) << e.what();
  }
  pair.server.reset();
  pair.client.reset();
  int after = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++after;
  }
  // Every passed descriptor was closed (the two connections' sockets and files went too).
  EXPECT_LE(after, before);
}

}  // namespace
}  // namespace gpupool::transport
