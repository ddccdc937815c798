// One client connection: the handshake, then requests served in order on the session's thread,
// each by its handler in the RequestTable (server/handlers/). Device waits (synchronize requests)
// run on waiter threads instead (DeviceWaits), where the connection can send while it receives, so
// the session goes on serving the client's other threads; their replies leave when the device is
// done, carrying the request's callId. Replies are sent one at a time (sendMutex_).
//
// Everything a session creates lives in its BackendContexts and is released when the session ends,
// however it ends (clean disconnect, dropped connection, malformed traffic). A malformed message is
// answered with an error; a broken frame ends the session. Nothing a client sends can crash the
// server.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "protocol/message_codec.h"
#include "server/backend.h"
#include "server/device_waits.h"
#include "server/handlers/request_context.h"
#include "server/handlers/request_table.h"
#include "server/module_cache.h"
#include "server/session_accounting.h"
#include "server/stranger_gate.h"
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
  std::optional<uint64_t> ringBytesResident;         // shm sessions only
};

class Session {
 public:
  // `stranger` counts the connection as not yet authenticated until its Hello is answered.
  Session(uint64_t id, std::unique_ptr<transport::Connection> connection,
          StrangerGate::Lease stranger, Backend& backend, ModuleCache& modules,
          const RequestTable& requests, PoolServer& server);
  ~Session();

  // Serves the connection on the calling thread until it ends. Never throws.
  void run();

  // Served by an event loop instead (SessionReactor), one turn at a time, when the connection has
  // a readiness descriptor (-1: it has none, use run()).
  int readinessDescriptor() const { return connection_->readinessDescriptor(); }
  enum class Progress {
    kIdle,   // nothing more has arrived: call again when the descriptor turns readable
    kMore,   // frames remain: call again soon (a turn serves a few, so others get a worker)
    kEnded,  // the session has ended
  };
  // Serves the frames that have fully arrived, the Hello first. Never throws.
  Progress serveArrived();
  // After kMore: makes the readiness descriptor readable now (Connection::readyAgain); false when
  // the loop must watch for writability instead.
  bool readyAgain() { return connection_->readyAgain(); }
  // Whether its worker goes on serving it while no other session is ready: a client calling back
  // to back does, and so does one posting calls, except over RDMA, where in the soft-RoCE VM that
  // lowered the rate of posted launches by about a quarter (docs/performance.md, "A posted
  // launch's costs on the server").
  bool keepsItsWorker() const { return lastFrameAwaited_ || !postedCallsGoBack_; }
  // Whether a call may be running for the session (served now, or a device wait), so a client
  // that is gone must have its work cancelled (cancelIfPeerGone).
  bool busy() const { return serving_.load() || waits_.busy() != 0; }
  // Whether the Hello has not been answered yet.
  bool handshaking() const { return !handshakeDone_.load(); }
  // Asks run() to return soon (used at server shutdown).
  void stop();
  // When the client has gone away, stops its running kernels so a call blocked on them returns
  // and the session can end (PoolServer's watchdog calls this from its own thread).
  void cancelIfPeerGone();
  // The heartbeat's look at the connection while no thread waits on it (Connection::checkPeer):
  // a reply's bytes may sit behind the client's closed window between requests. A client found
  // gone has its connection shut down, and the session ends through the event loop.
  void checkPeer() noexcept;

  // Closes the connection when its Hello has not been answered within `deadline` of its accept,
  // calling `beforeClose` first (so what it counts and logs is there once the peer sees the
  // close); true the one time it does so. Safe from any thread.
  bool closeIfHandshakeLate(std::chrono::steady_clock::time_point now,
                            std::chrono::milliseconds deadline,
                            const std::function<void()>& beforeClose);
  std::string peer() const { return connection_->peer(); }

  SessionSnapshot snapshot() const;
  // NVML accounting: the session's records, one per device it used, until end() hands them to
  // the server's history (none for a status connection).
  std::vector<AccountingRecord> accounting() const;
  uint64_t id() const { return state_.id; }

 private:
  bool handshake();
  // The Hello, answered; false when the session must end here.
  bool finishHandshake();
  // Runs `serve`; when it throws (the connection failed, or an unexpected error) says why in the
  // log, and returns.
  void guarded(const std::function<void()>& serve);
  // Releases what the session holds once it has ended, and tells the peer.
  void end();
  void logRdmaCounters() const;
  // accounting(), with `endUs` (0 while running) as the end. Under mutex_.
  std::vector<AccountingRecord> accountingLocked(uint64_t endUs) const;
  // Handles one request. Returns false when the session must end.
  bool serveOne();
  // Runs the request's handler; what it leaves in `reply` and `replyBulk` is what serveOne sends.
  void dispatch(wire::Request::Reader request, uint64_t bulkBytes, bool noReply,
                capnp::MessageBuilder& reply, std::vector<transport::ConstBuffer>& replyBulk);
  // The request's handler, or CUDA_ERROR_NOT_SUPPORTED when the table has none.
  Status runHandler(RequestContext& call, wire::Request::Reader request);
  // Completes the reply of a served request: status, callId, metering, device output. Under
  // sendMutex_.
  void finishReply(RequestContext& call, wire::Request::Reader request, const Status& st,
                   bool noReply);
  // Serves one decoded request and sends its reply (unless noReply). Under sendMutex_. Only the
  // session's thread (`readerThread`) may touch the frame being received.
  void answer(const std::function<wire::Request::Reader()>& decode, uint64_t bulk,
              bool readerThread);
  // Whether a device wait's request can be answered without waiting (row.ready says so).
  bool readyNow(const RequestHandlerRow& row, wire::Request::Reader request);
  // Hands a device wait to a waiter thread, which waits (row.waitFor) and then answers it; false
  // when it must be served here instead (the transport cannot send while it receives, or too many
  // waits run already).
  bool startDeviceWait(const protocol::IncomingMessage& in, wire::Request::Reader request,
                       const RequestHandlerRow& row);
  // Runs one step of a device wait on its waiter thread (the wait, then the answer) with the
  // request read from `words`; a failure is logged and ends the connection.
  void onWaiter(const kj::Array<capnp::word>& words,
                const std::function<void(capnp::FlatArrayMessageReader&)>& step);
  // Gives `reply` the failure of an earlier noReply request, if one is pending. Under sendMutex_.
  void attachDeferred(wire::Response::Builder reply);
  // After the serving loop: makes running waits return and waits for them.
  void endDeviceWaits();

  std::unique_ptr<transport::Connection> connection_;
  StrangerGate::Lease stranger_;  // released once the Hello is answered
  const std::chrono::steady_clock::time_point acceptedAt_ = std::chrono::steady_clock::now();
  std::atomic<bool> handshakeDone_{false};
  std::atomic<bool> closedAsLate_{false};
  std::atomic<bool> serving_{false};  // a turn of serveArrived or run() is serving a request
  bool lastFrameAwaited_ = false;     // serveOne's: the frame it took asked for a reply
  bool postedCallsGoBack_ = false;    // keepsItsWorker: an RDMA connection
  const RequestTable& requests_;
  SessionState state_;  // what the handlers work on

  mutable std::mutex mutex_;  // guards clientName_ and tenantName_ against status snapshots
  std::string clientName_;
  std::string tenantName_;
  bool driver_ = false;
  bool accountingHandedOver_ = false;  // end() gave the records to the server's history

  // Held while a reply is built in the connection's send memory and sent, and by the session's
  // thread while it serves a request (so the tenant's meter is touched by one thread at a time).
  std::mutex sendMutex_;
  DeviceWaits waits_;
  // The first failure among noReply requests, reported with the next Response (under sendMutex_).
  CUresult deferredResult_ = CUDA_SUCCESS;
  std::string deferredMessage_;
  // Counted by PoolServer::admitDriverSession (the --max-sessions limit).
  bool admitted_ = false;
};

}  // namespace gpupool::server
