#include "remote_session.h"

#include <kj/exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client_log.h"
#include "protocol/message_codec.h"
#include "transport/tcp_transport.h"

namespace gpupool::client {
namespace {

std::string programName() {
  char buf[256] = {};
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string name = n > 0 ? std::string(buf, n) : "unknown";
  auto slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return name + " (pid " + std::to_string(::getpid()) + ")";
}

unsigned envMs(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

}  // namespace

bool ReplyBulk::read(void* dst, uint64_t size) {
  if (size > remaining_) return false;
  connection_.receiveBulk(dst, size);
  remaining_ -= size;
  return true;
}

std::unique_ptr<RemoteSession> RemoteSession::connect(const transport::Endpoint& endpoint,
                                                      std::string* error) {
  std::unique_ptr<RemoteSession> session(new RemoteSession());
  session->url_ = endpoint.url();
  try {
    if (endpoint.scheme != "tcp") {
      // No verbs transport in this build: fall back to TCP on the same host and port.
      logLine("warning: " + endpoint.url() + ": RDMA is not available in this build; using TCP");
    }
    transport::Endpoint tcp = endpoint;
    tcp.scheme = "tcp";
    session->connection_ =
        transport::tcpConnect(tcp, envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000));
    capnp::MallocMessageBuilder message;
    auto hello = message.initRoot<wire::Request>().initHello();
    hello.setProtocolVersion(wire::PROTOCOL_VERSION);
    hello.setClientCudaVersion(CUDA_VERSION);
    hello.setFeatures(wire::FEATURE_BULK_FRAMES | wire::FEATURE_MODULE_CACHE);
    if (const char* token = std::getenv("GPU_POOL_TOKEN")) hello.setAuthToken(token);
    hello.setClientName(programName());
    hello.setPurpose(wire::Hello::Purpose::DRIVER);
    protocol::sendMessage(*session->connection_, message);
    session->connection_->setReceiveTimeoutMs(envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000));
    protocol::IncomingMessage in(*session->connection_);
    auto response = in.root<wire::Response>();
    if (response.getResult() != CUDA_SUCCESS || !response.isWelcome()) {
      *error = "server refused the session: " + std::string(response.getMessage().cStr());
      return nullptr;
    }
    auto welcome = response.getWelcome();
    session->driverVersion_ = welcome.getDriverVersion();
    session->backendKind_ = welcome.getBackendKind();
    for (auto d : welcome.getDevices()) {
      DeviceSnapshot s;
      s.name = d.getName();
      auto uuid = d.getUuid();
      std::memcpy(s.uuid.bytes, uuid.begin(), std::min<size_t>(uuid.size(), 16));
      s.totalMemory = d.getTotalMemory();
      for (int32_t a : d.getAttributes()) s.attributes.push_back(a);
      session->devices_.push_back(std::move(s));
    }
    // Keep the server's device addresses out of this process's own address space, so a device
    // pointer can never also be a valid host pointer here.
    if (welcome.getDeviceAddressSize()) {
      void* want = reinterpret_cast<void*>(welcome.getDeviceAddressBase());
      void* got = mmap(want, welcome.getDeviceAddressSize(), PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (got == MAP_FAILED && logLevel() >= 1) {
        logLine("note: could not reserve the device address window locally");
      }
    }
    // A live server answers every call; a silent one for this long is treated as lost.
    session->connection_->setReceiveTimeoutMs(envMs("GPU_POOL_CALL_TIMEOUT_MS", 0));
    session->flusher_ = std::thread([s = session.get()] { s->flushLoop(); });
  } catch (const transport::TransportError& e) {
    *error = e.what();
    return nullptr;
  } catch (const kj::Exception& e) {
    *error = "malformed reply from server: " + std::string(e.getDescription().cStr());
    return nullptr;
  }
  return session;
}

RemoteSession::~RemoteSession() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

// Posts wait in the connection's queue at most this long before they are sent on their own.
constexpr auto kFlushDelay = std::chrono::microseconds(200);
// A queue this large is sent at once.
constexpr size_t kFlushBytes = 256 * 1024;
// Post bulk above this size is sent straight from the caller's buffer instead of being copied.
constexpr size_t kInlineBulkBytes = 64 * 1024;

void RemoteSession::flushLoop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (broken_ || connection_->queuedBytes() == 0) {
      queued_.wait(lock);
      continue;
    }
    queued_.wait_for(lock, kFlushDelay);
    if (stopping_ || broken_ || connection_->queuedBytes() == 0) continue;
    try {
      connection_->flush();
    } catch (const transport::TransportError& e) {
      lost("queued calls", e.what());
    }
  }
}

CUresult RemoteSession::lost(const char* what, const std::string& why) {
  broken_ = true;
  logLine("lost connection to " + url_ + " during " + what + ": " + why +
          "; every further CUDA call fails");
  return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

CUresult RemoteSession::post(const char* what, const Build& build,
                             std::span<const transport::ConstBuffer> bulk) {
  std::unique_lock lock(mutex_);
  if (broken_) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  try {
    capnp::MallocMessageBuilder message;
    auto request = message.initRoot<wire::Request>();
    build(request);
    request.setNoReply(true);
    if (logLevel() >= 2) logLine(std::string("post ") + what);
    size_t bulkBytes = 0;
    for (auto& b : bulk) bulkBytes += b.size;
    if (bulkBytes > kInlineBulkBytes) {
      protocol::sendMessage(*connection_, message, bulk);  // also sends what is queued before it
      return CUDA_SUCCESS;
    }
    bool wasEmpty = connection_->queuedBytes() == 0;
    protocol::queueMessage(*connection_, message, bulk);
    if (connection_->queuedBytes() >= kFlushBytes) {
      connection_->flush();
    } else if (wasEmpty) {
      lock.unlock();
      queued_.notify_one();
    }
    return CUDA_SUCCESS;
  } catch (const transport::TransportError& e) {
    return lost(what, e.what());
  }
}

CUresult RemoteSession::call(const char* what, const Build& build,
                             std::span<const transport::ConstBuffer> bulk,
                             const OnReply& onReply) {
  std::lock_guard lock(mutex_);
  if (broken_) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  try {
    capnp::MallocMessageBuilder message;
    build(message.initRoot<wire::Request>());
    if (logLevel() >= 2) logLine(std::string("call ") + what);
    protocol::sendMessage(*connection_, message, bulk);  // queued posts go out first, same write
    protocol::IncomingMessage in(*connection_);
    auto response = in.root<wire::Response>();
    auto output = response.getDeviceOutput();
    if (output.size()) {
      // Device printf output belongs on the application's stdout, in order with its own output.
      std::fflush(stdout);
      std::fwrite(output.begin(), 1, output.size(), stdout);
      std::fflush(stdout);
    }
    ReplyBulk replyBulk(*connection_, in.bulkBytes());
    auto result = static_cast<CUresult>(response.getResult());
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY && logLevel() >= 1) {
      logLine(std::string(what) + " failed (" + std::to_string(result) +
              "): " + response.getMessage().cStr());
    }
    if (onReply && (result == CUDA_SUCCESS || response.isNeedImage())) {
      CUresult handled = onReply(response, replyBulk);
      if (result == CUDA_SUCCESS) result = handled;
    }
    if (replyBulk.remaining()) connection_->discardBulk(replyBulk.remaining());
    if (auto deferred = static_cast<CUresult>(response.getDeferredResult());
        deferred != CUDA_SUCCESS) {
      // An earlier posted call failed: this synchronizing call reports it.
      if (logLevel() >= 1) {
        logLine("an earlier asynchronous call failed (" + std::to_string(deferred) +
                "): " + response.getDeferredMessage().cStr());
      }
      if (result == CUDA_SUCCESS) result = deferred;
    }
    return result;
  } catch (const transport::TransportError& e) {
    return lost(what, e.what());
  } catch (const kj::Exception& e) {
    broken_ = true;
    logLine("malformed reply from " + url_ + " to " + what + ": " + e.getDescription().cStr());
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
  }
}

}  // namespace gpupool::client
