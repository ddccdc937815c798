// gpupoold's core: accepts connections on its listeners and serves one Session per connection,
// over one shared Backend: by the event loop and its workers (SessionReactor) where the transport
// allows it (TCP, TLS), on a thread of its own otherwise (RDMA).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "server/backend.h"
#include "server/device_sensors.h"
#include "server/handlers/request_table.h"
#include "server/ipc_memory_registry.h"
#include "server/mig_enumeration.h"
#include "server/module_cache.h"
#include "server/session.h"
#include "server/session_accounting.h"
#include "server/session_reactor.h"
#include "server/stranger_gate.h"
#include "server/tenant_pool.h"
#include "transport/connection.h"

namespace gpupool::server {

class PoolServer {
 public:
  PoolServer(std::unique_ptr<Backend> backend, bool verbose);
  ~PoolServer();

  // Serves `listener` until shutdown(). Blocks.
  void serve(std::unique_ptr<transport::Listener> listener);
  // Stops accepting, ends every session, and makes serve() return. Safe from any thread.
  void shutdown();

  void fillStatus(wire::Response::StatusReply::Builder status);
  bool verbose() const { return verbose_; }
  // The RDMA endpoint Welcome advertises (set before serve(); empty = TCP only).
  void setRdmaEndpoint(std::string url) { rdmaEndpoint_ = std::move(url); }
  const std::string& rdmaEndpoint() const { return rdmaEndpoint_; }
  void setShmEndpoint(std::string url) { shmEndpoint_ = std::move(url); }
  const std::string& shmEndpoint() const { return shmEndpoint_; }
  // Random per process, in every Welcome: a client upgrading to shm checks it found this server.
  uint64_t instance() const { return instance_; }
  // Where sessions note their long-lived buffers for the transport (none: not noted). Must outlive
  // the server.
  void setPinnedMemory(transport::PinnedMemory* pinned) { pinnedMemory_ = pinned; }
  transport::PinnedMemory* pinnedMemory() const { return pinnedMemory_; }
  // Tenancy from --config (set before serve()): tokens, quotas, scheduling, metering. Null = open.
  void setTenantPool(std::shared_ptr<TenantPool> pool) { tenantPool_ = std::move(pool); }
  TenantPool* tenantPool() const { return tenantPool_.get(); }
  // The CUDA IPC memory tokens the sessions exported.
  IpcMemoryRegistry& ipcMemory() { return ipcMemory_; }
  // NVML accounting: ended sessions' records (Session::end adds them).
  AccountingHistory& accountingHistory() { return accountingHistory_; }
  // The accounting records of `tenant`'s driver sessions on `device`: running ones, then those
  // that ended and are still kept.
  std::vector<AccountingRecord> accountingOn(int device, const std::string& tenant);
  // What status shows of a device beyond the backend's description (set before serve()): its UUID
  // as NVIDIA tools write it ("MIG-…" for a MIG instance) and, for a MIG instance, its parent
  // GPU's UUID and its profile. Devices without one show "GPU-…" and no parent.
  struct DeviceIdentity {
    std::string uuid, parent, profile;
    MigPlacement mig;  // where a MIG instance sits on its parent (read when parent is set)
  };
  void setDeviceIdentities(std::vector<DeviceIdentity> identities) {
    identities_ = std::move(identities);
  }
  // The server's NVML readings of its devices, for status (set before serve()); none on the emu.
  void setDeviceSensors(std::unique_ptr<DeviceSensors> sensors) { sensors_ = std::move(sensors); }
  static const char* version();

  // Limits on what clients may hold (set before serve(); docs/hardening.md). 0 = unlimited.
  struct Limits {
    unsigned maxSessions = 0;              // concurrent driver sessions on this server
    unsigned maxModulesPerSession = 1024;  // modules loaded and not unloaded, all contexts
    // A connection must complete its Hello (and TLS handshake) this soon after it is accepted, or
    // it is closed, however it trickles its bytes.
    unsigned handshakeDeadlineMs = 10000;
    // Connections that have not completed their Hello, at once: all, and from one address.
    StrangerGate::Limits unauthenticated;
    // A client whose host stops answering TCP heartbeats this long is gone: its session ends and
    // its memory is freed (transport/tcp_peer_watch.h; 0: off).
    unsigned clientHeartbeatMs = 15000;
  };
  void setLimits(const Limits& limits) {
    limits_ = limits;
    strangers_.setLimits(limits.unauthenticated);
  }
  const Limits& limits() const { return limits_; }
  // Workers of the event loop that serves the sessions (set before serve(); 0: the
  // default, SessionReactor::defaultWorkers()).
  void setWorkers(unsigned workers) { workers_ = workers; }
  // What the event loop's workers wait on: "epoll" (the default) or "io_uring" (set before
  // serve()).
  void setEventLoop(std::string kind) { eventLoop_ = std::move(kind); }
  // Counts a starting driver session; false (counting nothing) when the server is full.
  bool admitDriverSession();
  // Uncounts a session admitDriverSession() counted.
  void driverSessionEnded();
  // Connections that have not completed their Hello: how many, and how many were refused or
  // closed for it (for /metrics).
  StrangerGate::Counters strangerCounters() const { return strangers_.counters(); }
  // Whether a fatal device fault lost the backend's devices (Backend::deviceFaulted), for /metrics.
  bool deviceFaulted() const { return backend_->deviceFaulted(); }
  size_t deviceCount() const { return backend_->devices().size(); }

 private:
  struct Running {
    std::shared_ptr<Session> session;
    std::thread thread;     // none when the event loop serves it
    bool finished = false;  // its thread has returned (the loop's sessions leave the list instead)
  };
  // Serves `running` on the event loop, or on a thread of its own when its transport has no
  // readiness descriptor. Called with `lock` (on mutex_) held; may let go of it.
  void startServing(std::list<Running>::iterator running, std::unique_lock<std::mutex>& lock);
  void reapFinished();
  // Every 100 ms until shutdown: reaps ended sessions' threads, cancels the work of sessions whose
  // client is gone and closes connections past their handshake deadline.
  void watchPeers();
  // Refuses a connection the stranger limits do not admit (closing it, logging once per source
  // per interval); otherwise returns its lease.
  StrangerGate::Lease admitStranger(transport::Connection& connection);

  std::unique_ptr<Backend> backend_;
  ModuleCache modules_;
  RequestTable requests_;  // every request kind this server serves, by family
  bool verbose_;
  std::chrono::steady_clock::time_point started_;
  std::string listenUrl_;
  std::string rdmaEndpoint_;
  std::string shmEndpoint_;
  const uint64_t instance_ = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  transport::PinnedMemory* pinnedMemory_ = nullptr;
  std::shared_ptr<TenantPool> tenantPool_;
  IpcMemoryRegistry ipcMemory_;
  AccountingHistory accountingHistory_;
  std::vector<DeviceIdentity> identities_;
  std::unique_ptr<DeviceSensors> sensors_;
  Limits limits_;
  StrangerGate strangers_;
  std::atomic<unsigned> driverSessions_{0};
  unsigned workers_ = 0;
  std::string eventLoop_ = "epoll";
  std::unique_ptr<SessionReactor> reactor_;  // created by serve()
  std::thread watchdog_;
  std::condition_variable stopped_;  // wakes the watchdog at shutdown

  std::mutex mutex_;
  std::list<Running> sessions_;
  unsigned finishedThreads_ = 0;  // sessions_ whose thread has returned, not yet reaped
  std::unique_ptr<transport::Listener> listener_;
  bool stopping_ = false;
  uint64_t nextSession_ = 1;
};

}  // namespace gpupool::server
