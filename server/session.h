// One client connection: the handshake, then requests answered one by one on the session's thread.
//
// Everything a session creates lives in its BackendContexts and is released when the session ends,
// however it ends (clean disconnect, dropped connection, malformed traffic). A malformed message is
// answered with an error; a broken frame ends the session. Nothing a client sends can crash the
// server.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "server/backend.h"
#include "server/module_cache.h"
#include "server/scratch_buffer.h"
#include "server/staged_copy.h"
#include "server/tenant_session.h"
#include "transport/connection.h"

namespace gpupool::server {

class PoolServer;

struct SessionSnapshot {
  uint64_t id = 0;
  std::string clientName;
  std::string transport;
  uint64_t memoryUsed = 0;
  uint32_t contexts = 0;
  std::vector<int> devices;                          // device of each context
  bool driver = false;                               // a libcuda session (not a status probe)
  std::string tenant;                                // empty when the server runs open
  std::optional<transport::TransportCounters> rdma;  // RDMA sessions only
};

class Session {
 public:
  Session(uint64_t id, std::unique_ptr<transport::Connection> connection, Backend& backend,
          ModuleCache& modules, PoolServer& server);
  ~Session();

  // Serves the connection until it ends. Never throws.
  void run();
  // Asks run() to return soon (used at server shutdown).
  void stop();
  // When the client has gone away, stops its running kernels so a call blocked on them returns
  // and the session can end (PoolServer's watchdog calls this from its own thread).
  void cancelIfPeerGone();

  SessionSnapshot snapshot() const;
  uint64_t id() const { return id_; }

 private:
  struct ContextEntry {
    int device = 0;
    std::unique_ptr<BackendContext> backend;
  };

  bool handshake();
  void logRdmaCounters() const;
  // Handles one request. Returns false when the session must end.
  bool serveOne();
  void dispatch(wire::Request::Reader request, uint64_t bulkBytes, bool noReply,
                capnp::MessageBuilder& reply, std::vector<transport::ConstBuffer>& replyBulk);
  BackendContext* context(uint64_t id, Status* status);
  void consumeBulk(uint64_t& remaining);

  const uint64_t id_;
  std::unique_ptr<transport::Connection> connection_;
  Backend& backend_;
  ModuleCache& modules_;
  PoolServer& server_;

  mutable std::mutex mutex_;  // guards contexts_ and clientName_ against status snapshots
  std::map<uint64_t, ContextEntry> contexts_;
  uint64_t nextContext_ = 1;
  std::string clientName_;
  std::string tenantName_;
  bool driver_ = false;

  ScratchBuffer staging_;  // bulk bytes in and out, reused across requests
  // A device→host copy whose bytes follow the reply as they are read (set by dispatch).
  std::optional<StagedDeviceRead> stagedReply_;
  // The first failure among noReply requests, reported with the next Response.
  CUresult deferredResult_ = CUDA_SUCCESS;
  std::string deferredMessage_;
  // The tenant this session authenticated as; null when the server runs without --config.
  std::unique_ptr<TenantSession> tenant_;
  // Counted by PoolServer::admitDriverSession (the --max-sessions limit).
  bool admitted_ = false;
  // Modules loaded and not unloaded, in all contexts and per context (the module limit).
  unsigned modulesLoaded_ = 0;
  std::map<uint64_t, unsigned> modulesPerContext_;
};

}  // namespace gpupool::server
