#include "wire_client.h"

#include <capnp/message.h>
#include <kj/exception.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "protocol/message_codec.h"
#include "protocol/sha256.h"
#include "transport/endpoint.h"
#include "transport/tcp_transport.h"
#include "transport/transport_factory.h"

namespace gpupool::hardening {

int connectToLoopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    int error = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string("connect to 127.0.0.1:") + std::to_string(port) + ": " +
                             std::strerror(error));
  }
  return fd;
}

std::vector<uint8_t> twoPointers(uint64_t a, uint64_t b) {
  std::vector<uint8_t> p(16);
  std::memcpy(p.data(), &a, 8);
  std::memcpy(p.data() + 8, &b, 8);
  return p;
}

WireClient::WireClient(const std::string& endpoint, wire::Hello::Purpose purpose,
                       const std::string& token) {
  std::string error;
  auto parsed = transport::parseEndpoint(endpoint, &error);
  if (!parsed) throw std::runtime_error(error);
  connection_ = transport::connectEndpoint(*parsed, 5000);  // tcp:// or rdma://
  // A server that stops answering fails the test instead of hanging it.
  connection_->setReceiveTimeoutMs(30000);
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<wire::Request>().initHello();
  hello.setProtocolVersion(wire::PROTOCOL_VERSION);
  hello.setPurpose(purpose);
  hello.setClientName("hardening_tests");
  hello.setAuthToken(token);
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  auto response = in.root<wire::Response>();
  if (response.getResult() != CUDA_SUCCESS) {
    throw std::runtime_error(std::string("refused: ") + response.getMessage().cStr());
  }
}

WireClient::~WireClient() = default;

Reply WireClient::call(const std::function<void(wire::Request::Builder)>& build,
                       std::span<const uint8_t> bulk) {
  send(build, bulk);
  return receive();
}

void WireClient::send(const std::function<void(wire::Request::Builder)>& build,
                      std::span<const uint8_t> bulk) {
  capnp::MallocMessageBuilder message;
  build(message.initRoot<wire::Request>());
  transport::ConstBuffer parts[] = {{bulk.data(), bulk.size()}};
  protocol::sendMessage(*connection_, message,
                        bulk.empty() ? std::span<const transport::ConstBuffer>()
                                     : std::span<const transport::ConstBuffer>(parts));
}

void WireClient::queue(const std::function<void(wire::Request::Builder)>& build) {
  capnp::MallocMessageBuilder message;
  build(message.initRoot<wire::Request>());
  protocol::queueMessage(*connection_, message);
}

void WireClient::flush() { connection_->flush(); }

Reply WireClient::receive() {
  protocol::IncomingMessage in(*connection_);
  auto response = in.root<wire::Response>();
  Reply reply;
  reply.callId = response.getCallId();
  reply.result = static_cast<CUresult>(response.getResult());
  reply.message = response.getMessage().cStr();
  switch (response.which()) {
    case wire::Response::HANDLE:
      reply.handle = response.getHandle();
      break;
    case wire::Response::MEM_ALLOC:
      reply.handle = response.getMemAlloc().getAddress();
      break;
    case wire::Response::FUNCTION:
      reply.handle = response.getFunction().getHandle();
      break;
    case wire::Response::GLOBAL:
      reply.handle = response.getGlobal().getAddress();
      reply.bytes = response.getGlobal().getBytes();
      break;
    default:
      break;
  }
  reply.bulk.resize(in.bulkBytes());
  if (!reply.bulk.empty()) connection_->receiveBulk(reply.bulk.data(), reply.bulk.size());
  return reply;
}

Reply WireClient::createContext(int device) {
  return call([&](wire::Request::Builder r) { r.initCtxCreate().setDevice(device); });
}

Reply WireClient::alloc(uint64_t context, uint64_t bytes) {
  return call([&](wire::Request::Builder r) {
    auto m = r.initMemAlloc();
    m.setContext(context);
    m.setBytes(bytes);
  });
}

Reply WireClient::write(uint64_t context, uint64_t address, std::span<const uint8_t> bytes) {
  return call(
      [&](wire::Request::Builder r) {
        auto m = r.initMemcpyHtoD();
        m.setContext(context);
        m.setDst(address);
        m.setBytes(bytes.size());
      },
      bytes);
}

Reply WireClient::read(uint64_t context, uint64_t address, uint64_t bytes) {
  return call([&](wire::Request::Builder r) {
    auto m = r.initMemcpyDtoH();
    m.setContext(context);
    m.setSrc(address);
    m.setBytes(bytes);
  });
}

Reply WireClient::memset(uint64_t context, uint64_t address, uint8_t value, uint64_t bytes) {
  return call([&](wire::Request::Builder r) {
    auto m = r.initMemset();
    m.setContext(context);
    m.setDst(address);
    m.setValue(value);
    m.setElementSize(1);
    m.setWidth(bytes);
    m.setHeight(1);
    m.setPitch(bytes);
  });
}

Reply WireClient::free(uint64_t context, uint64_t address) {
  return call([&](wire::Request::Builder r) {
    auto m = r.initMemFree();
    m.setContext(context);
    m.setAddress(address);
  });
}

Reply WireClient::loadPtx(uint64_t context, const std::string& ptx) {
  std::vector<uint8_t> image(ptx.begin(), ptx.end());
  image.push_back(0);
  auto digest = protocol::Sha256::of(image);
  return call(
      [&](wire::Request::Builder r) {
        auto m = r.initModuleLoad();
        m.setContext(context);
        m.setHash(kj::arrayPtr(digest.data(), digest.size()));
        m.setImageBytes(image.size());
        m.setHasImage(true);
      },
      image);
}

Reply WireClient::function(uint64_t context, uint64_t module, const std::string& name) {
  return call([&](wire::Request::Builder r) {
    auto m = r.initModuleGetFunction();
    m.setContext(context);
    m.setModule(module);
    m.setName(name);
  });
}

Reply WireClient::launch(uint64_t context, uint64_t function, std::span<const uint8_t> params,
                         uint64_t stream, uint32_t clusterX) {
  return call([&](wire::Request::Builder r) {
    auto k = r.initLaunchKernel();
    k.setContext(context);
    k.setFunction(function);
    if (clusterX > 1) {
      auto cluster = k.initCluster();
      cluster.setX(clusterX);
      cluster.setY(1);
      cluster.setZ(1);
    }
    k.initGrid().setX(clusterX);
    k.getGrid().setY(1);
    k.getGrid().setZ(1);
    k.initBlock().setX(1);
    k.getBlock().setY(1);
    k.getBlock().setZ(1);
    k.setStream(stream);
    k.setParams(kj::arrayPtr(params.data(), params.size()));
  });
}

Reply WireClient::synchronize(uint64_t context) {
  return call([&](wire::Request::Builder r) { r.setCtxSynchronize(context); });
}

uint64_t WireClient::serverMemoryUsed() {
  capnp::MallocMessageBuilder message;
  message.initRoot<wire::Request>().setStatus();
  protocol::sendMessage(*connection_, message);
  protocol::IncomingMessage in(*connection_);
  auto response = in.root<wire::Response>();
  if (!response.isStatus()) throw std::runtime_error("status request failed");
  uint64_t used = 0;
  for (auto d : response.getStatus().getDevices()) used += d.getMemoryUsed();
  return used;
}

}  // namespace gpupool::hardening
