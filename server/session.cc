#include "server/session.h"

#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <iostream>

#include "protocol/message_codec.h"
#include "protocol/outgoing_message.h"
#include "server/pool_server.h"
#include "server/staged_copy.h"

namespace gpupool::server {
namespace {

using wire::Request;
using wire::Response;

// Host-side bulk is moved through the backend in pieces of this size, so the staging buffer stays
// small whatever the copy size.
constexpr uint64_t kChunkBytes = 8u << 20;
constexpr uint64_t kMaxImageBytes = 1ull << 30;
// A ping echoes its bulk from one buffer: bounded so a client cannot make the server allocate
// whatever a frame header claims.
constexpr uint64_t kMaxPingBytes = 64ull << 20;

void setStatus(Response::Builder r, const Status& s) {
  r.setResult(static_cast<uint32_t>(s.code));
  if (!s.message.empty()) r.setMessage(s.message);
}

// Whether `height` rows of `width` bytes, `pitch` apart from `address`, lie in one allocation.
bool inOneAllocation(BackendContext& ctx, uint64_t address, uint64_t pitch, uint64_t width,
                     uint64_t height) {
  if (!width || !height) return true;
  if (height > 1 && pitch && height - 1 > (UINT64_MAX - width) / pitch) return false;
  uint64_t extent = (height - 1) * pitch + width;
  uint64_t base = 0, size = 0;
  return ctx.memGetAddressRange(address, &base, &size).ok() && extent <= size - (address - base);
}

LaunchShape shapeOf(Request::LaunchKernel::Reader k) {
  LaunchShape s;
  s.grid = {k.getGrid().getX(), k.getGrid().getY(), k.getGrid().getZ()};
  s.block = {k.getBlock().getX(), k.getBlock().getY(), k.getBlock().getZ()};
  s.sharedBytes = k.getSharedBytes();
  return s;
}

}  // namespace

Session::Session(uint64_t id, std::unique_ptr<transport::Connection> connection, Backend& backend,
                 ModuleCache& modules, PoolServer& server)
    : id_(id),
      connection_(std::move(connection)),
      backend_(backend),
      modules_(modules),
      server_(server),
      staging_(server.pinnedMemory()) {}

Session::~Session() {
  std::lock_guard lock(mutex_);
  contexts_.clear();
}

void Session::stop() { connection_->shutdown(); }

void Session::cancelIfPeerGone() {
  if (!connection_->peerClosed()) return;
  std::lock_guard lock(mutex_);
  for (auto& [id, c] : contexts_) {
    if (c.backend) c.backend->cancel();
  }
}

SessionSnapshot Session::snapshot() const {
  std::lock_guard lock(mutex_);
  SessionSnapshot s;
  s.id = id_;
  s.clientName = clientName_;
  s.transport = connection_->kind();
  s.contexts = static_cast<uint32_t>(contexts_.size());
  s.driver = driver_;
  s.tenant = tenantName_;
  s.rdma = connection_->counters();
  for (auto& [cid, c] : contexts_) {
    s.memoryUsed += c.backend->memoryUsed();
    s.devices.push_back(c.device);
  }
  return s;
}

void Session::run() {
  try {
    if (handshake()) {
      while (serveOne()) {
      }
    }
  } catch (const transport::TransportError& e) {
    // The peer went away or sent a broken frame: the session ends and its resources go with it.
    if (server_.verbose())
      std::cerr << "gpupoold: session " << id_ << " ended: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "gpupoold: session " << id_ << " ended on error: " << e.what() << "\n";
  }
  std::map<uint64_t, ContextEntry> doomed;
  {
    std::lock_guard lock(mutex_);
    doomed.swap(contexts_);
  }
  doomed.clear();   // releases memory, modules, streams and events outside the lock
  tenant_.reset();  // gives the tenant's quota back now, not when the session is reaped
  if (server_.verbose()) logRdmaCounters();
  if (admitted_) server_.driverSessionEnded();
  // The peer learns at once that the session is over; the Session object itself (and with it the
  // socket) lives until the server reaps it, which may be much later.
  connection_->shutdown();
}

// How this session's bulk bytes moved over RDMA (for operators, and for tests that prove the
// zero-copy paths and the registration cache end to end). Nothing for other transports.
void Session::logRdmaCounters() const {
  std::optional<transport::TransportCounters> rdma = connection_->counters();
  if (!rdma) return;
  std::cerr << "gpupoold: session " << id_
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
    if (hello.getProtocolVersion() != wire::PROTOCOL_VERSION) {
      setStatus(
          r, Status::error(CUDA_ERROR_NOT_SUPPORTED,
                           "incompatible protocol: client speaks version " +
                               std::to_string(hello.getProtocolVersion()) +
                               ", server speaks version " + std::to_string(wire::PROTOCOL_VERSION) +
                               "; use matching gpupool releases"));
      protocol::sendMessage(*connection_, reply);
      return false;
    }
    if (TenantPool* pool = server_.tenantPool()) {
      // Status probes may come without a token: they only read what /metrics also shows.
      auto account = pool->authenticate(hello.getAuthToken());
      if (!account && hello.getPurpose() != wire::Hello::Purpose::STATUS) {
        setStatus(r,
                  Status::error(CUDA_ERROR_NOT_PERMITTED,
                                hello.getAuthToken().size()
                                    ? "token refused: GPU_POOL_TOKEN is not a token of this pool"
                                    : "token required: set GPU_POOL_TOKEN to your tenant's token"));
        protocol::sendMessage(*connection_, reply);
        return false;
      }
      if (account) tenant_ = std::make_unique<TenantSession>(*pool, std::move(account));
    }
    {
      std::lock_guard lock(mutex_);
      clientName_ = hello.getClientName();
      if (tenant_) tenantName_ = tenant_->tenant();
      driver_ = hello.getPurpose() == wire::Hello::Purpose::DRIVER;
    }
    if (driver_ && tenant_) {
      std::string why;
      if (!tenant_->admitDriverSession(&why)) {
        setStatus(r, Status::error(CUDA_ERROR_DEVICE_UNAVAILABLE, why));
        protocol::sendMessage(*connection_, reply);
        return false;
      }
    }
    if (driver_) {
      admitted_ = server_.admitDriverSession();
      if (!admitted_) {
        setStatus(r, Status::error(CUDA_ERROR_DEVICE_UNAVAILABLE,
                                   "server full: gpupoold serves at most " +
                                       std::to_string(server_.limits().maxSessions) +
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
  w.setBackendKind(backend_.kind());
  w.setDriverVersion(backend_.driverVersion());
  w.setFeatures(wire::FEATURE_BULK_FRAMES | wire::FEATURE_MODULE_CACHE);
  w.setSessionId(id_);
  w.setRdmaEndpoint(server_.rdmaEndpoint());
  auto [base, size] = backend_.deviceAddressWindow();
  w.setDeviceAddressBase(base);
  w.setDeviceAddressSize(size);
  const auto& devices = backend_.devices();
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
    out.setBackendKind(backend_.kind());
    auto attrs = out.initAttributes(static_cast<unsigned>(d.attributes.size()));
    for (unsigned a = 0; a < d.attributes.size(); ++a) attrs.set(a, d.attributes[a]);
  }
  protocol::sendMessage(*connection_, reply);
  return true;
}

void Session::consumeBulk(uint64_t& remaining) {
  if (remaining) connection_->discardBulk(remaining);
  remaining = 0;
}

bool Session::serveOne() {
  protocol::IncomingMessage in(*connection_);
  uint64_t bulk = in.bulkBytes();
  protocol::OutgoingMessage reply(*connection_);  // in the SEND buffer, over RDMA
  std::vector<transport::ConstBuffer> replyBulk;
  bool noReply = false;
  try {
    auto request = in.root<Request>();
    noReply = request.getNoReply();
    dispatch(request, bulk, noReply, reply, replyBulk);
  } catch (const kj::Exception& e) {
    // A message that is not valid Cap'n Proto, or one that exceeds the reader limits.
    auto r = reply.initRoot<Response>();
    setStatus(r, Status::error(CUDA_ERROR_INVALID_VALUE,
                               "malformed request: " + std::string(e.getDescription().cStr())));
    replyBulk.clear();
    stagedReply_.reset();
    noReply = false;
    // The frame boundary is still known, so the session can go on once the bulk is skipped.
    connection_->discardBulk(connection_->pendingBulk());
  }
  auto r = reply.getRoot<Response>();
  if (noReply) {
    stagedReply_.reset();  // a read nobody waits for is not sent
    if (r.getResult() != CUDA_SUCCESS && deferredResult_ == CUDA_SUCCESS) {
      deferredResult_ = static_cast<CUresult>(r.getResult());
      deferredMessage_ = r.getMessage().cStr();
    }
    return true;
  }
  if (deferredResult_ != CUDA_SUCCESS) {
    r.setDeferredResult(deferredResult_);
    r.setDeferredMessage(deferredMessage_);
    deferredResult_ = CUDA_SUCCESS;
    deferredMessage_.clear();
  }
  if (stagedReply_) {
    Status late = stagedReply_->send(reply);
    stagedReply_.reset();
    // The reply has left: a failure while streaming its bulk is reported with the next one.
    if (!late.ok() && deferredResult_ == CUDA_SUCCESS) {
      deferredResult_ = late.code;
      deferredMessage_ = late.message;
    }
    return true;
  }
  protocol::sendMessage(*connection_, reply, replyBulk);
  return true;
}

BackendContext* Session::context(uint64_t id, Status* status) {
  std::lock_guard lock(mutex_);
  auto it = contexts_.find(id);
  if (it == contexts_.end()) {
    *status = Status::error(CUDA_ERROR_INVALID_CONTEXT, "unknown context " + std::to_string(id));
    return nullptr;
  }
  return it->second.backend.get();
}

void Session::dispatch(Request::Reader request, uint64_t bulkBytes, bool noReply,
                       capnp::MessageBuilder& reply,
                       std::vector<transport::ConstBuffer>& replyBulk) {
  auto r = reply.initRoot<Response>();
  Status st;
  uint64_t bulk = bulkBytes;
  BackendContext* ctx = nullptr;
  uint64_t contextId = 0;  // for the tenant's meter
  auto withContext = [&](uint64_t id) {
    contextId = id;
    ctx = context(id, &st);
    return ctx != nullptr;
  };

  switch (request.which()) {
    case Request::HELLO:
      st = Status::error(CUDA_ERROR_INVALID_VALUE, "Hello sent twice");
      break;

    case Request::PING:
      // The raw-wire baseline: the bulk comes back unchanged.
      if (bulk > kMaxPingBytes) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "ping bulk over the 64 MiB limit");
        break;
      }
      staging_.resize(bulk);
      connection_->receiveBulk(staging_.data(), bulk);
      bulk = 0;
      replyBulk.push_back({staging_.data(), staging_.size()});
      break;

    case Request::SINK:
      // The raw-wire baseline for throughput: the bytes are read and dropped.
      staging_.resize(std::min(bulk, kChunkBytes));
      while (bulk) {
        uint64_t n = std::min(bulk, kChunkBytes);
        connection_->receiveBulk(staging_.data(), n);
        bulk -= n;
      }
      break;

    case Request::SOURCE: {
      uint64_t bytes = request.getSource();
      if (bytes > kMaxImageBytes) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "source request too large");
        break;
      }
      staging_.resize(bytes);
      replyBulk.push_back({staging_.data(), bytes});
      break;
    }

    case Request::STATUS:
      server_.fillStatus(r.initStatus());
      break;

    case Request::CTX_CREATE: {
      auto c = request.getCtxCreate();
      std::unique_ptr<BackendContext> created;
      if (tenant_) st = tenant_->checkDevice(static_cast<int>(c.getDevice()));
      if (st.ok()) st = backend_.createContext(c.getDevice(), c.getFlags(), &created);
      if (st.ok()) {
        std::lock_guard lock(mutex_);
        uint64_t id = nextContext_++;
        if (tenant_) tenant_->attachContext(id, static_cast<int>(c.getDevice()), *created);
        contexts_[id] = ContextEntry{c.getDevice(), std::move(created)};
        r.setHandle(id);
      }
      break;
    }
    case Request::CTX_DESTROY: {
      std::unique_ptr<BackendContext> doomed;
      {
        std::lock_guard lock(mutex_);
        auto it = contexts_.find(request.getCtxDestroy());
        if (it == contexts_.end()) {
          st = Status::error(CUDA_ERROR_INVALID_CONTEXT, "unknown context");
        } else {
          doomed = std::move(it->second.backend);
          contexts_.erase(it);
          modulesLoaded_ -= modulesPerContext_[request.getCtxDestroy()];
          modulesPerContext_.erase(request.getCtxDestroy());
          if (tenant_) tenant_->contextDestroyed(request.getCtxDestroy());
        }
      }
      doomed.reset();
      break;
    }
    case Request::CTX_SYNCHRONIZE:
      if (withContext(request.getCtxSynchronize())) st = ctx->synchronize();
      break;

    case Request::MEM_ALLOC: {
      auto m = request.getMemAlloc();
      if (!withContext(m.getContext())) break;
      uint64_t address = 0, pitch = 0;
      if (m.getPitchWidth()) {
        // Rows padded to 512 bytes, as the texture pitch alignment of real devices.
        uint64_t width = m.getPitchWidth();
        pitch = (width + 511) / 512 * 512;
        uint64_t height = m.getBytes();
        if (height == 0 || width == 0 || pitch > UINT64_MAX / height) {
          st = Status::error(CUDA_ERROR_INVALID_VALUE, "invalid pitched allocation");
          break;
        }
        if (tenant_) st = tenant_->reserve(m.getContext(), pitch * height);
        if (st.ok()) {
          st = ctx->memAlloc(pitch * height, &address);
          if (tenant_) tenant_->settle(m.getContext(), *ctx, pitch * height, st.ok(), address);
        }
      } else {
        if (tenant_) st = tenant_->reserve(m.getContext(), m.getBytes());
        if (st.ok()) {
          st = ctx->memAlloc(m.getBytes(), &address);
          if (tenant_) tenant_->settle(m.getContext(), *ctx, m.getBytes(), st.ok(), address);
        }
      }
      if (st.ok()) {
        auto out = r.initMemAlloc();
        out.setAddress(address);
        out.setPitch(pitch);
      }
      break;
    }
    case Request::MEM_FREE: {
      auto m = request.getMemFree();
      if (!withContext(m.getContext())) break;
      uint64_t freed = tenant_ ? TenantSession::allocationSize(*ctx, m.getAddress()) : 0;
      st = ctx->memFree(m.getAddress());
      if (tenant_ && st.ok()) tenant_->freed(m.getContext(), freed);
      break;
    }
    case Request::MEM_GET_INFO:
      if (withContext(request.getMemGetInfo())) {
        uint64_t freeBytes = 0, totalBytes = 0;
        st = ctx->memGetInfo(&freeBytes, &totalBytes);
        if (tenant_) tenant_->memoryView(&freeBytes, &totalBytes);
        auto out = r.initMemInfo();
        out.setFree(freeBytes);
        out.setTotal(totalBytes);
      }
      break;
    case Request::MEM_GET_ADDRESS_RANGE: {
      auto m = request.getMemGetAddressRange();
      if (withContext(m.getContext())) {
        uint64_t base = 0, size = 0;
        st = ctx->memGetAddressRange(m.getAddress(), &base, &size);
        if (st.ok()) {
          auto out = r.initAddressRange();
          out.setAddress(base);
          out.setBytes(size);
        }
      }
      break;
    }

    case Request::MEMCPY_HTO_D: {
      auto m = request.getMemcpyHtoD();
      if (!withContext(m.getContext())) break;
      uint64_t bytes = m.getBytes();
      if (bytes != bulk) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "copy size does not match the bytes sent");
        break;
      }
      // Check the whole destination first so a bad range writes nothing.
      uint64_t base = 0, size = 0;
      if (bytes && (!ctx->memGetAddressRange(m.getDst(), &base, &size).ok() ||
                    bytes > size - (m.getDst() - base))) {
        st =
            Status::error(CUDA_ERROR_INVALID_VALUE, "invalid device range for host-to-device copy");
        break;
      }
      if (void* direct = m.getAsync() || !bytes ? nullptr : ctx->hostView(m.getDst(), bytes)) {
        // Where the backend can expose the destination, the bytes land there straight from the
        // socket: no staging copy at all.
        if (st = ctx->streamSynchronize(m.getStream()); !st.ok()) break;
        connection_->receiveBulk(direct, bytes);
        bulk = 0;
        break;
      }
      if (auto staged = bytes ? stagedHostToDevice(*connection_, *ctx, m.getDst(), bytes,
                                                   m.getStream(), m.getAsync())
                              : std::nullopt) {
        st = *staged;
        bulk = connection_->pendingBulk();
        break;
      }
      // A backend without staging buffers: chunks copied one after another.
      staging_.resize(std::min(bytes, kChunkBytes));
      for (uint64_t done = 0; done < bytes && st.ok();) {
        uint64_t n = std::min(bytes - done, kChunkBytes);
        connection_->receiveBulk(staging_.data(), n);
        bulk -= n;
        st = ctx->copyHostToDevice(m.getDst() + done, staging_.data(), n, m.getStream(),
                                   m.getAsync());
        done += n;
      }
      break;
    }
    case Request::MEMCPY_DTO_H: {
      auto m = request.getMemcpyDtoH();
      if (!withContext(m.getContext())) break;
      uint64_t bytes = m.getBytes();
      uint64_t base = 0, size = 0;
      if (bytes && (!ctx->memGetAddressRange(m.getSrc(), &base, &size).ok() ||
                    bytes > size - (m.getSrc() - base))) {
        st =
            Status::error(CUDA_ERROR_INVALID_VALUE, "invalid device range for device-to-host copy");
        break;
      }
      if (void* direct = bytes ? ctx->hostView(m.getSrc(), bytes) : nullptr) {
        // Sent straight from device memory; nothing runs on the stream until the reply is out.
        if (st = ctx->streamSynchronize(m.getStream()); !st.ok()) break;
        replyBulk.push_back({direct, bytes});
        break;
      }
      // Pipelined through staging where the backend and transport allow: serveOne sends it.
      if (auto started = bytes ? StagedDeviceRead::start(*connection_, *ctx, m.getSrc(), bytes,
                                                         m.getStream(), &stagedReply_)
                               : std::nullopt) {
        st = *started;
        break;
      }
      staging_.resize(bytes);
      st = ctx->copyDeviceToHost(staging_.data(), m.getSrc(), bytes, m.getStream());
      if (st.ok() && bytes) replyBulk.push_back({staging_.data(), bytes});
      break;
    }
    case Request::MEMCPY_DTO_D: {
      auto m = request.getMemcpyDtoD();
      if (withContext(m.getContext())) {
        st = ctx->copyDeviceToDevice(m.getDst(), m.getSrc(), m.getBytes(), m.getStream(),
                                     m.getAsync());
      }
      break;
    }
    case Request::MEMCPY2_D: {
      auto m = request.getMemcpy2D();
      if (!withContext(m.getContext())) break;
      Copy2D c;
      c.srcIsDevice = m.getSrcIsDevice();
      c.dstIsDevice = m.getDstIsDevice();
      c.widthBytes = m.getWidthBytes();
      c.height = m.getHeight();
      c.srcDevice = m.getSrc().getAddress();
      c.srcPitch = m.getSrc().getPitch();
      c.dstDevice = m.getDst().getAddress();
      c.dstPitch = m.getDst().getPitch();
      if (!c.srcIsDevice && !c.dstIsDevice) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "host-to-host copies stay on the client");
        break;
      }
      if (c.height && c.widthBytes > UINT64_MAX / c.height) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "2D copy too large");
        break;
      }
      uint64_t packed = c.widthBytes * c.height;
      if (!c.srcIsDevice) {
        if (bulk != packed) {
          st =
              Status::error(CUDA_ERROR_INVALID_VALUE, "2D copy size does not match the bytes sent");
          break;
        }
        staging_.resize(packed);
        connection_->receiveBulk(staging_.data(), packed);
        bulk = 0;
        c.srcHost = staging_.data();
        c.srcPitch = c.widthBytes;
      }
      if (!c.dstIsDevice) {
        // The reply is staged whole: the rows must lie in one allocation before that many bytes
        // are allocated for them.
        if (!inOneAllocation(*ctx, c.srcDevice, c.srcPitch, c.widthBytes, c.height)) {
          st = Status::error(CUDA_ERROR_INVALID_VALUE, "invalid device range for 2D copy");
          break;
        }
        staging_.resize(packed);
        c.dstHost = staging_.data();
        c.dstPitch = c.widthBytes;
      }
      st = ctx->copy2D(c, m.getStream(), m.getAsync() && c.dstIsDevice);
      if (st.ok() && !c.dstIsDevice && packed) replyBulk.push_back({staging_.data(), packed});
      break;
    }
    case Request::MEMSET: {
      auto m = request.getMemset();
      if (withContext(m.getContext())) {
        st = ctx->memset(m.getDst(), m.getValue(), m.getElementSize(), m.getWidth(), m.getHeight(),
                         m.getPitch(), m.getStream(), m.getAsync());
      }
      break;
    }

    case Request::MODULE_LOAD: {
      auto m = request.getModuleLoad();
      if (!withContext(m.getContext())) break;
      if (m.getHash().size() != 32) {
        st = Status::error(CUDA_ERROR_INVALID_VALUE, "module hash must be 32 bytes of SHA-256");
        break;
      }
      protocol::Sha256Digest key;
      std::memcpy(key.data(), m.getHash().begin(), 32);
      std::shared_ptr<const std::vector<uint8_t>> image;
      if (m.getHasImage()) {
        if (bulk != m.getImageBytes() || bulk > kMaxImageBytes || bulk == 0) {
          st = Status::error(CUDA_ERROR_INVALID_IMAGE, "module image size is invalid");
          break;
        }
        auto bytes = std::make_shared<std::vector<uint8_t>>(bulk);
        connection_->receiveBulk(bytes->data(), bulk);
        bulk = 0;
        if (modules_.insert(bytes) != key) {
          st = Status::error(CUDA_ERROR_INVALID_IMAGE, "module image does not match its hash");
          break;
        }
        image = bytes;
      } else {
        image = modules_.find(key);
        if (!image) {
          r.setNeedImage();
          st = Status::error(CUDA_ERROR_NOT_FOUND, "image not cached; send it");
          break;
        }
      }
      if (unsigned limit = server_.limits().maxModulesPerSession;
          limit && modulesLoaded_ >= limit) {
        st = Status::error(CUDA_ERROR_OUT_OF_MEMORY,
                           "module limit: a session may hold " + std::to_string(limit) +
                               " loaded modules (gpupoold --max-modules-per-session); unload some");
        break;
      }
      uint64_t module = 0;
      st = ctx->moduleLoad(*image, &module);
      if (st.ok()) {
        r.setHandle(module);
        ++modulesLoaded_;
        ++modulesPerContext_[m.getContext()];
      }
      break;
    }
    case Request::MODULE_UNLOAD: {
      auto m = request.getModuleUnload();
      if (withContext(m.getContext())) st = ctx->moduleUnload(m.getModule());
      if (st.ok() && modulesPerContext_[m.getContext()] > 0) {
        --modulesLoaded_;
        --modulesPerContext_[m.getContext()];
      }
      break;
    }
    case Request::MODULE_GET_FUNCTION: {
      auto m = request.getModuleGetFunction();
      if (!withContext(m.getContext())) break;
      FunctionDescription f;
      st = ctx->moduleGetFunction(m.getModule(), m.getName(), &f);
      if (st.ok()) {
        auto out = r.initFunction();
        out.setHandle(f.handle);
        auto params = out.initParams(static_cast<unsigned>(f.params.size()));
        for (unsigned i = 0; i < f.params.size(); ++i) {
          params[i].setOffset(f.params[i].offset);
          params[i].setSize(f.params[i].size);
        }
        auto attrs = out.initAttributes(static_cast<unsigned>(f.attributes.size()));
        for (unsigned i = 0; i < f.attributes.size(); ++i) attrs.set(i, f.attributes[i]);
      }
      break;
    }
    case Request::MODULE_GET_GLOBAL: {
      auto m = request.getModuleGetGlobal();
      if (!withContext(m.getContext())) break;
      uint64_t address = 0, bytes = 0;
      st = ctx->moduleGetGlobal(m.getModule(), m.getName(), &address, &bytes);
      if (st.ok()) {
        auto out = r.initGlobal();
        out.setAddress(address);
        out.setBytes(bytes);
      }
      break;
    }

    case Request::LAUNCH_KERNEL: {
      auto k = request.getLaunchKernel();
      if (!withContext(k.getContext())) break;
      auto params = k.getParams();
      st = ctx->launch(k.getFunction(), shapeOf(k), k.getStream(),
                       std::span<const uint8_t>(params.begin(), params.size()));
      break;
    }
    case Request::FUNC_SET_ATTRIBUTE: {
      auto f = request.getFuncSetAttribute();
      if (withContext(f.getContext())) {
        st = ctx->funcSetAttribute(f.getFunction(), f.getAttribute(), f.getValue());
      }
      break;
    }
    case Request::OCCUPANCY: {
      auto o = request.getOccupancy();
      if (!withContext(o.getContext())) break;
      int blocks = 0;
      st = ctx->occupancyMaxActiveBlocks(o.getFunction(), o.getBlockSize(),
                                         o.getDynamicSharedBytes(), o.getFlags(), &blocks);
      if (st.ok()) r.setValue(blocks);
      break;
    }

    case Request::STREAM_CREATE: {
      auto s = request.getStreamCreate();
      if (!withContext(s.getContext())) break;
      uint64_t stream = 0;
      st = ctx->streamCreate(s.getFlags(), s.getPriority(), &stream);
      if (st.ok()) r.setHandle(stream);
      break;
    }
    case Request::STREAM_DESTROY: {
      auto s = request.getStreamDestroy();
      if (withContext(s.getContext())) st = ctx->streamDestroy(s.getStream());
      break;
    }
    case Request::STREAM_SYNCHRONIZE: {
      auto s = request.getStreamSynchronize();
      if (withContext(s.getContext())) st = ctx->streamSynchronize(s.getStream());
      break;
    }
    case Request::STREAM_QUERY: {
      auto s = request.getStreamQuery();
      if (withContext(s.getContext())) st = ctx->streamQuery(s.getStream());
      break;
    }
    case Request::STREAM_WAIT_EVENT: {
      auto s = request.getStreamWaitEvent();
      if (withContext(s.getContext())) st = ctx->streamWaitEvent(s.getStream(), s.getEvent());
      break;
    }
    case Request::EVENT_CREATE: {
      auto e = request.getEventCreate();
      if (!withContext(e.getContext())) break;
      uint64_t event = 0;
      st = ctx->eventCreate(e.getFlags(), &event);
      if (st.ok()) r.setHandle(event);
      break;
    }
    case Request::EVENT_DESTROY: {
      auto e = request.getEventDestroy();
      if (withContext(e.getContext())) st = ctx->eventDestroy(e.getEvent());
      break;
    }
    case Request::EVENT_RECORD: {
      auto e = request.getEventRecord();
      if (withContext(e.getContext())) st = ctx->eventRecord(e.getEvent(), e.getStream());
      break;
    }
    case Request::EVENT_SYNCHRONIZE: {
      auto e = request.getEventSynchronize();
      if (withContext(e.getContext())) st = ctx->eventSynchronize(e.getEvent());
      break;
    }
    case Request::EVENT_QUERY: {
      auto e = request.getEventQuery();
      if (withContext(e.getContext())) st = ctx->eventQuery(e.getEvent());
      break;
    }
    case Request::EVENT_ELAPSED_TIME: {
      auto e = request.getEventElapsedTime();
      if (!withContext(e.getContext())) break;
      float ms = 0;
      st = ctx->eventElapsedTime(e.getStart(), e.getEnd(), &ms);
      if (st.ok()) r.setElapsedMs(ms);
      break;
    }
    default:
      st = Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "request kind " + std::to_string(static_cast<int>(request.which())) +
                             " is not supported by this server");
  }
  consumeBulk(bulk);
  setStatus(r, st);
  if (tenant_) {
    uint64_t bytesOut = 0;
    for (const auto& b : replyBulk) bytesOut += b.size;
    if (stagedReply_) bytesOut += stagedReply_->bytes();
    tenant_->recordCall(contextId, bulkBytes, bytesOut);
  }
  // Device printf output waits for a request that is answered, so none is lost to noReply ones.
  if (ctx && !noReply) {
    std::string output = ctx->takeDeviceOutput();
    if (!output.empty()) r.setDeviceOutput(output);
  }
}

}  // namespace gpupool::server
