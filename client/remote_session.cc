#include "remote_session.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client_log.h"
#include "host_function_fence.h"
#include "pool_token.h"
#include "protocol/message_codec.h"
#include "protocol/outgoing_message.h"
#include "transport/transport_factory.h"

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

// A result code from the wire. A broken or hostile server may send any 32-bit value; one outside
// the CUresult enum's range must not become an invalid enum value here.
CUresult resultFromWire(uint32_t raw) {
  return raw <= CUDA_ERROR_UNKNOWN ? static_cast<CUresult>(raw) : CUDA_ERROR_UNKNOWN;
}

// GPU_POOL_SHM_IDLE_RELEASE_MS's default: long enough that a program pausing between steps keeps
// its rings, short enough that an idle one soon holds a few pages instead of megabytes.
constexpr unsigned kIdleGiveBackMs = 1000;

unsigned envMs(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

bool tcpForced() {
  const char* v = std::getenv("GPU_POOL_TRANSPORT");
  return v && std::string(v) == "tcp";
}

// rdma:// where RDMA cannot be used falls back to TCP on the same host and port, saying why once
// (GPU_POOL_TRANSPORT=tcp asks for TCP: said only at GPU_POOL_LOG >= 1).
std::unique_ptr<transport::Connection> openConnection(const transport::Endpoint& endpoint) {
  transport::ConnectOptions options;
  options.timeoutMs = envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000);
  options.rdmaFallsBackToTcp = true;
  if (tcpForced()) options.rdmaRefusal = "GPU_POOL_TRANSPORT=tcp";
  if (!tcpForced() || logLevel() >= 1) {
    options.warn = [](const std::string& why) { logLine("warning: " + why); };
  }
  return transport::connectEndpoint(endpoint, options);
}

void sendHello(transport::Connection& connection) {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<wire::Request>().initHello();
  hello.setProtocolVersion(wire::PROTOCOL_VERSION);
  hello.setClientCudaVersion(CUDA_VERSION);
  std::string unreadable;  // checked at cuInit (DriverState::initialize), before connecting
  if (auto token = poolToken(&unreadable)) hello.setAuthToken(*token);
  hello.setClientName(programName());
  hello.setPurpose(wire::Hello::Purpose::DRIVER);
  protocol::sendMessage(connection, message);
}

// A second session for an upgrade: the server at `url` (which must be a `scheme` endpoint) welcomed
// it and `sameServer` accepts its Welcome. Any failure keeps the session the client has, saying why
// at GPU_POOL_LOG >= 1.
template <typename SameServer>
std::unique_ptr<transport::Connection> upgradeSession(const std::string& url, const char* scheme,
                                                      SameServer sameServer) {
  if (url.empty() || tcpForced()) return nullptr;
  std::string why = transport::transportUnavailableReason(scheme);
  std::string error;
  auto endpoint = transport::parseEndpoint(url, &error);
  if (why.empty() && !endpoint) why = error;
  if (why.empty() && endpoint->scheme != scheme) {
    why = "not an " + std::string(scheme) + " endpoint: " + endpoint->url();
  }
  if (why.empty()) {
    try {
      auto connection =
          transport::connectEndpoint(*endpoint, envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000));
      sendHello(*connection);
      connection->setReceiveTimeoutMs(envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000));
      protocol::IncomingMessage in(*connection);
      auto response = in.root<wire::Response>();
      if (response.getResult() != CUDA_SUCCESS || !response.isWelcome()) {
        why = "server refused the " + std::string(scheme) +
              " session: " + std::string(response.getMessage().cStr());
      } else if (!sameServer(response.getWelcome())) {
        why = "another server answers there";
      } else {
        return connection;
      }
    } catch (const transport::TransportError& e) {
      why = e.what();
    } catch (const kj::Exception& e) {
      why = "malformed reply: " + std::string(e.getDescription().cStr());
    }
  }
  if (logLevel() >= 1) logLine("note: staying on TCP instead of " + url + ": " + why);
  return nullptr;
}

// A server reached over TCP or TLS that advertises shm:// gets a second session there when this
// process can reach the socket and finds the same server behind it (a path can name another
// server's socket in another mount namespace); the first session is then dropped.
std::unique_ptr<transport::Connection> upgradeToShm(const std::string& shmUrl,
                                                    uint64_t serverInstance) {
  return upgradeSession(shmUrl, "shm", [&](wire::Welcome::Reader welcome) {
    return welcome.getServerInstance() == serverInstance;
  });
}

// A server reached over TCP that advertises RDMA gets a second session over RDMA when verbs work
// here; the TCP one is then dropped.
std::unique_ptr<transport::Connection> upgradeToRdma(const std::string& rdmaUrl) {
  return upgradeSession(rdmaUrl, "rdma", [](wire::Welcome::Reader) { return true; });
}

}  // namespace

bool ReplyBulk::read(void* dst, uint64_t size) {
  if (size > remaining_) return false;
  connection_.receiveBulk(dst, size);
  remaining_ -= size;
  return true;
}

std::unique_ptr<RemoteSession> RemoteSession::connect(const transport::Endpoint& endpoint,
                                                      std::string* error, CUresult* refusal) {
  std::unique_ptr<RemoteSession> session(new RemoteSession());
  session->url_ = endpoint.url();
  try {
    session->connection_ = openConnection(endpoint);
    sendHello(*session->connection_);
    session->connection_->setReceiveTimeoutMs(envMs("GPU_POOL_CONNECT_TIMEOUT_MS", 5000));
    protocol::IncomingMessage in(*session->connection_);
    auto response = in.root<wire::Response>();
    if (response.getResult() != CUDA_SUCCESS || !response.isWelcome()) {
      *error = "server refused the session: " + std::string(response.getMessage().cStr());
      if (refusal) *refusal = static_cast<CUresult>(response.getResult());
      return nullptr;
    }
    {
      capnp::MallocMessageBuilder copy;
      copy.setRoot(response);
      session->welcome_ = capnp::messageToFlatArray(copy);
    }
    auto welcome = response.getWelcome();
    session->driverVersion_ = welcome.getDriverVersion();
    session->backendKind_ = welcome.getBackendKind();
    session->serverInstance_ = welcome.getServerInstance();
    for (auto d : welcome.getDevices()) {
      DeviceSnapshot s;
      s.name = d.getName();
      auto uuid = d.getUuid();
      // An absent uuid reads as a null, empty span: memcpy must not see the null.
      if (uuid.size()) std::memcpy(s.uuid.bytes, uuid.begin(), std::min<size_t>(uuid.size(), 16));
      s.totalMemory = d.getTotalMemory();
      for (int32_t a : d.getAttributes()) s.attributes.push_back(a);
      session->devices_.push_back(std::move(s));
    }
    // Keep the server's device addresses out of this process's own address space, so a device
    // pointer can never also be a valid host pointer here.
    session->window_ = {welcome.getDeviceAddressBase(), welcome.getDeviceAddressSize()};
    if (welcome.getDeviceAddressSize()) {
      void* want = reinterpret_cast<void*>(welcome.getDeviceAddressBase());
      void* got = mmap(want, welcome.getDeviceAddressSize(), PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (got == MAP_FAILED && logLevel() >= 1) {
        logLine("note: could not reserve the device address window locally");
      }
      session->windowReserved_ = got == want;
    }
    bool serverSharesHostFiles = welcome.getSharesHostFiles();
    bool serverMapsHostFiles = welcome.getMapsHostFiles();
    std::string kind = session->connection_->kind();
    if (kind == "tcp" || kind == "tls") {
      // `welcome` points into the first connection's buffer: done with it before replacing it.
      std::string shmUrl = welcome.getShmEndpoint();
      std::string rdmaUrl = welcome.getRdmaEndpoint();
      uint64_t instance = welcome.getServerInstance();
      // On the server's own host shared memory beats RDMA; RDMA is for the others.
      if (auto shm = upgradeToShm(shmUrl, instance)) {
        session->connection_ = std::move(shm);
      } else if (kind == "tcp") {
        if (auto rdma = upgradeToRdma(rdmaUrl)) session->connection_ = std::move(rdma);
      }
    }
    const char* hostFiles = std::getenv("GPU_POOL_SHM_HOST_FILES");
    session->sharesHostFiles_ = serverSharesHostFiles && session->connection_->kind() == "shm" &&
                                !(hostFiles && std::string(hostFiles) == "0");
    session->mapsHostMemory_ =
        session->sharesHostFiles_ && serverMapsHostFiles && session->windowReserved_;
    if (session->mapsHostMemory_) {
      // The server withholds it from every session (served_capabilities.cc); this one, sharing
      // this host's memory files, can map pinned memory for its kernels.
      for (DeviceSnapshot& d : session->devices_) {
        if (d.attributes.size() > CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)
          d.attributes[CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1;
      }
    }
    // A live server answers every call; a silent one for this long is treated as lost.
    session->connection_->setReceiveTimeoutMs(envMs("GPU_POOL_CALL_TIMEOUT_MS", 0));
    // A server whose host stops answering TCP heartbeats this long is lost, however long its
    // kernels run (docs/hardening.md).
    session->heartbeatMs_ = envMs("GPU_POOL_HEARTBEAT_TIMEOUT_MS", 15000);
    // An shm session idle one to two of these (a second more at most) gives its rings' pages back
    // (0: never).
    session->idleGiveBack_ =
        std::chrono::milliseconds(envMs("GPU_POOL_SHM_IDLE_RELEASE_MS", kIdleGiveBackMs));
    session->connection_->setDeadPeerTimeoutMs(session->heartbeatMs_);
    const char* serialize = std::getenv("GPU_POOL_SERIALIZE_CALLS");
    session->serialized_ =
        !session->connection_->fullDuplex() || (serialize && std::string(serialize) == "1");
    if (session->serialized_ && logLevel() >= 2) {
      logLine("one call in flight at a time on this " + session->connection_->kind() + " session");
    }
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
  // Between posts the flusher is also the heartbeat's eyes while no call waits (posted bytes may
  // sit behind a busy server's closed window while the program computes): Connection::checkPeer.
  // It also gives back the memory of an idle shm session's rings (docs/shm.md, "Idle sessions").
  auto look = std::chrono::milliseconds(transport::heartbeatLookIntervalMs(heartbeatMs_));
  const bool givesBack = idleGiveBack_.count() && connection_->givesBackIdleSendMemory();
  // The connection gives back when nothing was sent between two of its looks: they are at least
  // idleGiveBack_ apart, whatever the heartbeat's rhythm that wakes this loop.
  auto nextGiveBackLook = std::chrono::steady_clock::now() + idleGiveBack_;
  while (!stopping_) {
    if (broken_ || connection_->queuedBytes() == 0) {
      if (broken_ || (!heartbeatMs_ && !givesBack)) {
        queued_.wait(lock);
        continue;
      }
      const auto period = !givesBack      ? look
                          : !heartbeatMs_ ? idleGiveBack_
                                          : std::min(look, idleGiveBack_);
      if (queued_.wait_for(lock, period) == std::cv_status::timeout && !broken_ && !stopping_) {
        try {
          if (heartbeatMs_) connection_->checkPeer();
        } catch (const transport::TransportError& e) {
          lost("the heartbeat", e.what());
        }
        try {
          // No send is in progress: sends hold mutex_, as this loop does here.
          const auto now = std::chrono::steady_clock::now();
          if (givesBack && !broken_ && now >= nextGiveBackLook) {
            nextGiveBackLook = now + idleGiveBack_;
            connection_->giveBackIdleSendMemory();
          }
        } catch (const transport::TransportError& e) {
          lost("giving back idle ring memory", e.what());
        }
      }
      continue;
    }
    queued_.wait_for(lock, kFlushDelay);
    if (stopping_ || broken_ || connection_->queuedBytes() == 0) continue;
    // Serialized, the connection is not used while a call waits for its answer; a call in
    // flight has sent the queue already (and no post can queue more before it ends).
    std::unique_lock exclusive(exclusive_, std::defer_lock);
    if (serialized_ && !exclusive.try_lock()) continue;
    try {
      connection_->flush();
    } catch (const transport::TransportError& e) {
      lost("queued calls", e.what());
    }
  }
}

struct RemoteSession::PendingCall {
  const char* what = nullptr;
  const OnReply* onReply = nullptr;  // null: none
  std::condition_variable wake;      // answered, the receiving role is free, or the session broke
  bool claimed = false;              // a receiver is completing it: it must wait for done
  bool done = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  // A host-function thread's call: an earlier post's failure it hears of goes on to the
  // application's next call instead (that thread is not the application's).
  bool handsOnDeferred = false;
};

CUresult RemoteSession::lost(const char* what, const std::string& why) {
  if (broken_.exchange(true)) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  {
    std::lock_guard answers(answers_);
    for (auto& [id, call] : pending_) call->wake.notify_one();
  }
  logLine("lost connection to " + url_ + " during " + what + ": " + why +
          "; every further CUDA call fails");
  return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

namespace {
std::atomic<const RemoteSession::RequestObserver*> requestObserver{nullptr};
}  // namespace

void RemoteSession::observeRequests(const RequestObserver* observer) {
  requestObserver.store(observer);
}

CUresult RemoteSession::post(const char* what, const Build& build,
                             std::span<const transport::ConstBuffer> bulk) {
  if (const RequestObserver* observer = requestObserver.load(std::memory_order_acquire)) {
    observer->before(*this, what, true);
  }
  std::unique_lock exclusive(exclusive_, std::defer_lock);
  if (serialized_) exclusive.lock();
  std::unique_lock lock(mutex_);
  awaitHostFunctions(exclusive, lock);
  if (broken_) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  try {
    size_t bulkBytes = 0;
    for (auto& b : bulk) bulkBytes += b.size;
    bool queued = bulkBytes <= kInlineBulkBytes;
    bool wasEmpty = false;
    {
      // Over RDMA, built in the SEND buffer it leaves in (with other posts, when queued); gone
      // before the lock is released, as it borrows the connection's memory.
      protocol::OutgoingMessage message(*connection_, queued);
      auto request = message.initRoot<wire::Request>();
      build(request);
      request.setNoReply(true);
      if (logLevel() >= 2) logLine(std::string("post ") + what);
      if (!queued) {
        protocol::sendMessage(*connection_, message, bulk);  // also sends what is queued first
        return CUDA_SUCCESS;
      }
      wasEmpty = connection_->queuedBytes() == 0;
      protocol::queueMessage(*connection_, message, bulk);
    }
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

CUresult RemoteSession::shareHostFile(int fd, uint64_t id, uint64_t bytes) {
  // One share at a time: the server pairs each share request with the oldest file it was passed.
  std::lock_guard sharing(sharing_);
  {
    std::lock_guard lock(mutex_);
    if (broken_) return CUDA_ERROR_DEVICE_UNAVAILABLE;
    try {
      if (!connection_->sendFile(fd)) return CUDA_ERROR_NOT_SUPPORTED;
    } catch (const transport::TransportError& e) {
      return lost("cuMemHostAlloc (sharing pinned memory)", e.what());
    }
  }
  CUresult r =
      call("cuMemHostAlloc (sharing pinned memory with the server)", [&](wire::Request::Builder b) {
        auto m = b.initHostFile();
        m.setOp(wire::Request::HostFileOpKind::SHARE);
        m.setId(id);
        m.setBytes(bytes);
      });
  if (r != CUDA_SUCCESS && logLevel() >= 1)
    logLine("note: pinned memory of " + std::to_string(bytes) +
            " bytes stays unshared; its copies carry their bytes (" + std::to_string(r) + ")");
  return r;
}

CUresult RemoteSession::mapHostFile(uint64_t id, uint64_t remoteContext, uint64_t* address) {
  return call(
      "cuMemHostAlloc (mapping pinned memory into device addresses)",
      [&](wire::Request::Builder b) {
        auto m = b.initHostFile();
        m.setOp(wire::Request::HostFileOpKind::MAP_DEVICE);
        m.setId(id);
        m.setContext(remoteContext);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *address = reply.getHandle();
        return CUDA_SUCCESS;
      });
}

void RemoteSession::releaseHostFile(uint64_t id) {
  (void)post("cuMemFreeHost (releasing shared pinned memory)", [&](wire::Request::Builder b) {
    auto m = b.initHostFile();
    m.setOp(wire::Request::HostFileOpKind::RELEASE);
    m.setId(id);
  });
}

void RemoteSession::awaitHostFunctions(std::unique_lock<std::mutex>& exclusive,
                                       std::unique_lock<std::mutex>& lock) {
  // A host function placed since the caller's wait must reach the server after this request. Both
  // locks go while waiting: the host function's own calls need them.
  while (!HostFunctionFence::clearToSend()) {
    lock.unlock();
    if (exclusive.owns_lock()) exclusive.unlock();
    HostFunctionFence::awaitAgain();
    if (serialized_) exclusive.lock();
    lock.lock();
  }
}

CUresult RemoteSession::call(const char* what, const Build& build,
                             std::span<const transport::ConstBuffer> bulk, const OnReply& onReply,
                             transport::MutableBuffer replyInto) {
  const RequestObserver* observer = requestObserver.load(std::memory_order_acquire);
  if (observer) observer->before(*this, what, false);
  CUresult result = callUnobserved(what, build, bulk, onReply, replyInto);
  if (observer) observer->after(*this, what, result);
  return result;
}

CUresult RemoteSession::callUnobserved(const char* what, const Build& build,
                                       std::span<const transport::ConstBuffer> bulk,
                                       const OnReply& onReply, transport::MutableBuffer replyInto) {
  // Scoped to the calling thread's current context: the request's own context is in its builder.
  HostFunctionFence::Ticket fence =
      HostFunctionFence::holdForThread(HostFunctionFence::Work::kCall);
  std::unique_lock exclusive(exclusive_, std::defer_lock);
  if (serialized_) exclusive.lock();
  std::unique_lock lock(mutex_);
  awaitHostFunctions(exclusive, lock);
  if (broken_) return CUDA_ERROR_DEVICE_UNAVAILABLE;
  PendingCall mine;
  mine.what = what;
  mine.handsOnDeferred = HostFunctionFence::onHostFunctionThread();
  mine.onReply = onReply ? &onReply : nullptr;
  uint64_t id = nextCallId_++;
  {
    // In flight before it is sent: the thread reading answers may read its answer at once.
    std::lock_guard answers(answers_);
    pending_[id] = &mine;
  }
  try {
    protocol::OutgoingMessage message(*connection_);  // in the SEND buffer, over RDMA
    auto request = message.initRoot<wire::Request>();
    build(request);
    request.setCallId(id);
    if (logLevel() >= 2) logLine(std::string("call ") + what);
    // The promise names "the next frame received": only this call's answer when it is alone.
    if (replyInto.size && serialized_) connection_->expectBulkInto(replyInto.data, replyInto.size);
    protocol::sendMessage(*connection_, message, bulk);  // queued posts go out first, same write
  } catch (const transport::TransportError& e) {
    {
      std::lock_guard answers(answers_);
      pending_.erase(id);
    }
    return lost(what, e.what());
  }
  lock.unlock();
  std::unique_lock answers(answers_);
  while (!mine.done) {
    if (broken_ && !mine.claimed) {
      pending_.erase(id);
      return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    if (receiving_ || mine.claimed) {
      mine.wake.wait(answers);
      continue;
    }
    receiving_ = true;
    answers.unlock();
    receiveReply(what);
    answers.lock();
    receiving_ = false;
    // Hands the receiving role to a call still waiting for its answer.
    if (!pending_.empty()) pending_.begin()->second->wake.notify_one();
  }
  return mine.result;
}

void RemoteSession::receiveReply(const char* what) {
  PendingCall* call = nullptr;  // claimed: its owner waits until it is done
  auto fail = [&](const std::string& why) {
    if (call) {
      std::lock_guard answers(answers_);
      call->result = CUDA_ERROR_DEVICE_UNAVAILABLE;
      call->done = true;
      call->wake.notify_one();
    }
    lost(what, why);
  };
  try {
    protocol::IncomingMessage in(*connection_);
    auto response = in.root<wire::Response>();
    uint64_t id = response.getCallId();
    {
      std::lock_guard answers(answers_);
      // A server names no call when it could not decode the request; with one call in flight,
      // that is the one it answers.
      if (id == 0 && pending_.size() == 1) id = pending_.begin()->first;
      if (auto it = pending_.find(id); it != pending_.end()) {
        call = it->second;
        call->claimed = true;
        pending_.erase(it);
      }
    }
    if (!call) return fail("the server answered call " + std::to_string(id) + ", not in flight");
    CUresult result = completeCall(*call, response, in.bulkBytes());
    std::lock_guard answers(answers_);
    call->result = result;
    call->done = true;
    call->wake.notify_one();
  } catch (const transport::TransportError& e) {
    fail(e.what());
  } catch (const kj::Exception& e) {
    fail("malformed reply: " + std::string(e.getDescription().cStr()));
  }
}

CUresult RemoteSession::completeCall(const PendingCall& call, wire::Response::Reader response,
                                     uint64_t bulkBytes) {
  auto output = response.getDeviceOutput();
  if (output.size()) {
    // Device printf output belongs on the application's stdout, in order with its own output.
    std::fflush(stdout);
    std::fwrite(output.begin(), 1, output.size(), stdout);
    std::fflush(stdout);
  }
  ReplyBulk replyBulk(*connection_, bulkBytes);
  auto result = resultFromWire(response.getResult());
  if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY && logLevel() >= 1) {
    logLine(std::string(call.what) + " failed (" + std::to_string(result) +
            "): " + response.getMessage().cStr());
  }
  if (call.onReply && (result == CUDA_SUCCESS || response.isNeedImage())) {
    CUresult handled = (*call.onReply)(response, replyBulk);
    if (result == CUDA_SUCCESS) result = handled;
  }
  if (replyBulk.remaining()) connection_->discardBulk(replyBulk.remaining());
  if (auto deferred = resultFromWire(response.getDeferredResult()); deferred != CUDA_SUCCESS) {
    // An earlier posted call failed: this synchronizing call reports it.
    if (logLevel() >= 1) {
      logLine("an earlier asynchronous call failed (" + std::to_string(deferred) +
              "): " + response.getDeferredMessage().cStr());
    }
    if (call.handsOnDeferred) {
      handedOn_.store(deferred);
    } else if (result == CUDA_SUCCESS) {
      result = deferred;
    }
  }
  if (result == CUDA_SUCCESS && !call.handsOnDeferred) {
    result = handedOn_.exchange(CUDA_SUCCESS);
  }
  return result;
}

}  // namespace gpupool::client
