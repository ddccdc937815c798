#include "server/pool_server.h"

#include <algorithm>
#include <iostream>
#include <system_error>

#include "server/device_uuid.h"
#include "server/tenant_status.h"

namespace gpupool::server {

PoolServer::PoolServer(std::unique_ptr<Backend> backend, bool verbose)
    : backend_(std::move(backend)),
      modules_(2ull << 30),
      verbose_(verbose),
      started_(std::chrono::steady_clock::now()) {}

PoolServer::~PoolServer() {
  shutdown();
  if (watchdog_.joinable()) watchdog_.join();
  // Every connection is shut down: the loop's sessions end, and it stops once they all have.
  if (reactor_) reactor_->stop();
  std::list<Running> sessions;
  {
    std::lock_guard lock(mutex_);
    sessions.swap(sessions_);
  }
  for (auto& s : sessions) {
    if (s.thread.joinable()) s.thread.join();
  }
}

const char* PoolServer::version() { return "0.1.0"; }

bool PoolServer::admitDriverSession() {
  unsigned current = driverSessions_.load();
  do {
    if (limits_.maxSessions && current >= limits_.maxSessions) return false;
  } while (!driverSessions_.compare_exchange_weak(current, current + 1));
  return true;
}

void PoolServer::driverSessionEnded() { driverSessions_.fetch_sub(1); }

void PoolServer::serve(std::unique_ptr<transport::Listener> listener) {
  transport::Listener* l = listener.get();
  {
    std::lock_guard lock(mutex_);
    listenUrl_ = l->url();
    listener_ = std::move(listener);
    if (stopping_) return;
  }
  if (!reactor_) {
    reactor_ = std::make_unique<SessionReactor>(
        workers_ ? workers_ : SessionReactor::defaultWorkers(), eventLoop_);
  }
  std::cout << "listening on " << l->url() << std::endl;
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watchPeers(); });
  for (;;) {
    std::unique_ptr<transport::Connection> connection;
    try {
      connection = l->accept();
      // A client whose host dies or whose network is cut is noticed without any message from it,
      // so its session ends and its memory is released.
      connection->setDeadPeerTimeoutMs(limits_.clientHeartbeatMs);
    } catch (const transport::TransportError& e) {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      std::cerr << "gpupoold: " << e.what() << "\n";
      continue;
    }
    StrangerGate::Lease stranger = admitStranger(*connection);
    if (!stranger.held()) continue;  // closed, before any thread or state was spent on it
    reapFinished();
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    uint64_t id = nextSession_++;
    if (verbose_) std::cerr << "gpupoold: session " << id << " from " << connection->peer() << "\n";
    auto session = std::make_shared<Session>(id, std::move(connection), std::move(stranger),
                                             *backend_, modules_, requests_, *this);
    sessions_.push_back(Running{session, {}, false});
    startServing(std::prev(sessions_.end()), lock);
  }
}

void PoolServer::startServing(std::list<Running>::iterator running,
                              std::unique_lock<std::mutex>& lock) {
  std::shared_ptr<Session> session = running->session;
  if (session->readinessDescriptor() >= 0) {
    // Not under mutex_: a worker serving a session takes it (status), so the loop's locks come
    // first. `running` stays valid: only the session's end, not possible before this, erases it.
    lock.unlock();
    try {
      // An ended session leaves the list at once: its socket closes as soon as the loop lets go.
      reactor_->add(session, [this, running] {
        std::lock_guard erasing(mutex_);
        sessions_.erase(running);
      });
      return;
    } catch (const std::system_error& e) {
      std::cerr << "gpupoold: session " << session->id()
                << " served on a thread of its own: " << e.what() << "\n";
    }
    lock.lock();
  }
  Running& r = *running;
  r.thread = std::thread([this, session, &r] {
    session->run();
    std::lock_guard lock(mutex_);
    r.finished = true;
    ++finishedThreads_;
  });
}

StrangerGate::Lease PoolServer::admitStranger(transport::Connection& connection) {
  std::string source = sourceAddressOf(connection.peer());
  std::string why;
  StrangerGate::Lease lease = strangers_.admit(source, &why);
  if (!lease.held()) {
    if (strangers_.shouldLog(source, std::chrono::steady_clock::now())) {
      std::cerr << "gpupoold: refusing connections from " << source << ": " << why
                << " (logged once per " << StrangerGate::kLogInterval.count()
                << " s per address; counted in /metrics)\n";
    }
    connection.shutdown();
  }
  return lease;
}

void PoolServer::reapFinished() {
  std::list<Running> done;
  {
    std::lock_guard lock(mutex_);
    if (finishedThreads_ == 0) return;  // no walk over thousands of sessions on every accept
    finishedThreads_ = 0;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->finished) {
        auto next = std::next(it);
        done.splice(done.end(), sessions_, it);
        it = next;
      } else {
        ++it;
      }
    }
  }
  for (auto& s : done) s.thread.join();
}

void PoolServer::shutdown() {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  stopping_ = true;
  if (listener_) listener_->shutdown();
  for (auto& s : sessions_) s.session->stop();
  stopped_.notify_all();
}

void PoolServer::watchPeers() {
  std::unique_lock lock(mutex_);
  // Every connection's heartbeat gets a look this often (transport/tcp_peer_watch.h): one held by
  // the event loop between requests has no thread waiting on it. A look is one getsockopt.
  const auto lookEvery =
      std::chrono::milliseconds(transport::heartbeatLookIntervalMs(limits_.clientHeartbeatMs));
  auto lastLook = std::chrono::steady_clock::now();
  while (!stopping_) {
    stopped_.wait_for(lock, std::chrono::milliseconds(100));
    lock.unlock();
    reapFinished();  // threads of sessions that ended, so their sockets close soon
    lock.lock();
    if (limits_.clientHeartbeatMs && std::chrono::steady_clock::now() - lastLook >= lookEvery) {
      lastLook = std::chrono::steady_clock::now();
      std::vector<std::shared_ptr<Session>> all;
      for (auto& s : sessions_) {
        if (!s.finished) all.push_back(s.session);
      }
      lock.unlock();
      for (auto& s : all) s->checkPeer();
      lock.lock();
    }
    // Only sessions that may be running a call or are still in their handshake: idle ones cost
    // nothing here (their peer's leaving shows on the event loop).
    std::vector<std::shared_ptr<Session>> running;
    for (auto& s : sessions_) {
      if (!s.finished && (s.session->busy() || s.session->handshaking()))
        running.push_back(s.session);
    }
    lock.unlock();
    auto now = std::chrono::steady_clock::now();
    auto deadline = std::chrono::milliseconds(limits_.handshakeDeadlineMs);
    for (auto& s : running) {
      if (s->busy()) s->cancelIfPeerGone();
      s->closeIfHandshakeLate(now, deadline, [&] {
        strangers_.countDeadlineClose();
        std::string source = sourceAddressOf(s->peer());
        if (strangers_.shouldLog(source, now)) {
          std::cerr << "gpupoold: closed a connection from " << source << ": no Hello within "
                    << limits_.handshakeDeadlineMs
                    << " ms (--handshake-deadline-ms; logged once per "
                    << StrangerGate::kLogInterval.count() << " s per address)\n";
        }
      });
    }
    lock.lock();
  }
}

std::vector<AccountingRecord> PoolServer::accountingOn(int device, const std::string& tenant) {
  std::vector<AccountingRecord> running;
  {
    std::lock_guard lock(mutex_);
    for (auto& s : sessions_) {
      if (s.finished) continue;
      for (AccountingRecord& r : s.session->accounting()) {
        if (r.device == device && r.tenant == tenant) running.push_back(std::move(r));
      }
    }
  }
  std::vector<AccountingRecord> ended = accountingHistory_.onDevice(device, tenant);
  // A session that ended between the two looks is in both: its ended record stands.
  std::erase_if(running, [&](const AccountingRecord& r) {
    return std::any_of(ended.begin(), ended.end(),
                       [&](const AccountingRecord& e) { return e.sessionId == r.sessionId; });
  });
  running.insert(running.end(), ended.begin(), ended.end());
  return running;
}

void PoolServer::fillStatus(wire::Response::StatusReply::Builder status) {
  std::vector<SessionSnapshot> snapshots;
  {
    std::lock_guard lock(mutex_);
    for (auto& s : sessions_) {
      if (!s.finished) snapshots.push_back(s.session->snapshot());
    }
  }
  std::erase_if(snapshots, [](const SessionSnapshot& s) { return !s.driver; });
  status.setServerVersion(version());
  status.setBackendKind(backend_->kind());
  status.setListen(listenUrl_);
  status.setUptimeSeconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  const auto& devices = backend_->devices();
  auto ds = status.initDevices(static_cast<unsigned>(devices.size()));
  for (unsigned i = 0; i < devices.size(); ++i) {
    ds[i].setIndex(i);
    ds[i].setName(devices[i].name);
    ds[i].setMemoryUsed(backend_->deviceMemoryUsed(static_cast<int>(i)));
    ds[i].setMemoryTotal(devices[i].totalMemory);
    uint32_t users = 0;
    for (auto& s : snapshots) {
      if (std::find(s.devices.begin(), s.devices.end(), static_cast<int>(i)) != s.devices.end()) {
        ++users;
      }
    }
    ds[i].setSessions(users);
    if (i < identities_.size() && !identities_[i].uuid.empty()) {
      ds[i].setUuid(identities_[i].uuid);
      ds[i].setParent(identities_[i].parent);
      ds[i].setProfile(identities_[i].profile);
      if (!identities_[i].parent.empty()) {
        const MigPlacement& from = identities_[i].mig;
        auto mig = ds[i].initMig();
        mig.setParentName(from.parentName);
        mig.setParentMemoryTotal(from.parentMemoryBytes);
        mig.setIndex(from.index);
        mig.setMaxDevices(from.maxDevices);
        mig.setGpuInstanceId(from.gpuInstanceId);
        mig.setComputeInstanceId(from.computeInstanceId);
        mig.setModeChangePending(from.modeChangePending);
      }
    } else {
      ds[i].setUuid(formatDeviceUuid("GPU-", devices[i].uuid));
    }
    if (tenantPool_) {
      ds[i].setUtilization(tenantPool_->utilization(static_cast<int>(i)));
      ds[i].setUtilizationMeasured(true);
    }
    if (sensors_) sensors_->fill(i, ds[i].initSensors());
  }
  if (sensors_) status.setNvidiaDriverVersion(sensors_->driverVersion());
  auto ss = status.initSessions(static_cast<unsigned>(snapshots.size()));
  for (unsigned i = 0; i < snapshots.size(); ++i) {
    ss[i].setSessionId(snapshots[i].id);
    ss[i].setClientName(snapshots[i].clientName);
    ss[i].setMemoryUsed(snapshots[i].memoryUsed);
    ss[i].setTransport(snapshots[i].transport);
    ss[i].setContexts(snapshots[i].contexts);
    ss[i].setTenant(snapshots[i].tenant);
    auto used = ss[i].initDevices(static_cast<unsigned>(snapshots[i].devices.size()));
    for (unsigned d = 0; d < snapshots[i].devices.size(); ++d) {
      used.set(d, static_cast<uint32_t>(snapshots[i].devices[d]));
    }
    if (snapshots[i].ringBytesResident)
      ss[i].setShmRingBytesResident(*snapshots[i].ringBytesResident);
    if (const auto& rdma = snapshots[i].rdma) {
      auto r = ss[i].initRdma();
      r.setReceivedZeroCopy(rdma->bulkBytesReceivedZeroCopy);
      r.setReceivedWritten(rdma->bulkBytesReceivedWritten);
      r.setReceivedInline(rdma->bulkBytesReceivedInline);
      r.setSentByWrite(rdma->bulkBytesSentByWrite);
      r.setSentZeroCopy(rdma->bulkBytesSentZeroCopy);
      r.setSentInline(rdma->bulkBytesSentInline);
      r.setRegistrations(rdma->registrations);
      r.setRegistrationCacheHits(rdma->registrationCacheHits);
      r.setDeregistrations(rdma->deregistrations);
      r.setSends(rdma->sends);
      r.setCreditWaits(rdma->creditWaits);
    }
  }
  if (tenantPool_) fillTenantStatus(*tenantPool_, snapshots, status);
}

}  // namespace gpupool::server
