// `gpupoold --metrics-listen ADDR`: Prometheus text exposition at GET /metrics over plain HTTP/1.1.
//
// Contract: renderMetrics turns a status reply (devices, sessions, tenants with usage) into the
// Prometheus text format (version 0.0.4); MetricsHttpServer answers each connection with one
// response and closes it, serving /metrics from `render` (called per scrape) and 404 for any other
// path. It runs on a thread of its own until destroyed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "protocol/gpupool.capnp.h"

namespace gpupool::server {

std::string renderMetrics(wire::Response::StatusReply::Reader status);
// The same for the server's current status.
class PoolServer;
std::string renderMetrics(PoolServer& server);

class MetricsHttpServer {
 public:
  // Binds HOST:PORT (port 0 picks one). Throws std::runtime_error when it cannot.
  MetricsHttpServer(const std::string& hostPort, std::function<std::string()> render);
  ~MetricsHttpServer();
  // http://HOST:PORT/metrics with the real port.
  std::string url() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace gpupool::server
