// The client's connection to one gpupoold: the handshake, the device snapshot it returns, and
// request/response calls from any number of threads at once.
//
// A call builds a Request, optionally sends bulk bytes after it, and hands the Response (and a
// reader for its bulk bytes) to a callback. Calls of different threads are in flight together:
// the lock covers framing (sending a request, the post queue), not round trips. Each Request
// carries a callId that its Response echoes, since the server answers a call that waits for the
// device (a synchronize) when the device is done, after later calls. Whichever waiting thread
// holds the receiving role reads the next Response and completes the call it answers (its
// callback runs there, so reply bulk lands in that caller's buffer with no extra copy or thread);
// it passes the role on once its own answer has come. Over a transport that cannot send while it
// receives (RDMA for now), or with GPU_POOL_SERIALIZE_CALLS=1, one call is in flight at a time. A
// post is a call that needs no answer (launches, async copies, memsets, frees...): it is queued and
// leaves with the next call, when the queue grows past a size, or after a short timer, many posts
// in one write. The server reports a post's failure with its next Response; the next call returns
// it, as CUDA reports asynchronous errors at the next synchronizing call. If the connection breaks,
// the call and every later one return CUDA_ERROR_DEVICE_UNAVAILABLE; nothing waits forever on a
// dead server.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "protocol/gpupool.capnp.h"
#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::client {

struct DeviceSnapshot {
  std::string name;
  CUuuid uuid{};
  uint64_t totalMemory = 0;
  std::vector<int32_t> attributes;
  int attribute(int a) const {
    return a >= 0 && static_cast<size_t>(a) < attributes.size() ? attributes[a] : 0;
  }
};

// Reads the reply's bulk bytes, in order.
class ReplyBulk {
 public:
  ReplyBulk(transport::Connection& c, uint64_t bytes) : connection_(c), remaining_(bytes) {}
  uint64_t remaining() const { return remaining_; }
  // False (reading nothing) if fewer than `size` bytes remain.
  bool read(void* dst, uint64_t size);

 private:
  friend class RemoteSession;
  transport::Connection& connection_;
  uint64_t remaining_;
};

class RemoteSession {
 public:
  // Connects and performs the handshake. On failure returns null and sets *error to the reason,
  // and *refusal (when given) to the server's CUresult when it refused the Hello (e.g.
  // CUDA_ERROR_NOT_PERMITTED for a token it does not know).
  static std::unique_ptr<RemoteSession> connect(const transport::Endpoint& endpoint,
                                                std::string* error, CUresult* refusal = nullptr);

  using Build = std::function<void(wire::Request::Builder)>;
  using OnReply = std::function<CUresult(wire::Response::Reader, ReplyBulk&)>;

  // Sends one request and waits for its response. Returns the response's result, or what onReply
  // returns when it is given and the result is CUDA_SUCCESS. `replyInto` names where onReply will
  // read the reply's bulk (one read of exactly that size), so the transport may have the server
  // place it there directly (RDMA WRITE into pinned memory).
  CUresult call(const char* what, const Build& build,
                std::span<const transport::ConstBuffer> bulk = {}, const OnReply& onReply = {},
                transport::MutableBuffer replyInto = {});

  // Queues a request that gets no Response. Small bulk is copied into the queue; large bulk is sent
  // at once, straight from the caller's buffer. Returns only errors of the connection itself.
  CUresult post(const char* what, const Build& build,
                std::span<const transport::ConstBuffer> bulk = {});

  ~RemoteSession();

  // An error found on a host-function thread (a host function the server could not keep in stream
  // order), for the next call of another thread to return, as a posted call's failure would be.
  void handOnError(CUresult error) {
    CUresult none = CUDA_SUCCESS;
    handedOn_.compare_exchange_strong(none, error);
  }

  // Pinned memory in memory files (client/shared_host_memory.h): whether this session's server
  // maps them (an shm session), passing one with its id and size (CUDA_SUCCESS once the server
  // mapped it), and letting one go.
  bool sharesHostFiles() const { return sharesHostFiles_; }
  CUresult shareHostFile(int fd, uint64_t id, uint64_t bytes);
  void releaseHostFile(uint64_t id);
  // Mapped pinned memory: whether this session serves it (its server maps shared files into
  // device addresses, and this process holds the device window, where it maps them at the same
  // address), and mapping shared file `id` into context `remoteContext`'s device addresses.
  bool mapsHostMemory() const { return mapsHostMemory_; }
  CUresult mapHostFile(uint64_t id, uint64_t remoteContext, uint64_t* address);

  // Watches every request of every session (managed memory, client/managed_memory_api.cc): `before`
  // runs before a call or post builds anything, on the caller's thread, so it may post and call
  // itself; `after` when a call returned (never for posts).
  struct RequestObserver {
    void (*before)(RemoteSession& session, const char* what, bool posted);
    void (*after)(RemoteSession& session, const char* what, CUresult result);
  };
  static void observeRequests(const RequestObserver* observer);

  const std::vector<DeviceSnapshot>& devices() const { return devices_; }
  // For the pool to adjust what it presents (e.g. a PCI domain that clashes with another server's).
  DeviceSnapshot& device(int i) { return devices_.at(static_cast<size_t>(i)); }
  int driverVersion() const { return driverVersion_; }
  const std::string& backendKind() const { return backendKind_; }
  // Random per gpupoold process (Welcome.serverInstance): tells two servers apart.
  uint64_t serverInstance() const { return serverInstance_; }
  const std::string& url() const { return url_; }
  // The server's Welcome Response as it came, one flat Cap'n Proto message (the NVML library reads
  // it when it shares this session: client/shared_session_channel.cc).
  kj::ArrayPtr<const capnp::word> welcomeMessage() const { return welcome_.asPtr(); }
  // The server's device address window (base, size); (0, 0) when it did not say.
  std::pair<uint64_t, uint64_t> addressWindow() const { return window_; }
  // Whether this process holds the window as its own PROT_NONE reservation.
  bool addressWindowReserved() const { return windowReserved_; }
  // Whether [address, address + bytes) lies inside the window this process holds.
  bool reservedWindowHolds(uint64_t address, uint64_t bytes) const {
    return windowReserved_ && address >= window_.first &&
           address - window_.first <= window_.second &&
           bytes <= window_.second - (address - window_.first);
  }

 private:
  struct PendingCall;
  RemoteSession() = default;
  void flushLoop();
  // With mutex_ (and exclusive_ when serialized) held: waits, letting them go, until the calling
  // thread's request may be framed (client/host_function_fence.h).
  void awaitHostFunctions(std::unique_lock<std::mutex>& exclusive,
                          std::unique_lock<std::mutex>& lock);
  CUresult callUnobserved(const char* what, const Build& build,
                          std::span<const transport::ConstBuffer> bulk, const OnReply& onReply,
                          transport::MutableBuffer replyInto);
  // Sets broken_ and wakes every waiting call (takes answers_: never call it holding that).
  CUresult lost(const char* what, const std::string& why);
  // Holding the receiving role (not mutex_): reads the next Response and completes its call.
  void receiveReply(const char* what);
  // Runs `call`'s callback on its Response and works out the call's result.
  CUresult completeCall(const PendingCall& call, wire::Response::Reader response,
                        uint64_t bulkBytes);

  std::mutex exclusive_;  // held over each whole call and post when serialized_ (taken first)
  std::mutex mutex_;      // framing: sends, the post queue, nextCallId_
  // The calls in flight and the receiving role, apart from framing: a sender may wait inside a
  // send for the server to take its bytes (RDMA credits, a full socket), and the server may be
  // waiting for this side to read its answers first. Taken after mutex_ when both are held.
  std::mutex answers_;
  std::map<uint64_t, PendingCall*> pending_;  // sent, not yet answered, by callId
  uint64_t nextCallId_ = 1;
  bool receiving_ = false;  // some thread is reading Responses
  bool serialized_ = false;
  std::condition_variable queued_;  // wakes the flusher when the first post is queued
  bool stopping_ = false;
  std::thread flusher_;
  std::unique_ptr<transport::Connection> connection_;
  std::atomic<bool> broken_{false};
  unsigned heartbeatMs_ = 0;                   // GPU_POOL_HEARTBEAT_TIMEOUT_MS (0: off)
  std::chrono::milliseconds idleGiveBack_{0};  // GPU_POOL_SHM_IDLE_RELEASE_MS (0: off)
  // An earlier post's failure that a host-function thread's call heard of, for the next other call.
  std::atomic<CUresult> handedOn_{CUDA_SUCCESS};
  std::string url_;
  kj::Array<capnp::word> welcome_;  // capnp::word is not copyable: no std::vector of it
  std::vector<DeviceSnapshot> devices_;
  int driverVersion_ = 0;
  std::string backendKind_;
  uint64_t serverInstance_ = 0;
  std::pair<uint64_t, uint64_t> window_{0, 0};
  bool windowReserved_ = false;
  bool sharesHostFiles_ = false;
  bool mapsHostMemory_ = false;
  std::mutex sharing_;  // held over passing a file and its share request
};

}  // namespace gpupool::client
