#include "tools/bench_raw_wire.h"

#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "client/pool_token.h"
#include "protocol/message_codec.h"
#include "transport/transport_factory.h"

namespace gpupool::tools {
namespace {

void expectOk(protocol::IncomingMessage& in, const char* what) {
  auto r = in.root<wire::Response>();
  if (r.getResult() != 0) {
    throw std::runtime_error(std::string(what) + " refused: " + r.getMessage().cStr());
  }
}

}  // namespace

RawWire::RawWire(const transport::Endpoint& endpoint, wire::Hello::Purpose purpose) {
  // tls:// endpoints are reached over TCP too (see bench_raw_wire.h).
  transport::Endpoint wire = endpoint;
  if (wire.scheme == "tls") wire.scheme = "tcp";
  connection_ = transport::connectEndpoint(wire, 5000);
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<wire::Request>().initHello();
  hello.setProtocolVersion(wire::PROTOCOL_VERSION);
  hello.setClientName("gpupool bench");
  hello.setPurpose(purpose);
  std::string tokenError;
  if (std::optional<std::string> token = client::poolToken(&tokenError)) {
    hello.setAuthToken(*token);
  } else if (!tokenError.empty()) {
    throw std::runtime_error(tokenError);
  }
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  expectOk(in, "Hello");
  auto welcome = in.root<wire::Response>().getWelcome();
  backend_ = welcome.getBackendKind();
  rdmaEndpoint_ = welcome.getRdmaEndpoint();
}

std::string RawWire::sessionTransport(const std::string& clientNameSuffix) {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::Request>().setStatus();
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  expectOk(in, "status");
  for (auto session : in.root<wire::Response>().getStatus().getSessions()) {
    std::string name = session.getClientName();
    if (name.size() >= clientNameSuffix.size() &&
        name.compare(name.size() - clientNameSuffix.size(), std::string::npos, clientNameSuffix) ==
            0) {
      return session.getTransport();
    }
  }
  return {};
}

void RawWire::pingPong() {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::Request>().setPing();
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  expectOk(in, "ping");
}

void RawWire::toServer(const void* data, size_t n) {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::Request>().setSink();
  transport::ConstBuffer bulk{data, n};
  protocol::sendMessage(*connection_, message, std::span<const transport::ConstBuffer>(&bulk, 1));
  protocol::IncomingMessage in(*connection_);
  expectOk(in, "sink");
}

void RawWire::fromServer(void* data, size_t n) {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::Request>().setSource(n);
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  expectOk(in, "source");
  if (in.bulkBytes() != n) throw std::runtime_error("source returned the wrong size");
  connection_->receiveBulk(data, n);
}

}  // namespace gpupool::tools
