#include "tools/status_query.h"

#include <capnp/message.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "client/pool_token.h"
#include "transport/transport_factory.h"

namespace gpupool::tools {
namespace {

constexpr unsigned kConnectTimeoutMs = 5000;
constexpr unsigned kReplyTimeoutMs = 10000;

// A refusal or a reply that is not the one asked for (exit code 1).
struct ServerError {
  std::string message;
};

// Sends `request` and returns the reply's message; bulk bytes (none are expected) are skipped.
std::unique_ptr<protocol::IncomingMessage> exchange(transport::Connection& connection,
                                                    capnp::MallocMessageBuilder& request) {
  protocol::sendMessage(connection, request);
  auto reply = std::make_unique<protocol::IncomingMessage>(connection);
  if (reply->bulkBytes() != 0) connection.discardBulk(reply->bulkBytes());
  return reply;
}

void checkReply(wire::Response::Reader response, wire::Response::Which expected, const char* what) {
  if (response.getResult() != 0) {
    throw ServerError{std::string(what) + " refused (CUresult " +
                      std::to_string(response.getResult()) +
                      "): " + std::string(response.getMessage().cStr())};
  }
  if (response.which() != expected) {
    throw ServerError{std::string("unexpected reply to ") + what};
  }
}

}  // namespace

std::optional<transport::Endpoint> statusEndpoint(const std::optional<std::string>& option,
                                                  StatusFailure* failure) {
  std::string text;
  if (option) {
    text = *option;
  } else if (const char* fromEnvironment = std::getenv("GPU_POOL_ENDPOINT");
             fromEnvironment && *fromEnvironment) {
    text = fromEnvironment;
  } else {
    *failure = {2, "gpupool: no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT"};
    return std::nullopt;
  }
  std::string error;
  auto endpoints = transport::parseEndpointList(text, &error);
  if (!endpoints) {
    *failure = {2, "gpupool: " + error};
    return std::nullopt;
  }
  // With several servers listed, the first is reported on; name one with --endpoint for others.
  const transport::Endpoint& endpoint = endpoints->front();
  if (endpoint.scheme != "tcp" && endpoint.scheme != "tls") {
    *failure = {2, "gpupool: status speaks tcp:// and tls:// only, not " + endpoint.url()};
    return std::nullopt;
  }
  return endpoint;
}

std::unique_ptr<ServerStatus> fetchStatus(const transport::Endpoint& endpoint,
                                          const std::string& clientName, StatusFailure* failure,
                                          const std::string* token) {
  try {
    auto connection = transport::connectEndpoint(endpoint, kConnectTimeoutMs);
    connection->setReceiveTimeoutMs(kReplyTimeoutMs);

    capnp::MallocMessageBuilder helloMessage;
    auto hello = helloMessage.initRoot<wire::Request>().initHello();
    hello.setProtocolVersion(wire::PROTOCOL_VERSION);
    hello.setClientName(clientName);
    hello.setPurpose(wire::Hello::Purpose::STATUS);
    if (token) {
      hello.setAuthToken(*token);
    } else {
      std::string tokenError;
      if (std::optional<std::string> fromEnvironment = client::poolToken(&tokenError)) {
        hello.setAuthToken(*fromEnvironment);
      } else if (!tokenError.empty()) {
        *failure = {2, "gpupool: " + tokenError};
        return nullptr;
      }
    }
    auto welcome = exchange(*connection, helloMessage);
    checkReply(welcome->root<wire::Response>(), wire::Response::WELCOME, "hello");

    capnp::MallocMessageBuilder statusMessage;
    statusMessage.initRoot<wire::Request>().setStatus();
    auto reply = exchange(*connection, statusMessage);
    checkReply(reply->root<wire::Response>(), wire::Response::STATUS, "status");
    return std::make_unique<ServerStatus>(std::move(connection), std::move(reply));
  } catch (const transport::TransportError& e) {
    *failure = {2, "gpupool: cannot reach " + endpoint.url() + ": " + e.what() +
                       " (is gpupoold running there? check --endpoint or GPU_POOL_ENDPOINT)"};
  } catch (const ServerError& e) {
    *failure = {1, "gpupool: " + endpoint.url() + ": " + e.message};
  } catch (const kj::Exception& e) {
    *failure = {1,
                "gpupool: " + endpoint.url() + ": malformed reply: " + e.getDescription().cStr()};
  }
  return nullptr;
}

std::string humanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace gpupool::tools
