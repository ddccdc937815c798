// What a request handler works with: the session's state (SessionState), and for one request its
// bulk, its reply and the context it names (RequestContext).
//
// Handlers are plain functions, one file per API family, listed in one table (request_table.h);
// Session decodes a frame, looks its kind up there and sends what the handler left in the
// RequestContext. A handler returns the call's Status; it may read the frame's bulk, add reply
// bulk, or leave a streamed device read in SessionState::stagedReply. Bulk it leaves unread is
// skipped after it returns. One request at a time per session (under its send lock), except that
// a row's `waitFor` step runs on a waiter thread beside it: it touches nothing but the context it
// names, which it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "server/backend.h"
#include "server/host_gates.h"
#include "server/module_cache.h"
#include "server/scratch_buffer.h"
#include "server/session_accounting.h"
#include "server/shared_host_files.h"
#include "server/staged_copy.h"
#include "server/tenant_session.h"
#include "transport/connection.h"

namespace gpupool::server {

class PoolServer;
struct ExecutableGraph;  // graph_handlers.cc

// A session's contexts, by the handle the client knows them by. Guarded, since status snapshots
// read it from other threads.
class SessionContexts {
 public:
  struct Entry {
    int device = 0;
    // Shared: a device wait running on a waiter thread keeps its context alive.
    std::shared_ptr<BackendContext> backend;
  };

  // Null when `id` names no context of this session.
  std::shared_ptr<BackendContext> find(uint64_t id) const;
  // Takes `backend` and returns its new handle.
  uint64_t add(int device, std::unique_ptr<BackendContext> backend);
  // Removes context `id` and hands it over (null when unknown), so it is released outside the lock;
  // *device, when given, gets its device.
  std::shared_ptr<BackendContext> remove(uint64_t id, int* device = nullptr);
  // Per device, the sum of its contexts' memoryPeak() (NVML accounting).
  std::map<int, uint64_t> peaksByDevice() const;
  // Removes every context (the session is ending).
  std::map<uint64_t, Entry> takeAll();
  // Calls f(id, entry) for each context, under the lock.
  template <typename F>
  void forEach(F&& f) const {
    std::lock_guard lock(mutex_);
    for (const auto& [id, entry] : entries_) f(id, entry);
  }

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_ = 1;
};

// Everything a session holds across requests.
struct SessionState {
  // The scratch buffer's mappings are noted in `pinned` (when given) for the transport.
  SessionState(uint64_t id, transport::Connection& connection, Backend& backend,
               ModuleCache& modules, PoolServer& server, transport::PinnedMemory* pinned)
      : id(id),
        connection(connection),
        backend(backend),
        modules(modules),
        server(server),
        staging(pinned) {}

  const uint64_t id;
  transport::Connection& connection;
  Backend& backend;
  ModuleCache& modules;
  PoolServer& server;

  SessionContexts contexts;
  HostGates hostGates;        // host functions' gates in this session's streams
  ScratchBuffer staging;      // bulk bytes in and out, reused across requests
  SharedHostFiles hostFiles;  // the client's pinned memory shared as files (shm sessions)
  // A device→host copy whose bytes follow the reply as they are read (set by a handler).
  std::optional<StagedDeviceRead> stagedReply;
  // The tenant this session authenticated as; null when the server runs without --config.
  std::unique_ptr<TenantSession> tenant;
  // NVML accounting: when it used each device, its kernel time and peak memory there.
  SessionAccounting accounting;
  // Modules loaded and not unloaded, in all contexts and per context (the module limit).
  unsigned modulesLoaded = 0;
  std::map<uint64_t, unsigned> modulesPerContext;
  // Executable graphs (cuGraphInstantiate), by the handle the client knows them by; they go with
  // the session.
  std::map<uint64_t, std::shared_ptr<ExecutableGraph>> graphs;
  uint64_t nextGraph = 1;
  // Managed allocations (managed_memory_handlers.cc), by address: their context and the hash of
  // each page as the client last saw it; and a fetch reply's bytes until they are sent.
  struct ManagedRegion {
    uint64_t context = 0;
    uint64_t bytes = 0;
    std::vector<uint64_t> pageHashes;
    uint64_t module = 0;  // a __managed__ variable's module (adoptGlobal); 0: cuMemAllocManaged
  };
  std::map<uint64_t, ManagedRegion> managed;
  std::vector<uint64_t> managedReplyRuns;
  std::vector<uint8_t> managedReplyBytes;
};

// One request being served.
class RequestContext {
 public:
  RequestContext(SessionState& session, uint64_t bulkBytes, wire::Response::Builder reply)
      : session(session), reply(reply), bulkBytes_(bulkBytes) {}

  SessionState& session;
  wire::Response::Builder reply;
  // Bulk sent after the reply message (buffers that stay valid until it is sent).
  std::vector<transport::ConstBuffer> replyBulk;

  // Sets *context to the session's context `id`, which the tenant's meter then charges this call
  // to; CUDA_ERROR_INVALID_CONTEXT when there is none.
  Status context(uint64_t id, BackendContext** context);
  // Returns call(context) for the session's context `id` (found as by context()), or
  // CUDA_ERROR_INVALID_CONTEXT.
  template <typename Call>
  Status withContext(uint64_t id, Call&& call) {
    BackendContext* found = nullptr;
    if (Status st = context(id, &found); !st.ok()) return st;
    return call(*found);
  }
  // The context the request named (null before context() found one) and its handle.
  BackendContext* namedContext() const { return context_.get(); }
  uint64_t namedContextId() const { return contextId_; }

  // Bulk bytes the frame announced, and the reading of them.
  uint64_t bulkBytes() const { return bulkBytes_; }
  void receiveBulk(void* dst, uint64_t bytes) { session.connection.receiveBulk(dst, bytes); }
  // Skips whatever bulk the handler left unread, so the next frame starts where it should.
  void discardUnreadBulk();
  // Bytes the reply carries after its message.
  uint64_t replyBulkBytes() const;

 private:
  uint64_t bulkBytes_;
  std::shared_ptr<BackendContext> context_;  // held while the request runs
  uint64_t contextId_ = 0;
};

// Without blocking: CUDA_SUCCESS when a wait for `stream` would return at once. Waiting for the
// legacy stream (0) also waits for the blocking streams, so it counts as drained only when the
// whole context is idle.
Status streamDrained(BackendContext& context, uint64_t stream);

// CUDA_ERROR_INVALID_VALUE ("invalid device range for `what`") unless `height` rows of `width`
// bytes, `pitch` apart from `address`, lie inside one allocation of `context`. Empty ranges pass.
Status checkDeviceRange(BackendContext& context, uint64_t address, uint64_t width, const char* what,
                        uint64_t pitch = 0, uint64_t height = 1);

// The operations of a streamMemOps request or of a graph's batch memory operation node, checked
// (1 to 255 of them; kinds, flags, alignment) into `ops` (memop_handlers.cc).
// Frees the session's executable graphs of context `context` (graph_handlers.cc): a context's
// graphs go before it, since a backend's build of one must not outlive the context.
void forgetContextGraphs(SessionState& session, uint64_t context);

Status readStreamMemOps(capnp::List<wire::Request::StreamMemOp>::Reader list,
                        std::vector<StreamMemOp>* ops);

// Every allocation, plain or from a pool, goes through these, so each byte counts against the
// tenant's quota the same way. chargedAllocation reserves `bytes` against the quota, runs
// `allocate` (which sets the address), and settles the charge to what the backend really allocated.
// chargedFree runs `free` and gives the allocation's bytes back to the tenant if it succeeds.
// Charges the tenant for the idle memory the context's pools hold now (chargedAllocation does
// it first, the pool handlers after every change).
void settlePoolCharge(RequestContext& request, BackendContext& context, uint64_t contextId);
Status chargedAllocation(RequestContext& request, BackendContext& context, uint64_t bytes,
                         const std::function<Status(uint64_t* address)>& allocate,
                         uint64_t* address);
Status chargedFree(RequestContext& request, BackendContext& context, uint64_t contextId,
                   uint64_t address, const std::function<Status()>& free);

}  // namespace gpupool::server
