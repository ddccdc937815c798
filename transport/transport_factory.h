// One place that turns an endpoint URL into a connection or a listener, whatever its scheme
// (tcp://, tls://, rdma://, shm://), so callers (the client library, gpupoold, the CLI) need not
// know which transports exist.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "transport/connection.h"
#include "transport/endpoint.h"
#include "transport/pinned_memory.h"

namespace gpupool::transport {

struct ConnectOptions {
  // Bounds connection set-up (0 = the transport's default: the OS's for TCP, 5 s per RDMA step).
  unsigned timeoutMs = 0;
  // rdma:// only: where RDMA cannot be used, connect over TCP to the same host and port instead
  // (gpupoold listens on both with one port number: rdma_cm ports are separate from TCP's), and
  // tell `warn` why. Without it the RDMA failure is thrown.
  bool rdmaFallsBackToTcp = false;
  // rdma:// with rdmaFallsBackToTcp: when not empty, RDMA is not tried, for this reason.
  std::string rdmaRefusal;
  // Receives the fallback warning "<url>: RDMA not used (<why>); using TCP"; unset = silent.
  std::function<void(const std::string&)> warn;
  // The pinned ranges an RDMA connection caches registrations of; null = processPinnedMemory().
  PinnedMemory* pinnedMemory = nullptr;
};

struct ListenOptions {
  // tls:// only: the server's certificate chain and private key (PEM files), both required.
  std::string tlsCertificateChain;
  std::string tlsPrivateKey;
  // The pinned ranges accepted RDMA connections cache registrations of; null =
  // processPinnedMemory().
  PinnedMemory* pinnedMemory = nullptr;
  // shm:// only: how long a worker that just served a frame spins for the session's next one
  // before returning it to the event loop (ShmRingEnd::pollReadable, which rests after a run of
  // misses); 0 never spins. docs/shm.md has the measurements behind the default.
  std::chrono::microseconds shmPollMax{50};
  // rdma:// only: the same for RDMA sessions, polling the completion queue
  // (RdmaConnection::nextFrameArrived). docs/rdma.md has the measurements behind the default.
  std::chrono::microseconds rdmaPollMax{50};
};

// Empty when `scheme`'s transport can be used in this process; otherwise why not (e.g. no RDMA
// device), for warnings that explain a fallback.
std::string transportUnavailableReason(const std::string& scheme);

// Connects to `endpoint` by its scheme. Throws TransportError with the reason.
std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint,
                                            const ConnectOptions& options = {});
// The same with only ConnectOptions::timeoutMs set.
std::unique_ptr<Connection> connectEndpoint(const Endpoint& endpoint, unsigned timeoutMs);

// Listens on `endpoint` by its scheme; port 0 picks a free port (see Listener::url()). Throws
// TransportError with the reason.
std::unique_ptr<Listener> listenEndpoint(const Endpoint& endpoint,
                                         const ListenOptions& options = {});

// One Listener over two (gpupoold's --listen and --rdma-listen), so a single accept loop serves
// clients of both: accept() returns the next connection from either (a failed accept on one of
// them is reported as TransportError and the other keeps serving); shutdown() stops both. url() is
// the first listener's.
std::unique_ptr<Listener> listenOnBoth(std::unique_ptr<Listener> first,
                                       std::unique_ptr<Listener> second);

}  // namespace gpupool::transport
