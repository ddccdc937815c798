// consumeShmRing: a hostile shared-memory client against gpupoold's end of a real shm:// connection
// (issue 20: "a malicious client writing bad offsets into the ring"). The input is a script of
// what the client does to the memory file it shares with the server, between the server's own
// steps: publish bytes, write any value into any count or word of either ring's control block,
// read the server's replies, close. Whatever the script does, each server step either works or
// throws TransportError for this connection, and the server never writes the client's ring or the
// counts the client owns.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_inputs.h"
#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/framed_connection.h"
#include "transport/shm_ring.h"
#include "transport/shm_transport.h"

namespace gpupool::fuzz {
namespace {

using transport::ConstBuffer;
using transport::ShmRingControl;

constexpr uint32_t kRing = 4096;  // small, so that scripts wrap it often

// The input, read from the front; zeros once it runs out.
class Script {
 public:
  explicit Script(std::span<const uint8_t> input) : input_(input) {}
  bool done() const { return at_ >= input_.size(); }
  uint8_t byte() { return done() ? 0 : input_[at_++]; }
  uint32_t word() {
    uint32_t w = 0;
    for (int i = 0; i < 4; ++i) w |= uint32_t{byte()} << (8 * i);
    return w;
  }
  std::span<const uint8_t> bytes(size_t n) {
    n = std::min(n, input_.size() - std::min(at_, input_.size()));
    auto out = input_.subspan(at_, n);
    at_ += n;
    return out;
  }

 private:
  std::span<const uint8_t> input_;
  size_t at_ = 0;
};

[[noreturn]] void broken(const char* invariant) {
  std::fprintf(stderr, "shm_ring: %s\n", invariant);
  __builtin_trap();
}

// The listener's socket: one path per process (libFuzzer workers, replays in children).
std::string socketPath() { return "/tmp/gpupool-fuzz-shm-" + std::to_string(::getpid()) + ".sock"; }

// The client's side: a Unix socket, and the memory file it made, mapped, with the setup sent.
class HostileClient {
 public:
  HostileClient() : socket_(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socketPath().c_str(), sizeof address.sun_path - 1);
    if (::connect(socket_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      broken("cannot connect to the listener");
    const int file = ::memfd_create("gpupool-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (file < 0 || ::ftruncate(file, static_cast<off_t>(bytes_)) != 0 ||
        ::fcntl(file, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
      broken("cannot make the memory file");
    base_ = static_cast<std::byte*>(
        ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0));
    if (base_ == MAP_FAILED) broken("cannot map the memory file");
    transport::ShmSetup setup{transport::kShmSetupMagic, transport::kShmSetupVersion, kRing};
    if (!transport::sendRecordWithFile(socket_, &setup, sizeof setup, file))
      broken("cannot send the setup");
    ::close(file);
  }
  ~HostileClient() {
    ::munmap(base_, bytes_);
    closeSocket();
  }
  void closeSocket() {
    if (socket_ >= 0) ::close(socket_);
    socket_ = -1;
  }

  ShmRingControl& toServer() { return *reinterpret_cast<ShmRingControl*>(base_); }
  ShmRingControl& toClient() {
    return *reinterpret_cast<ShmRingControl*>(base_ + sizeof(ShmRingControl));
  }
  std::byte* toServerData() { return base_ + transport::kShmDataOffset; }
  std::byte* toClientData() { return toServerData() + kRing; }
  // The words of both control blocks, by number: what a hostile client may scribble on.
  uint32_t& controlWord(uint8_t n) {
    auto* words = reinterpret_cast<uint32_t*>(base_);
    constexpr size_t kWordsPerCount = sizeof(transport::ShmRingCount) / sizeof(uint32_t);
    // Two rings, head and tail each, the four words of a count that are used.
    const size_t count = (n >> 2) % 4, word = n & 3;
    static_assert(kWordsPerCount >= 4);
    return words[count * kWordsPerCount + word];
  }

 private:
  int socket_;
  size_t bytes_ = transport::shmFileBytes(kRing);
  std::byte* base_ = nullptr;
};

uint32_t load(uint32_t& word) { return std::atomic_ref<uint32_t>(word).load(); }
void store(uint32_t& word, uint32_t value) { std::atomic_ref<uint32_t>(word).store(value); }

}  // namespace

void consumeShmRing(std::span<const uint8_t> input) {
  Script script(input);
  // A listener of its own (it removes its socket file when it goes), the client, and the server's
  // end of the connection.
  transport::Endpoint endpoint;
  endpoint.scheme = "shm";
  endpoint.host = socketPath();
  std::unique_ptr<transport::Listener> listener =
      transport::shmListen(endpoint, std::chrono::microseconds(0));
  HostileClient client;
  std::unique_ptr<transport::Connection> server = listener->accept();
  server->setReceiveTimeoutMs(50);
  // What the client wrote, and the counts it owns, as it last left them: the server must leave
  // all of these alone.
  std::vector<std::byte> written(kRing);
  uint32_t clientHead = 0;  // bytes the client published
  uint32_t serverHead = 0;  // bytes the server sent (its own count, which it never reads back)
  auto checkUntouched = [&] {
    if (std::memcmp(client.toServerData(), written.data(), kRing) != 0)
      broken("the server wrote the client's ring");
    if (load(client.toServer().head.value) != clientHead)
      broken("the server moved the client's head");
  };
  uint32_t clientTail = 0;
  auto checkTail = [&] {
    if (load(client.toClient().tail.value) != clientTail)
      broken("the server moved the client's tail");
  };
  // What the server sent, where it went: the bytes the client has yet to read must stay there,
  // given-back pages or not. Yet to read: past the furthest tail the client ever showed (a tail
  // moved back claims bytes again that the server was told were read, and may have given back).
  std::vector<std::byte> sent(kRing);
  uint32_t readUpTo = 0;
  auto noteTail = [&] {
    // Ahead of what was read before, and not past what was sent: the server accepts it.
    if (static_cast<int32_t>(clientTail - readUpTo) > 0 && serverHead - clientTail <= kRing &&
        static_cast<int32_t>(serverHead - clientTail) >= 0)
      readUpTo = clientTail;
  };
  auto checkUnread = [&] {
    const uint32_t unread = serverHead - readUpTo;
    if (unread > kRing) return;
    for (uint32_t i = 0; i < unread; ++i) {
      const size_t at = (readUpTo + i) & (kRing - 1);
      if (client.toClientData()[at] != sent[at]) broken("bytes the client had not read changed");
    }
  };
  bool stop = false;
  try {
    while (!stop && !script.done()) {
      switch (script.byte() % 9) {
        case 0: {  // publish bytes, which may or may not make frames
          auto bytes = script.bytes(script.byte());
          for (size_t i = 0; i < bytes.size(); ++i) {
            const size_t at = (clientHead + i) & (kRing - 1);
            written[at] = client.toServerData()[at] = static_cast<std::byte>(bytes[i]);
          }
          clientHead += static_cast<uint32_t>(bytes.size());
          store(client.toServer().head.value, clientHead);
          break;
        }
        case 1:  // a head anywhere
          clientHead = script.word();
          store(client.toServer().head.value, clientHead);
          break;
        case 2:  // a tail anywhere
          clientTail = script.word();
          store(client.toClient().tail.value, clientTail);
          noteTail();
          break;
        case 3: {  // any word of either control block
          const uint8_t n = script.byte();
          const uint32_t value = script.word();
          uint32_t& word = client.controlWord(n);
          store(word, value);
          // The counts the client owns follow what it wrote.
          clientHead = load(client.toServer().head.value);
          clientTail = load(client.toClient().tail.value);
          noteTail();
          break;
        }
        case 4:  // the server takes in what has come, frame by frame, as its event loop does
          for (int frames = 0; frames < 4 && !stop && server->frameArrived(); ++frames) {
            // Bulk would be waited for; the ring's framing is what this target is about.
            stop = server->receiveFrame().bulkBytes != 0;
          }
          server->releaseIdleMemory();
          checkUntouched();
          checkTail();
          break;
        case 5: {  // the server answers, when its ring has room (else it would wait, as it should)
          const size_t messageBytes = 8 * (1 + script.byte() % 16);
          const uint32_t used = serverHead - clientTail;
          if (used <= kRing && kRing - used < messageBytes + sizeof(transport::FrameHeader)) break;
          std::vector<uint64_t> message(messageBytes / 8, 0x5555);
          ConstBuffer part{message.data(), messageBytes};
          server->sendFrame(std::span(&part, 1), {});
          const transport::FrameHeader header{transport::kFrameMagic,
                                              static_cast<uint32_t>(messageBytes), 0};
          for (size_t i = 0; i < sizeof header + messageBytes; ++i) {
            const auto* from =
                i < sizeof header
                    ? reinterpret_cast<const std::byte*>(&header) + i
                    : reinterpret_cast<const std::byte*>(message.data()) + (i - sizeof header);
            sent[(serverHead + i) & (kRing - 1)] = *from;
          }
          serverHead += static_cast<uint32_t>(messageBytes + sizeof(transport::FrameHeader));
          checkUntouched();
          checkTail();
          break;
        }
        case 6:  // the client reads all the server sent
          clientTail = serverHead;
          store(client.toClient().tail.value, clientTail);
          noteTail();
          break;
        case 7:  // the client asks the server to give its ring's pages back
          store(client.toClient().tail.giveBack, 1);
          server->giveBackIdleSendMemory();
          (void)server->ringBytesResident();
          checkUntouched();
          checkTail();
          checkUnread();
          break;
        case 8:  // the client goes away
          client.closeSocket();
          break;
      }
    }
  } catch (const transport::TransportError&) {
    // This connection failed, as a hostile peer's must; nothing else may have.
  }
  server->shutdown();
}

}  // namespace gpupool::fuzz
