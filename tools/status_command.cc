#include "tools/status_command.h"

#include <capnp/message.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "protocol/message_codec.h"
#include "transport/tcp_transport.h"
#include "transport/transport_factory.h"

namespace gpupool::tools {
namespace {

constexpr unsigned kConnectTimeoutMs = 5000;
constexpr unsigned kReplyTimeoutMs = 10000;

// A server error: the message to print and exit code 1.
struct ServerError {
  std::string message;
};

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

void printJson(wire::Response::StatusReply::Reader status) {
  nlohmann::json out;
  out["server_version"] = status.getServerVersion().cStr();
  out["backend"] = status.getBackendKind().cStr();
  out["devices"] = nlohmann::json::array();
  for (auto device : status.getDevices()) {
    out["devices"].push_back({{"index", device.getIndex()},
                              {"name", device.getName().cStr()},
                              {"memory_used", device.getMemoryUsed()},
                              {"memory_total", device.getMemoryTotal()},
                              {"sessions", device.getSessions()},
                              {"utilization", device.getUtilization()}});
    if (device.getParent().size()) {
      out["devices"].back()["parent"] = device.getParent().cStr();
      out["devices"].back()["profile"] = device.getProfile().cStr();
    }
  }
  out["sessions"] = nlohmann::json::array();
  for (auto session : status.getSessions()) {
    out["sessions"].push_back({{"id", session.getSessionId()},
                               {"client", session.getClientName().cStr()},
                               {"memory_used", session.getMemoryUsed()},
                               {"transport", session.getTransport().cStr()}});
    if (session.getTenant().size()) out["sessions"].back()["tenant"] = session.getTenant().cStr();
  }
  out["tenants"] = nlohmann::json::array();
  for (auto t : status.getTenants()) {
    out["tenants"].push_back({{"name", t.getName().cStr()},
                              {"memory_used", t.getMemoryUsed()},
                              {"memory_quota", t.getMemoryQuota()},
                              {"priority", t.getPriority().cStr()},
                              {"weight", t.getWeight()},
                              {"sessions", t.getSessions()},
                              {"gpu_seconds", t.getGpuSeconds()},
                              {"gib_seconds", t.getGibSeconds()},
                              {"queue_seconds", t.getQueueSeconds()},
                              {"bytes_in", t.getBytesIn()},
                              {"bytes_out", t.getBytesOut()},
                              {"calls", t.getCalls()},
                              {"launches", t.getLaunches()}});
  }
  std::cout << out.dump(2) << "\n";
}

void printText(wire::Response::StatusReply::Reader status) {
  std::cout << "server   gpupoold " << status.getServerVersion().cStr() << ", backend "
            << status.getBackendKind().cStr() << ", listening on " << status.getListen().cStr()
            << ", up " << static_cast<uint64_t>(status.getUptimeSeconds()) << " s\n";
  std::cout << "devices  " << status.getDevices().size() << "\n";
  for (auto device : status.getDevices()) {
    std::cout << "  [" << device.getIndex() << "] " << device.getName().cStr() << "  memory "
              << humanBytes(device.getMemoryUsed()) << " / " << humanBytes(device.getMemoryTotal())
              << "  sessions " << device.getSessions();
    if (device.getParent().size()) {
      std::cout << "  MIG " << device.getProfile().cStr() << " on " << device.getParent().cStr();
    }
    std::cout << "  busy " << static_cast<int>(device.getUtilization() * 100) << "%\n";
  }
  if (status.getTenants().size()) std::cout << "tenants  " << status.getTenants().size() << "\n";
  for (auto t : status.getTenants()) {
    std::cout << "  " << t.getName().cStr() << "  memory " << humanBytes(t.getMemoryUsed()) << " / "
              << (t.getMemoryQuota() ? humanBytes(t.getMemoryQuota()) : std::string("unlimited"))
              << "  " << t.getPriority().cStr() << " x" << t.getWeight() << "  sessions "
              << t.getSessions() << "  gpu " << t.getGpuSeconds() << " s\n";
  }
  std::cout << "sessions " << status.getSessions().size() << "\n";
  for (auto session : status.getSessions()) {
    std::cout << "  #" << session.getSessionId() << " " << session.getClientName().cStr()
              << "  memory " << humanBytes(session.getMemoryUsed()) << "  "
              << session.getTransport().cStr() << "\n";
  }
}

}  // namespace

int statusCommand(const StatusOptions& options) {
  std::string text;
  if (options.endpoint) {
    text = *options.endpoint;
  } else if (const char* fromEnvironment = std::getenv("GPU_POOL_ENDPOINT");
             fromEnvironment && *fromEnvironment) {
    text = fromEnvironment;
  } else {
    std::cerr << "gpupool: no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT\n";
    return 2;
  }
  std::string error;
  auto endpoints = transport::parseEndpointList(text, &error);
  if (!endpoints) {
    std::cerr << "gpupool: " << error << "\n";
    return 2;
  }
  // With several servers listed, status reports on the first; name one with --endpoint for others.
  const transport::Endpoint& endpoint = endpoints->front();
  if (endpoint.scheme != "tcp" && endpoint.scheme != "tls") {
    std::cerr << "gpupool: status speaks tcp:// and tls:// only, not " << endpoint.url() << "\n";
    return 2;
  }

  std::unique_ptr<transport::Connection> connection;
  try {
    connection = transport::connectEndpoint(endpoint, kConnectTimeoutMs);
    connection->setReceiveTimeoutMs(kReplyTimeoutMs);

    capnp::MallocMessageBuilder helloMessage;
    auto hello = helloMessage.initRoot<wire::Request>().initHello();
    hello.setProtocolVersion(wire::PROTOCOL_VERSION);
    hello.setClientName("gpupool status");
    hello.setPurpose(wire::Hello::Purpose::STATUS);
    if (const char* token = std::getenv("GPU_POOL_TOKEN")) hello.setAuthToken(token);
    auto welcome = exchange(*connection, helloMessage);
    checkReply(welcome->root<wire::Response>(), wire::Response::WELCOME, "hello");

    capnp::MallocMessageBuilder statusMessage;
    statusMessage.initRoot<wire::Request>().setStatus();
    auto reply = exchange(*connection, statusMessage);
    auto response = reply->root<wire::Response>();
    checkReply(response, wire::Response::STATUS, "status");
    if (options.json) {
      printJson(response.getStatus());
    } else {
      printText(response.getStatus());
    }
  } catch (const transport::TransportError& e) {
    std::cerr << "gpupool: cannot reach " << endpoint.url() << ": " << e.what() << "\n";
    return 2;
  } catch (const ServerError& e) {
    std::cerr << "gpupool: " << endpoint.url() << ": " << e.message << "\n";
    return 1;
  } catch (const kj::Exception& e) {
    std::cerr << "gpupool: " << endpoint.url() << ": malformed reply: " << e.getDescription().cStr()
              << "\n";
    return 1;
  }
  return 0;
}

}  // namespace gpupool::tools
