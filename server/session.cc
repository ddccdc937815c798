#include "server/session.h"

#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <optional>

#include "common/wall_clock.h"
#include "protocol/message_codec.h"
#include "protocol/outgoing_message.h"
#include "server/pool_server.h"
#include "server/served_capabilities.h"

namespace gpupool::server {
namespace {

using wire::Request;
using wire::Response;

void setStatus(Response::Builder r, const Status& s) {
  r.setResult(static_cast<uint32_t>(s.code));
  if (!s.message.empty()) r.setMessage(s.message);
}

// Device waits of one session running at once; more run on the session's own thread. A program
// has about as many as it has threads blocked in a synchronize.
constexpr unsigned kMaxDeviceWaitsPerSession = 64;

// Frames one turn of serveArrived serves before the worker goes to other sessions.
constexpr unsigned kFramesPerTurn = 16;

// Served by the event loop, a session reads only what has arrived, except inside a frame the client
// has begun (the rest of a large message, bulk): a client that stops there this long is cut off, so
// it cannot hold a worker for ever.
constexpr unsigned kFrameStallMs = 60000;

// First segment of the reply a ready check or device wait builds and throws away: a status and a
// message, more only when one is long.
constexpr unsigned kScratchReplyWords = 32;

}  // namespace

Session::Session(uint64_t id, std::unique_ptr<transport::Connection> connection,
                 StrangerGate::Lease stranger, Backend& backend, ModuleCache& modules,
                 const RequestTable& requests, PoolServer& server)
    : connection_(std::move(connection)),
      stranger_(std::move(stranger)),
      requests_(requests),
      state_(id, *connection_, backend, modules, server, server.pinnedMemory()),
      waits_(kMaxDeviceWaitsPerSession) {
  postedCallsGoBack_ = connection_->kind() == "rdma";
}

Session::~Session() {
  // A stream stopped at a host gate would keep its context from draining.
  state_.hostGates.releaseAll();
  state_.server.ipcMemory().withdrawSession(state_.id);
  state_.graphs.clear();  // a backend's build of a graph goes before its context
  state_.contexts.takeAll();
}

void Session::stop() { connection_->shutdown(); }

bool Session::closeIfHandshakeLate(std::chrono::steady_clock::time_point now,
                                   std::chrono::milliseconds deadline,
                                   const std::function<void()>& beforeClose) {
  if (handshakeDone_.load() || now - acceptedAt_ < deadline) return false;
  if (closedAsLate_.exchange(true)) return false;
  beforeClose();
  // The session's thread, blocked reading (or in the TLS handshake), gets a TransportError.
  connection_->shutdown();
  return true;
}

void Session::cancelIfPeerGone() {
  if (!connection_->peerClosed()) return;
  state_.hostGates.releaseAll();
  state_.contexts.forEach([](uint64_t, const SessionContexts::Entry& c) {
    if (c.backend) c.backend->cancel();
  });
}

void Session::checkPeer() noexcept {
  try {
    connection_->checkPeer();
  } catch (const transport::TransportError&) {
    // Shut down by the look: the session's next turn reads the end and says why.
  }
}

SessionSnapshot Session::snapshot() const {
  std::lock_guard lock(mutex_);
  SessionSnapshot s;
  s.id = state_.id;
  s.clientName = clientName_;
  s.transport = connection_->kind();
  s.driver = driver_;
  s.tenant = tenantName_;
  s.rdma = connection_->counters();
  s.ringBytesResident = connection_->ringBytesResident();
  state_.contexts.forEach([&](uint64_t, const SessionContexts::Entry& c) {
    ++s.contexts;
    s.memoryUsed += c.backend->memoryUsed();
    s.devices.push_back(c.device);
  });
  return s;
}

std::vector<AccountingRecord> Session::accounting() const {
  std::lock_guard lock(mutex_);
  return accountingLocked(0);
}

std::vector<AccountingRecord> Session::accountingLocked(uint64_t endUs) const {
  if (!driver_ || accountingHandedOver_) return {};
  return state_.accounting.records(state_.id, clientName_, tenantName_,
                                   state_.contexts.peaksByDevice(), endUs);
}

void Session::run() {
  serving_ = true;
  guarded([&] {
    if (finishHandshake()) {
      while (serveOne()) {
      }
    }
  });
  end();
}

Session::Progress Session::serveArrived() {
  Progress progress = Progress::kEnded;
  guarded([&] {
    for (unsigned served = 0; served < kFramesPerTurn; ++served) {
      // Right after a served frame the client's next call is often microseconds away: catching it
      // (shm, RDMA: nextFrameArrived waits briefly) saves it the doorbell and this session a trip
      // through the event loop.
      const bool arrived =
          served > 0 ? connection_->nextFrameArrived() : connection_->frameArrived();
      if (!arrived) {
        connection_->releaseIdleMemory();
        if (connection_->givesBackIdleSendMemory()) {
          // Not while a device wait's reply is being sent: the next idle turn looks again.
          std::unique_lock sending(sendMutex_, std::try_to_lock);
          if (sending) connection_->giveBackIdleSendMemory();
        }
        progress = Progress::kIdle;
        return;
      }
      serving_ = true;
      struct Idle {
        std::atomic<bool>& serving;
        ~Idle() { serving = false; }
      } idle{serving_};
      if (!handshakeDone_.load()) {
        if (!finishHandshake()) return;
        // From here on a read waits only inside a frame the client has begun.
        connection_->setReceiveTimeoutMs(kFrameStallMs);
        continue;
      }
      serveOne();
    }
    progress = Progress::kMore;
  });
  if (progress == Progress::kEnded) end();
  return progress;
}

bool Session::finishHandshake() {
  bool welcomed = handshake();
  handshakeDone_ = true;
  stranger_.release();
  return welcomed && !closedAsLate_.load();
}

void Session::guarded(const std::function<void()>& serve) {
  try {
    serve();
  } catch (const transport::TransportError& e) {
    // The peer went away or sent a broken frame: the session ends and its resources go with it.
    if (state_.server.verbose())
      std::cerr << "gpupoold: session " << state_.id << " ended: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gpupoold: session " << state_.id << " ended on error: " << e.what() << "\n";
  }
}

void Session::end() {
  serving_ = false;
  endDeviceWaits();
  {
    // NVML accounting keeps what the session did past its end, with the memory its contexts
    // held at their peak (read before they go).
    std::lock_guard lock(mutex_);
    state_.server.accountingHistory().add(accountingLocked(wallClockMicros()));
    accountingHandedOver_ = true;
  }
  // Releases memory, modules, streams and events outside the lock, then gives the tenant's quota
  // back now, not when the session is reaped. Its IPC tokens open nothing from now on.
  state_.server.ipcMemory().withdrawSession(state_.id);
  state_.graphs.clear();  // a backend's build of a graph goes before its context
  state_.contexts.takeAll();
  state_.tenant.reset();
  stranger_.release();
  if (state_.server.verbose()) logRdmaCounters();
  if (admitted_) state_.server.driverSessionEnded();
  // The peer learns at once that the session is over; the Session object itself (and with it the
  // socket) lives until the server reaps it, which may be much later.
  connection_->shutdown();
}

// How this session's bulk bytes moved over RDMA (for operators, and for tests that prove the
// zero-copy paths and the registration cache end to end). Nothing for other transports.
void Session::logRdmaCounters() const {
  std::optional<transport::TransportCounters> rdma = connection_->counters();
  if (!rdma) return;
  std::cerr << "gpupoold: session " << state_.id
            << " rdma counters: received_zero_copy=" << rdma->bulkBytesReceivedZeroCopy
            << " received_written=" << rdma->bulkBytesReceivedWritten
            << " received_inline=" << rdma->bulkBytesReceivedInline
            << " sent_by_write=" << rdma->bulkBytesSentByWrite
            << " sent_zero_copy=" << rdma->bulkBytesSentZeroCopy
            << " sent_inline=" << rdma->bulkBytesSentInline
            << " registrations=" << rdma->registrations
            << " registration_cache_hits=" << rdma->registrationCacheHits
            << " deregistrations=" << rdma->deregistrations << "\n";
}

bool Session::handshake() {
  protocol::IncomingMessage in(*connection_);
  capnp::MallocMessageBuilder reply;
  auto r = reply.initRoot<Response>();
  try {
    auto request = in.root<Request>();
    if (in.bulkBytes() != 0 || request.which() != Request::HELLO) {
      setStatus(r, Status::error(CUDA_ERROR_INVALID_VALUE, "expected Hello as the first message"));
      protocol::sendMessage(*connection_, reply);
      return false;
    }
    auto hello = request.getHello();
    if (hello.getProtocolVersion() < wire::OLDEST_PROTOCOL_VERSION ||
        hello.getProtocolVersion() > wire::PROTOCOL_VERSION) {
      setStatus(
          r, Status::error(
                 CUDA_ERROR_NOT_SUPPORTED,
                 "incompatible protocol: client speaks version " +
                     std::to_string(hello.getProtocolVersion()) + ", server speaks versions " +
                     std::to_string(wire::OLDEST_PROTOCOL_VERSION) + " to version " +
                     std::to_string(wire::PROTOCOL_VERSION) + "; use matching gpupool releases"));
      protocol::sendMessage(*connection_, reply);
      return false;
    }
    if (TenantPool* pool = state_.server.tenantPool()) {
      // Status probes may come without a token: they only read what /metrics also shows.
      auto account = pool->authenticate(hello.getAuthToken());
      if (!account && hello.getPurpose() != wire::Hello::Purpose::STATUS) {
        setStatus(r,
                  Status::error(CUDA_ERROR_NOT_PERMITTED,
                                hello.getAuthToken().size()
                                    ? "token refused: GPU_POOL_TOKEN (or the content of "
                                      "GPU_POOL_TOKEN_FILE) is not a token of this pool"
                                    : "token required: set GPU_POOL_TOKEN to your tenant's token "
                                      "(or GPU_POOL_TOKEN_FILE to a file holding it)"));
        protocol::sendMessage(*connection_, reply);
        return false;
      }
      if (account) state_.tenant = std::make_unique<TenantSession>(*pool, std::move(account));
    }
    {
      std::lock_guard lock(mutex_);
      clientName_ = hello.getClientName();
      if (state_.tenant) tenantName_ = state_.tenant->tenant();
      driver_ = hello.getPurpose() == wire::Hello::Purpose::DRIVER;
    }
    if (driver_ && state_.tenant) {
      std::string why;
      if (!state_.tenant->admitDriverSession(&why)) {
        setStatus(r, Status::error(CUDA_ERROR_DEVICE_UNAVAILABLE, why));
        protocol::sendMessage(*connection_, reply);
        return false;
      }
    }
    if (driver_) {
      admitted_ = state_.server.admitDriverSession();
      if (!admitted_) {
        setStatus(r, Status::error(CUDA_ERROR_DEVICE_UNAVAILABLE,
                                   "server full: gpupoold serves at most " +
                                       std::to_string(state_.server.limits().maxSessions) +
                                       " sessions at once (--max-sessions); retry later"));
        protocol::sendMessage(*connection_, reply);
        return false;
      }
    }
  } catch (const kj::Exception& e) {
    setStatus(r, Status::error(CUDA_ERROR_INVALID_VALUE, "malformed Hello"));
    protocol::sendMessage(*connection_, reply);
    return false;
  }
  r.setResult(CUDA_SUCCESS);
  auto w = r.initWelcome();
  w.setProtocolVersion(wire::PROTOCOL_VERSION);
  w.setServerVersion(PoolServer::version());
  w.setBackendKind(state_.backend.kind());
  w.setDriverVersion(state_.backend.driverVersion());
  w.setSessionId(state_.id);
  w.setRdmaEndpoint(state_.server.rdmaEndpoint());
  w.setShmEndpoint(state_.server.shmEndpoint());
  w.setServerInstance(state_.server.instance());
  w.setSharesHostFiles(true);  // host_file_handlers.cc, where the transport passes files (shm)
  w.setMapsHostFiles(state_.backend.mapsHostFiles());
  auto [base, size] = state_.backend.deviceAddressWindow();
  w.setDeviceAddressBase(base);
  w.setDeviceAddressSize(size);
  const auto& devices = state_.backend.devices();
  auto list = w.initDevices(static_cast<unsigned>(devices.size()));
  for (unsigned i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    auto out = list[i];
    out.setName(d.name);
    out.setUuid(kj::arrayPtr(d.uuid.data(), d.uuid.size()));
    out.setPciDomain(d.pciDomain);
    out.setPciBus(d.pciBus);
    out.setPciDevice(d.pciDevice);
    out.setTotalMemory(d.totalMemory);
    out.setBackendKind(state_.backend.kind());
    const std::vector<int32_t> served =
        servedAttributes(d.attributes, state_.backend.sharesEventsBetweenSessions());
    auto attrs = out.initAttributes(static_cast<unsigned>(served.size()));
    for (unsigned a = 0; a < served.size(); ++a) attrs.set(a, served[a]);
  }
  protocol::sendMessage(*connection_, reply);
  return true;
}

void Session::endDeviceWaits() {
  // Nobody is left to run the host functions: their streams go on, their waits end.
  state_.hostGates.releaseAll();
  if (waits_.busy()) {
    // Nobody is left to read their replies: stop the work they wait for.
    state_.contexts.forEach([](uint64_t, const SessionContexts::Entry& c) {
      if (c.backend) c.backend->cancel();
    });
  }
  waits_.finishAll();
}

void Session::attachDeferred(Response::Builder reply) {
  if (deferredResult_ == CUDA_SUCCESS) return;
  reply.setDeferredResult(deferredResult_);
  reply.setDeferredMessage(deferredMessage_);
  deferredResult_ = CUDA_SUCCESS;
  deferredMessage_.clear();
}

bool Session::readyNow(const RequestHandlerRow& row, Request::Reader request) {
  if (!row.ready) return false;
  // Every synchronize asks this: capnp's default first segment (8 KiB, zeroed) cost the null call
  // more than its handler did (measured over RDMA in the VM).
  capnp::MallocMessageBuilder scratch(kScratchReplyWords);
  RequestContext probe(state_, 0, scratch.initRoot<Response>());
  return row.ready(probe, request).ok();
}

bool Session::startDeviceWait(const protocol::IncomingMessage& in, Request::Reader request,
                              const RequestHandlerRow& row) {
  if (in.bulkBytes() != 0 || request.getNoReply() || !connection_->fullDuplex()) return false;
  auto words = std::make_shared<kj::Array<capnp::word>>(in.copyWords());
  return waits_.start(
      [this, words, &row] {
        onWaiter(*words, [&](capnp::FlatArrayMessageReader& message) {
          capnp::MallocMessageBuilder scratch(kScratchReplyWords);
          RequestContext waiting(state_, 0, scratch.initRoot<Response>());
          // Its result is what the handler reports when it answers, at once then.
          (void)row.waitFor(waiting, message.getRoot<Request>());
        });
      },
      [this, words] {
        onWaiter(*words, [&](capnp::FlatArrayMessageReader& message) {
          std::lock_guard sending(sendMutex_);
          answer([&] { return message.getRoot<Request>(); }, 0, false);
        });
      });
}

void Session::onWaiter(const kj::Array<capnp::word>& words,
                       const std::function<void(capnp::FlatArrayMessageReader&)>& step) {
  try {
    capnp::FlatArrayMessageReader message(words, protocol::readerOptions());
    step(message);
  } catch (const transport::TransportError&) {
    // The connection is gone; the session's thread notices it too and ends the session.
  } catch (const kj::Exception& e) {
    std::cerr << "gpupoold: session " << state_.id
              << " could not answer a device wait: " << e.getDescription().cStr() << "\n";
    connection_->shutdown();
  }
}

bool Session::serveOne() {
  protocol::IncomingMessage in(*connection_);
  // Held while the request is served here; the ready check is a call on the context too.
  std::unique_lock sending(sendMutex_);
  try {
    auto request = in.root<Request>();
    lastFrameAwaited_ = !request.getNoReply();
    const RequestHandlerRow* row = requests_.row(request.which());
    if (row && row->waitFor && !readyNow(*row, request)) {
      sending.unlock();
      if (startDeviceWait(in, request, *row)) return true;
      sending.lock();
    }
  } catch (const kj::Exception&) {
    // Answered as malformed below.
  }
  // A request with bulk may wait for the client sending it; one without waits only for the device.
  std::optional<HostGates::ServingRequest> serving;
  if (in.bulkBytes() == 0) serving.emplace(state_.hostGates);
  answer([&] { return in.root<Request>(); }, in.bulkBytes(), true);
  return true;
}

void Session::answer(const std::function<Request::Reader()>& decode, uint64_t bulk,
                     bool readerThread) {
  protocol::OutgoingMessage reply(*connection_);  // in the SEND buffer, over RDMA
  std::vector<transport::ConstBuffer> replyBulk;
  bool noReply = false;
  try {
    auto request = decode();
    noReply = request.getNoReply();
    dispatch(request, bulk, noReply, reply, replyBulk);
  } catch (const kj::Exception& e) {
    // A message that is not valid Cap'n Proto, or one that exceeds the reader limits.
    auto r = reply.initRoot<Response>();
    setStatus(r, Status::error(CUDA_ERROR_INVALID_VALUE,
                               "malformed request: " + std::string(e.getDescription().cStr())));
    replyBulk.clear();
    state_.stagedReply.reset();
    noReply = false;
    // The frame boundary is still known, so the session can go on once the bulk is skipped (a
    // waiter's request had none; the frame being received now is not its own).
    if (readerThread) connection_->discardBulk(connection_->pendingBulk());
  }
  auto r = reply.getRoot<Response>();
  if (noReply) {
    state_.stagedReply.reset();  // a read nobody waits for is not sent
    if (r.getResult() != CUDA_SUCCESS && deferredResult_ == CUDA_SUCCESS) {
      deferredResult_ = static_cast<CUresult>(r.getResult());
      deferredMessage_ = r.getMessage().cStr();
    }
    return;
  }
  attachDeferred(r);
  if (state_.stagedReply) {
    Status late = state_.stagedReply->send(reply);
    state_.stagedReply.reset();
    // The reply has left: a failure while streaming its bulk is reported with the next one.
    if (!late.ok() && deferredResult_ == CUDA_SUCCESS) {
      deferredResult_ = late.code;
      deferredMessage_ = late.message;
    }
    return;
  }
  protocol::sendMessage(*connection_, reply, replyBulk);
}

void Session::dispatch(Request::Reader request, uint64_t bulkBytes, bool noReply,
                       capnp::MessageBuilder& reply,
                       std::vector<transport::ConstBuffer>& replyBulk) {
  RequestContext call(state_, bulkBytes, reply.initRoot<Response>());
  Status st = runHandler(call, request);
  call.discardUnreadBulk();
  finishReply(call, request, st, noReply);
  replyBulk = std::move(call.replyBulk);
}

Status Session::runHandler(RequestContext& call, Request::Reader request) {
  if (RequestHandler handle = requests_.find(request.which())) return handle(call, request);
  return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                       "request kind " + std::to_string(static_cast<int>(request.which())) +
                           " is not supported by this server");
}

void Session::finishReply(RequestContext& call, Request::Reader request, const Status& st,
                          bool noReply) {
  setStatus(call.reply, st);
  call.reply.setCallId(request.getCallId());
  if (state_.tenant) {
    state_.tenant->recordCall(call.namedContextId(), call.bulkBytes(), call.replyBulkBytes(),
                              st.code);
  }
  // Device printf output waits for a request that is answered, so none is lost to noReply ones.
  if (BackendContext* context = call.namedContext(); context && !noReply) {
    std::string output = context->takeDeviceOutput();
    if (!output.empty()) call.reply.setDeviceOutput(output);
  }
}

}  // namespace gpupool::server
