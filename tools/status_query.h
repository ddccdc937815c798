// Asking a gpupoold for its status: which server (--endpoint or GPU_POOL_ENDPOINT), one
// connection, Hello with purpose status, the status request; shared by `gpupool status` and
// `gpupool top`, so both see and report the same things.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "protocol/gpupool.capnp.h"
#include "protocol/message_codec.h"
#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::tools {

// Why a status could not be had, with the exit code the commands return for it: 2 for a usage or
// connection problem, 1 when the server refuses or answers badly. `message` is the whole line
// to print on stderr (it starts with "gpupool: ").
struct StatusFailure {
  int exitCode = 2;
  std::string message;
};

// The server `--endpoint` (else the first of GPU_POOL_ENDPOINT) names; with several servers
// listed, the first. nullopt and *failure when there is none or it is not tcp:// or tls://.
std::optional<transport::Endpoint> statusEndpoint(const std::optional<std::string>& option,
                                                  StatusFailure* failure);

// One status answer. The reply's bytes live in the connection's receive buffer, so the
// connection is kept with it.
class ServerStatus {
 public:
  ServerStatus(std::unique_ptr<transport::Connection> connection,
               std::unique_ptr<protocol::IncomingMessage> reply)
      : connection_(std::move(connection)),
        reply_(std::move(reply)),
        status_(reply_->root<wire::Response>().getStatus()) {}
  wire::Response::StatusReply::Reader reader() const { return status_; }

 private:
  std::unique_ptr<transport::Connection> connection_;
  std::unique_ptr<protocol::IncomingMessage> reply_;
  wire::Response::StatusReply::Reader status_;
};

// Connects to `endpoint` (sending `*token`, else GPU_POOL_TOKEN when set), asks for the status and
// disconnects. nullptr and *failure when the server cannot be reached or refuses.
std::unique_ptr<ServerStatus> fetchStatus(const transport::Endpoint& endpoint,
                                          const std::string& clientName, StatusFailure* failure,
                                          const std::string* token = nullptr);

// "512 B", "1.5 GiB".
std::string humanBytes(uint64_t bytes);

}  // namespace gpupool::tools
