// consumeClientReply (fuzz_inputs.h): a fake server on loopback TCP writes the input to a real
// RemoteSession, which performs the handshake and then the calls whose replies carry the most
// structure (bulk copies, function descriptions, status lists).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "client/remote_session.h"
#include "fuzz/fuzz_inputs.h"
#include "transport/endpoint.h"

namespace {

using namespace gpupool;

// Accepts one connection per input, writes the input, half-closes, and drains until the client
// hangs up.
class FakeServer {
 public:
  FakeServer() {
    listenFd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listenFd_ < 0 || ::bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listenFd_, 4) != 0 ||
        ::getsockname(listenFd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::abort();
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { loop(); });
    thread_.detach();
  }

  uint16_t port() const { return port_; }

  // Serves `reply` to the next connection; finished() waits until that connection is over.
  void arm(const uint8_t* data, size_t size) {
    std::lock_guard lock(mutex_);
    reply_.assign(data, data + size);
    done_ = false;
  }
  void finished() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return done_; });
  }

 private:
  void loop() {
    for (;;) {
      int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::vector<uint8_t> reply;
      {
        std::lock_guard lock(mutex_);
        reply = reply_;
      }
      for (size_t off = 0; off < reply.size();) {
        ssize_t n = ::send(fd, reply.data() + off, reply.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      ::shutdown(fd, SHUT_WR);
      char sink[4096];
      while (::recv(fd, sink, sizeof sink, 0) > 0) {
      }
      ::close(fd);
      {
        std::lock_guard lock(mutex_);
        done_ = true;
      }
      changed_.notify_all();
    }
  }

  int listenFd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint8_t> reply_;
  bool done_ = true;
};

void exerciseCalls(client::RemoteSession& session) {
  std::vector<uint8_t> landing(1 << 16);
  // A device-to-host copy: the reply's bulk lands in the caller's buffer, bounded by its size.
  session.call(
      "memcpyDtoH",
      [](wire::Request::Builder r) {
        auto m = r.initMemcpyDtoH();
        m.setContext(1);
        m.setSrc(0x1000);
        m.setBytes(4096);
      },
      {},
      [&](wire::Response::Reader, client::ReplyBulk& bulk) -> CUresult {
        return bulk.read(landing.data(), 4096) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      });
  session.call(
      "moduleGetFunction",
      [](wire::Request::Builder r) {
        auto m = r.initModuleGetFunction();
        m.setContext(1);
        m.setModule(1);
        m.setName("k");
      },
      {},
      [](wire::Response::Reader response, client::ReplyBulk&) -> CUresult {
        if (!response.isFunction()) return CUDA_ERROR_INVALID_VALUE;
        uint64_t total = 0;
        for (auto p : response.getFunction().getParams()) total += p.getOffset() + p.getSize();
        for (auto a : response.getFunction().getAttributes()) total += static_cast<uint32_t>(a);
        return total ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      });
  session.call(
      "status", [](wire::Request::Builder r) { r.setStatus(); }, {},
      [](wire::Response::Reader response, client::ReplyBulk&) -> CUresult {
        if (!response.isStatus()) return CUDA_ERROR_INVALID_VALUE;
        size_t n = 0;
        for (auto s : response.getStatus().getSessions()) n += s.getClientName().size();
        return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      });
}

}  // namespace

namespace gpupool::fuzz {

void consumeClientReply(std::span<const uint8_t> input) {
  static FakeServer* server = [] {
    // The client must never wait long on a server that has said all it will say.
    ::setenv("GPU_POOL_CONNECT_TIMEOUT_MS", "2000", 1);
    ::setenv("GPU_POOL_CALL_TIMEOUT_MS", "2000", 1);
    ::signal(SIGPIPE, SIG_IGN);
    return new FakeServer();
  }();
  server->arm(input.data(), input.size());
  transport::Endpoint endpoint{"tcp", "127.0.0.1", server->port()};
  std::string error;
  {
    auto session = client::RemoteSession::connect(endpoint, &error);
    if (session) exerciseCalls(*session);
  }
  server->finished();
}

}  // namespace gpupool::fuzz
