// Endpoint URLs: `tcp://host:port`, `tls://host:port`, `rdma://host:port` and `shm:///socket/path`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpupool::transport {

struct Endpoint {
  std::string scheme;  // "tcp", "tls" (TCP with TLS), "rdma" or "shm" (shared memory)
  // Name, IPv4, or IPv6 without brackets; for shm the absolute path of the server's Unix socket.
  std::string host;
  uint16_t port = 0;  // 0 for shm

  std::string url() const;
};

// Parses one URL. On failure returns nullopt and sets *error to a message that says what is wrong
// and what a valid endpoint looks like.
std::optional<Endpoint> parseEndpoint(const std::string& text, std::string* error);

// Parses a comma-separated list (GPU_POOL_ENDPOINT may name several servers).
std::optional<std::vector<Endpoint>> parseEndpointList(const std::string& text, std::string* error);

}  // namespace gpupool::transport
