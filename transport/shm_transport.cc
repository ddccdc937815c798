#include "transport/shm_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport/file_descriptor.h"
#include "transport/framed_connection.h"
#include "transport/shm_ring.h"

namespace gpupool::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr unsigned kSetupWaitSliceMs = 50;
// Files the peer may have passed ahead of the requests that take them; more is a malformed peer
// (one that passes files nothing asks for would otherwise pile up descriptors here).
constexpr size_t kMaxUntakenFiles = 16;
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

[[noreturn]] void fail(TransportError::Kind kind, const std::string& what) {
  throw TransportError(kind, what);
}
std::string errnoText() { return std::strerror(errno); }

bool validRingBytes(uint32_t bytes) {
  return bytes >= kShmMinRingBytes && bytes <= kShmMaxRingBytes && (bytes & (bytes - 1)) == 0;
}

sockaddr_un socketAddress(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof address.sun_path)
    fail(TransportError::Kind::kUnavailable, "shm socket path '" + path + "' is empty or too long");
  std::memcpy(address.sun_path, path.data(), path.size());
  return address;
}

// "local-uid-UID:PID": the stranger gate limits per ADDRESS of ADDRESS:PORT, here per user.
std::string peerOf(int socket) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return "local:0";
  return "local-uid-" + std::to_string(credentials.uid) + ":" + std::to_string(credentials.pid);
}

// Receives one record into [data, data + size) without waiting, with the descriptors it carried
// (closed when `files` goes, unless taken from it). Returns what recvmsg did (-1 with errno);
// *truncated when the record or its descriptors did not fit.
ssize_t receiveRecord(int socket, void* data, size_t size, std::vector<FileDescriptor>* files,
                      bool* truncated) {
  iovec io{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      files->emplace_back(fd);
    }
  }
  *truncated = message.msg_flags & (MSG_TRUNC | MSG_CTRUNC);
  return n;
}

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, size_t size) : base_(static_cast<std::byte*>(base)), size_(size) {}
  Mapping(Mapping&& other) noexcept { *this = std::move(other); }
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~Mapping() {
    if (base_) ::munmap(base_, size_);
  }
  std::byte* base() const { return base_; }

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

// Maps `file` after checking it is what a setup with `ringBytes` promises: a regular file of
// exactly the right size, sealed so that it can never shrink under the mapping (a shrunk file
// would turn reads of the ring into SIGBUS).
Mapping mapRings(int file, uint32_t ringBytes) {
  struct stat st {};
  if (::fstat(file, &st) != 0 || !S_ISREG(st.st_mode))
    fail(TransportError::Kind::kMalformed, "shm setup refused: the memory file is not a file");
  if (static_cast<uint64_t>(st.st_size) != shmFileBytes(ringBytes))
    fail(TransportError::Kind::kMalformed, "shm setup refused: memory file of " +
                                               std::to_string(st.st_size) + " bytes for rings of " +
                                               std::to_string(ringBytes));
  int seals = ::fcntl(file, F_GET_SEALS);
  if (seals < 0 || (seals & kSeals) != kSeals)
    fail(TransportError::Kind::kMalformed, "shm setup refused: the memory file is not sealed");
  void* base =
      ::mmap(nullptr, shmFileBytes(ringBytes), PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
  if (base == MAP_FAILED)
    fail(TransportError::Kind::kMalformed, "shm setup refused: cannot map: " + errnoText());
  return Mapping(base, shmFileBytes(ringBytes));
}

class ShmConnection;

// Waits of one direction: a receive has a deadline, a send has none (as over TCP).
class Hooks final : public ShmWaitHooks {
 public:
  Hooks(ShmConnection& connection, bool receiving)
      : connection_(connection), receiving_(receiving) {}
  void checkWhileWaiting() override;
  void ringDoorbell() override;
  steady_clock::time_point deadline = steady_clock::time_point::max();

 private:
  ShmConnection& connection_;
  bool receiving_;
};

class ShmConnection final : public FramedConnection {
 public:
  // Client: rings mapped and announced already. Server: the setup message is still to come.
  ShmConnection(int socket, bool server, Mapping mapping = {}, uint32_t ringBytes = 0)
      : socket_(socket), server_(server), peer_(peerOf(socket)) {
    if (!server) attach(std::move(mapping), ringBytes);
  }

  void shutdown() override {
    shutdown_ = true;
    ::shutdown(socket_.get(), SHUT_RDWR);
    if (ready_.load(std::memory_order_acquire)) {
      in_->wakeAll();
      out_->wakeAll();
    }
  }

  std::string kind() const override { return "shm"; }
  std::string peer() const override { return peer_; }
  bool fullDuplex() const override { return true; }
  int readinessDescriptor() const override { return socket_.get(); }
  void setReceiveTimeoutMs(unsigned ms) override { receiveTimeoutMs_ = ms; }

  bool awaitFrameBriefly() override {
    if (pollMax_.count() == 0 || !ready_.load(std::memory_order_acquire)) return false;
    in_->pollReadable(pollMax_);
    return true;
  }
  void setPollMax(std::chrono::nanoseconds max) { pollMax_ = max; }

  // Right after a served frame: the ring alone first, and again after polling it, without a system
  // call; only a look that finds no frame either way drains the socket and asks for the doorbell
  // (frameArrived), as the session then goes back to the event loop.
  bool nextFrameArrived() override {
    if (frameInRing() || (awaitFrameBriefly() && frameInRing())) return true;
    return frameArrived();
  }

  bool peerClosed() const override {
    pollfd p{socket_.get(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }

  // Hooks: throws when a wait must end.
  void checkWhileWaiting(bool receiving, steady_clock::time_point deadline) {
    if (shutdown_) fail(TransportError::Kind::kDisconnected, "shm connection shut down");
    if (drainSocket())
      fail(TransportError::Kind::kDisconnected,
           std::string(receiving ? "receive" : "send") + " failed: connection closed by peer");
    if (steady_clock::now() >= deadline)
      fail(TransportError::Kind::kTimeout, "receive failed: timed out, no data from the peer for " +
                                               std::to_string(receiveTimeoutMs_.load()) + " ms");
  }

  bool givesBackIdleSendMemory() const override { return true; }

  void giveBackIdleSendMemory() override {
    if (shutdown_ || !ready_.load(std::memory_order_acquire)) return;
    if (server_) {
      if (out_->consumerAskedToGiveBack()) out_->giveBackUnusedPages();
      return;
    }
    // Sent since the last look: not idle yet. Nothing sent since the last give-back: nothing to
    // give back here, and the server wrote at most the replies to requests sent before it.
    const uint64_t writes = out_->writes();
    if (std::exchange(writesAtLastLook_, writes) != writes || !out_->mayGiveBack()) return;
    out_->giveBackUnusedPages();
    in_->askProducerToGiveBack();
    // An idle server waits for the doorbell: its event loop turns, finds no frame, gives back.
    ringDoorbell();
  }

  std::optional<uint64_t> ringBytesResident() const override {
    if (!ready_.load(std::memory_order_acquire)) return 0;
    return in_->residentBytes() + out_->residentBytes();
  }

  bool sendFile(int fd) override {
    if (shutdown_) fail(TransportError::Kind::kDisconnected, "send failed: connection shut down");
    char tag = 2;  // any byte: the record is what carries the file
    if (!sendRecordWithFile(socket_.get(), &tag, 1, fd))
      fail(TransportError::Kind::kDisconnected, "cannot pass a file: " + errnoText());
    return true;
  }

  FileDescriptor takeFile() override {
    // Before the setup message is taken, the socket's first record is that message, not a file.
    if (!server_ || !setUp(false)) return {};
    (void)drainSocket();
    std::lock_guard lock(filesMutex_);
    if (files_.empty()) return {};
    FileDescriptor file = std::move(files_.front());
    files_.pop_front();
    return file;
  }

  void ringDoorbell() {
    char bell = 1;
    // A full socket already holds doorbells the consumer has not read: one more changes nothing.
    (void)::send(socket_.get(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

 protected:
  void writeAll(std::span<const ConstBuffer> parts) override {
    if (shutdown_) fail(TransportError::Kind::kDisconnected, "send failed: connection shut down");
    setUp(true);
    out_->write(parts, sendHooks_);
  }

  size_t readSome(void* dst, size_t max) override {
    unsigned timeoutMs = receiveTimeoutMs_;
    receiveHooks_.deadline =
        timeoutMs ? steady_clock::now() + milliseconds(timeoutMs) : steady_clock::time_point::max();
    setUp(true);
    return in_->read(dst, max, true, receiveHooks_, false);
  }

  size_t readAvailable(void* dst, size_t max) override {
    if (!setUp(false)) return 0;
    size_t n = in_->read(dst, max, false, receiveHooks_, false);
    if (n != 0 || ringOnly_) return n;
    // Nothing in the ring: drain the socket (doorbells, passed files, the peer closing it), then
    // look once more asking for the doorbell, so bytes published meanwhile are seen now or rung
    // for.
    bool gone = drainSocket();
    n = in_->read(dst, max, false, receiveHooks_, true);
    if (n == 0 && gone)
      fail(TransportError::Kind::kDisconnected, "receive failed: connection closed by peer");
    return n;
  }

 private:
  void attach(Mapping mapping, uint32_t ringBytes) {
    mapping_ = std::move(mapping);
    std::byte* base = mapping_.base();
    auto* toServer = reinterpret_cast<ShmRingControl*>(base);
    auto* toClient = reinterpret_cast<ShmRingControl*>(base + sizeof(ShmRingControl));
    std::byte* toServerData = base + kShmDataOffset;
    std::byte* toClientData = toServerData + ringBytes;
    if (server_) {
      in_.emplace(toServer, toServerData, ringBytes);
      out_.emplace(toClient, toClientData, ringBytes);
    } else {
      in_.emplace(toClient, toClientData, ringBytes);
      out_.emplace(toServer, toServerData, ringBytes);
    }
    ready_.store(true, std::memory_order_release);
  }

  // Whether a whole frame is in, reading the ring only (readAvailable with ringOnly_).
  bool frameInRing() {
    if (!ready_.load(std::memory_order_acquire)) return false;
    ringOnly_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{ringOnly_};
    return FramedConnection::frameArrived();
  }

  // Server: takes the setup message, waiting for it when `wait`. False when it has not come.
  bool setUp(bool wait) {
    if (ready_.load(std::memory_order_acquire)) return true;
    std::lock_guard lock(setupMutex_);
    if (ready_.load(std::memory_order_relaxed)) return true;
    auto deadline = steady_clock::now() + milliseconds(receiveTimeoutMs_.load());
    for (;;) {
      if (shutdown_) fail(TransportError::Kind::kDisconnected, "shm connection shut down");
      if (takeSetup()) return true;
      if (!wait) return false;
      if (receiveTimeoutMs_ && steady_clock::now() >= deadline)
        fail(TransportError::Kind::kTimeout, "shm setup: no setup message from the peer");
      pollfd p{socket_.get(), POLLIN, 0};
      ::poll(&p, 1, kSetupWaitSliceMs);
    }
  }

  bool takeSetup() {
    ShmSetup setup{};
    // Every descriptor that came is closed here, whatever else is wrong with the message.
    std::vector<FileDescriptor> files;
    bool truncated = false;
    ssize_t n = receiveRecord(socket_.get(), &setup, sizeof setup, &files, &truncated);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n == 0) fail(TransportError::Kind::kDisconnected, "shm setup: connection closed by peer");
    if (n < 0) fail(TransportError::Kind::kDisconnected, "shm setup: " + errnoText());
    if (truncated || n != sizeof setup || files.size() != 1)
      fail(TransportError::Kind::kMalformed,
           "shm setup refused: expected one setup message with one memory file");
    if (setup.magic != kShmSetupMagic || setup.version != kShmSetupVersion)
      fail(TransportError::Kind::kMalformed, "shm setup refused: not a gpupool shm client");
    if (!validRingBytes(setup.ringBytes))
      fail(TransportError::Kind::kMalformed,
           "shm setup refused: ring size " + std::to_string(setup.ringBytes));
    attach(mapRings(files[0].get(), setup.ringBytes), setup.ringBytes);
    return true;
  }

  // Reads whatever doorbell bytes wait on the socket, keeping the files a client passed (the
  // server's side; the client's closes any); true once the peer has closed it.
  bool drainSocket() {
    for (;;) {
      char scratch[256];
      std::vector<FileDescriptor> files;
      bool truncated = false;
      ssize_t n = receiveRecord(socket_.get(), scratch, sizeof scratch, &files, &truncated);
      if (n > 0) {
        if (server_ && !files.empty()) keepFiles(std::move(files));  // a server passes nothing
        continue;
      }
      if (n == 0) return true;
      if (errno == EINTR) continue;
      return errno != EAGAIN && errno != EWOULDBLOCK;
    }
  }

  // Throws once more files wait than kMaxUntakenFiles (those left over close with `files`).
  void keepFiles(std::vector<FileDescriptor> files) {
    bool full = false;
    {
      std::lock_guard lock(filesMutex_);
      for (FileDescriptor& file : files) {
        if (files_.size() >= kMaxUntakenFiles) {
          full = true;
          break;
        }
        files_.push_back(std::move(file));
      }
    }
    if (full)
      fail(TransportError::Kind::kMalformed, "the peer passed more than " +
                                                 std::to_string(kMaxUntakenFiles) +
                                                 " files that no request took");
  }

  FileDescriptor socket_;
  const bool server_;
  const std::string peer_;
  Mapping mapping_;
  std::optional<ShmRingEnd> in_, out_;  // set once, before ready_
  std::atomic<bool> ready_{false};
  std::mutex setupMutex_;
  std::atomic<bool> shutdown_{false};
  std::atomic<unsigned> receiveTimeoutMs_{0};
  std::chrono::nanoseconds pollMax_{0};  // server side: set by the listener
  bool ringOnly_ = false;                // readAvailable reads the ring only (frameInRing)
  uint64_t writesAtLastLook_ = 0;        // client side: giveBackIdleSendMemory's
  std::mutex filesMutex_;
  std::deque<FileDescriptor> files_;  // passed by the client, not yet taken, oldest first
  Hooks receiveHooks_{*this, true};
  Hooks sendHooks_{*this, false};
};

void Hooks::checkWhileWaiting() { connection_.checkWhileWaiting(receiving_, deadline); }
void Hooks::ringDoorbell() { connection_.ringDoorbell(); }

class ShmListener final : public Listener {
 public:
  ShmListener(const Endpoint& endpoint, std::chrono::microseconds pollMax)
      : path_(endpoint.host),
        pollMax_(pollMax),
        socket_(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)),
        wake_(::eventfd(0, EFD_CLOEXEC)) {
    if (socket_.get() < 0 || wake_.get() < 0)
      fail(TransportError::Kind::kUnavailable, "shm listen: " + errnoText());
    sockaddr_un address = socketAddress(path_);
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        fail(TransportError::Kind::kUnavailable,
             "shm listen: " + path_ + " exists and is not a socket");
      ::unlink(path_.c_str());
    }
    if (::bind(socket_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(socket_.get(), SOMAXCONN) != 0)
      fail(TransportError::Kind::kUnavailable, "shm listen on " + path_ + ": " + errnoText());
  }

  ~ShmListener() override { ::unlink(path_.c_str()); }

  std::unique_ptr<Connection> accept() override {
    for (;;) {
      pollfd p[2] = {{socket_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 && errno != EINTR)
        fail(TransportError::Kind::kUnavailable, "accept failed: " + errnoText());
      if (p[1].revents) fail(TransportError::Kind::kDisconnected, "listener shut down");
      if (!(p[0].revents & POLLIN)) continue;
      int fd = ::accept4(socket_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        auto connection = std::make_unique<ShmConnection>(fd, true);
        connection->setPollMax(pollMax_);
        return connection;
      }
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        fail(TransportError::Kind::kUnavailable, "accept failed: " + errnoText());
    }
  }

  void shutdown() override {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }

  std::string url() const override { return "shm://" + path_; }

 private:
  std::string path_;
  std::chrono::microseconds pollMax_;
  FileDescriptor socket_;
  FileDescriptor wake_;  // readable once shut down: wakes accept()
};

}  // namespace

bool sendRecordWithFile(int socket, const void* data, size_t size, int fd) {
  iovec io{const_cast<void*>(data), size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do {
    n = ::sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(size);
}

std::unique_ptr<Connection> shmConnect(const Endpoint& endpoint, uint32_t ringBytes) {
  if (endpoint.scheme != "shm")
    fail(TransportError::Kind::kUnavailable, "not an shm endpoint: " + endpoint.url());
  if (!validRingBytes(ringBytes))
    fail(TransportError::Kind::kUnavailable, "shm ring size " + std::to_string(ringBytes) +
                                                 " is not a power of two from 4 KiB to 1 GiB");
  sockaddr_un address = socketAddress(endpoint.host);
  FileDescriptor socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (socket.get() < 0 ||
      ::connect(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    fail(TransportError::Kind::kUnavailable,
         "cannot connect to " + endpoint.url() + ": " + errnoText());

  FileDescriptor file(::memfd_create("gpupool-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  size_t bytes = shmFileBytes(ringBytes);
  if (file.get() < 0 || ::ftruncate(file.get(), static_cast<off_t>(bytes)) != 0 ||
      ::fcntl(file.get(), F_ADD_SEALS, kSeals) != 0)
    fail(TransportError::Kind::kUnavailable, "shm: cannot create the memory file: " + errnoText());
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file.get(), 0);
  if (base == MAP_FAILED)
    fail(TransportError::Kind::kUnavailable, "shm: cannot map the memory file: " + errnoText());
  Mapping mapping(base, bytes);

  ShmSetup setup{kShmSetupMagic, kShmSetupVersion, ringBytes};
  if (!sendRecordWithFile(socket.get(), &setup, sizeof setup, file.get()))
    fail(TransportError::Kind::kUnavailable, "shm: cannot pass the memory file: " + errnoText());
  return std::make_unique<ShmConnection>(socket.release(), false, std::move(mapping), ringBytes);
}

std::unique_ptr<Listener> shmListen(const Endpoint& endpoint, std::chrono::microseconds pollMax) {
  if (endpoint.scheme != "shm")
    fail(TransportError::Kind::kUnavailable, "not an shm endpoint: " + endpoint.url());
  return std::make_unique<ShmListener>(endpoint, pollMax);
}

}  // namespace gpupool::transport
