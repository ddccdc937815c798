// Loopback connections of the byte-stream transports (TCP, TLS, shared memory) for transport tests:
// a listener (TLS: with a self-signed certificate the clients trust), and connected pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transport/connection.h"

namespace gpupool::transport {

struct ConnectedPair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

// A path for a Unix socket no listener uses yet (in a directory removed at exit).
std::string freeShmSocketPath();
// A listener of `scheme`: "tcp" or "tls" on 127.0.0.1, on a free port; "shm" on a fresh socket.
std::unique_ptr<Listener> listenOnLoopback(const std::string& scheme);
// A connected pair of `scheme`. TLS: the client's connect waits for the server's handshake, which
// runs on the server's first receive, so a hello frame goes across while connecting.
ConnectedPair connectedPair(const std::string& scheme);

// Waits as gpupoold's event loop does: poll the readiness descriptor, then frameArrived(). Fails
// the test after 20 s rather than hang the suite.
void waitForFrame(Connection& connection);
// `n` consecutive words from `seed`: a message whose every word is checkable.
std::vector<uint64_t> words(size_t n, uint64_t seed);
// A received message read back as words.
std::vector<uint64_t> asWords(std::span<const std::byte> bytes);

}  // namespace gpupool::transport
