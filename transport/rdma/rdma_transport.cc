#include "transport/rdma/rdma_transport.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <utility>

#include "transport/rdma/baseline/rdma_baseline_responder.h"
#include "transport/rdma/rdma_connection.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport {
namespace {

using rdma::CmHandles;
using rdma::ConnectParams;
using rdma::RdmaConnection;

ConnectParams localParams() {
  return ConnectParams{rdma::kWireMagic, rdma::kRdmaRecvSlots, rdma::kRdmaSlotBytes};
}

bool paramsMatch(const void* data, size_t size) {
  if (!data || size < sizeof(ConnectParams)) return false;
  ConnectParams theirs;
  std::memcpy(&theirs, data, sizeof theirs);
  ConnectParams ours = localParams();
  return theirs.magic == ours.magic && theirs.recvSlots == ours.recvSlots &&
         theirs.slotBytes == ours.slotBytes;
}

struct AddressInfo {
  addrinfo* list = nullptr;
  ~AddressInfo() {
    if (list) freeaddrinfo(list);
  }
};

addrinfo* resolve(const Endpoint& endpoint, bool passive, AddressInfo& holder) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int rc = getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints,
                       &holder.list);
  if (rc != 0 || !holder.list) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         "cannot resolve '" + endpoint.host + "': " + gai_strerror(rc));
  }
  return holder.list;
}

class RdmaListener final : public Listener {
 public:
  RdmaListener(const Endpoint& endpoint, const PinnedMemory& pinned,
               std::chrono::microseconds pollMax)
      : pinned_(pinned), pollMax_(pollMax) {
    std::string reason = rdmaUnavailableReason();
    if (!reason.empty())
      throw TransportError(TransportError::Kind::kUnavailable,
                           "cannot listen on " + endpoint.url() + ": " + reason);
    AddressInfo info;
    addrinfo* ai = resolve(endpoint, true, info);
    cm_.channel = rdma_create_event_channel();
    if (!cm_.channel)
      throw TransportError(TransportError::Kind::kUnavailable,
                           std::string("rdma_create_event_channel: ") + std::strerror(errno));
    if (rdma_create_id(cm_.channel, &cm_.id, nullptr, RDMA_PS_TCP) != 0) {
      throw TransportError(TransportError::Kind::kUnavailable,
                           std::string("rdma_create_id: ") + std::strerror(errno));
    }
    if (rdma_bind_addr(cm_.id, ai->ai_addr) != 0 || rdma_listen(cm_.id, 128) != 0) {
      throw TransportError(TransportError::Kind::kUnavailable,
                           "cannot listen on " + endpoint.url() + ": " + std::strerror(errno));
    }
    wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    Endpoint actual = endpoint;
    actual.port = ntohs(rdma_get_src_port(cm_.id));
    url_ = actual.url();
  }

  ~RdmaListener() override {
    if (wakeFd_ >= 0) ::close(wakeFd_);
  }

  std::unique_ptr<Connection> accept() override {
    for (;;) {
      if (stopped_) throw TransportError(TransportError::Kind::kDisconnected, "listener shut down");
      pollfd fds[2] = {{cm_.channel->fd, POLLIN, 0}, {wakeFd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
        throw TransportError(TransportError::Kind::kUnavailable,
                             std::string("poll: ") + std::strerror(errno));
      }
      if (stopped_) throw TransportError(TransportError::Kind::kDisconnected, "listener shut down");
      if (!(fds[0].revents & POLLIN)) continue;
      rdma_cm_event* event = nullptr;
      if (rdma_get_cm_event(cm_.channel, &event) != 0) {
        throw TransportError(TransportError::Kind::kUnavailable,
                             std::string("rdma_get_cm_event: ") + std::strerror(errno));
      }
      if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        rdma_ack_cm_event(event);
        continue;
      }
      rdma_cm_id* id = event->id;
      rdma::BaselineRequest baseline{};
      bool wantsBaseline = rdma::parseBaselineRequest(
          event->param.conn.private_data, event->param.conn.private_data_len, &baseline);
      bool compatible =
          paramsMatch(event->param.conn.private_data, event->param.conn.private_data_len);
      rdma_ack_cm_event(event);
      if (wantsBaseline) {
        // `gpupool bench`'s raw-verbs baseline: served beside the sessions, never returned here.
        if (rdma_event_channel* channel = migrateToOwnChannel(id)) {
          baselines_.start(channel, id, baseline);
        }
        continue;
      }
      if (!compatible) {
        rdma_reject(id, nullptr, 0);
        rdma_destroy_id(id);
        throw TransportError(TransportError::Kind::kMalformed,
                             "rejected an RDMA peer with an incompatible transport version");
      }
      rdma_event_channel* channel = migrateToOwnChannel(id);
      if (!channel)
        throw TransportError(TransportError::Kind::kUnavailable,
                             std::string("rdma_migrate_id: ") + std::strerror(errno));
      auto connection = std::make_unique<RdmaConnection>(channel, id, false, pinned_);
      ConnectParams params = localParams();
      rdma_conn_param param = rdma::connectionParameters(&params, id->verbs);
      if (rdma_accept(id, &param) != 0) {
        throw TransportError(TransportError::Kind::kUnavailable,
                             std::string("rdma_accept: ") + std::strerror(errno));
      }
      rdma::awaitCmEvent(channel, RDMA_CM_EVENT_ESTABLISHED, 10000, "accepting an RDMA peer");
      connection->markEstablished();
      connection->setPollMax(pollMax_);
      return connection;
    }
  }

  void shutdown() override {
    stopped_ = true;
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wakeFd_, &one, sizeof one);
  }

  std::string url() const override { return url_; }

 private:
  // Each connection gets its own event channel, so its disconnect wakes only its own waits.
  // Null (the request rejected and freed) on failure.
  static rdma_event_channel* migrateToOwnChannel(rdma_cm_id* id) {
    rdma_event_channel* channel = rdma_create_event_channel();
    if (channel && rdma_migrate_id(id, channel) == 0) return channel;
    if (channel) rdma_destroy_event_channel(channel);
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return nullptr;
  }

  const PinnedMemory& pinned_;
  const std::chrono::microseconds pollMax_;
  CmHandles cm_;
  rdma::BaselineResponders baselines_;  // destroyed (stopped, joined) before cm_'s listening id
  int wakeFd_ = -1;
  std::atomic<bool> stopped_{false};
  std::string url_;
};

}  // namespace

std::string rdmaUnavailableReason() {
  if (const std::string& error = rdma::verbsLoadError(); !error.empty()) return error;
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (!devices || count == 0) {
    if (devices) ibv_free_device_list(devices);
    return "no RDMA device found (libibverbs lists none: no InfiniBand/RoCE NIC or rdma_rxe)";
  }
  std::string reason = "no RDMA device has an active port";
  for (int i = 0; i < count && !reason.empty(); ++i) {
    ibv_context* context = ibv_open_device(devices[i]);
    if (!context) {
      reason = std::string("cannot open RDMA device ") + ibv_get_device_name(devices[i]) + ": " +
               std::strerror(errno);
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(context, &attr) == 0) {
      for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
        ibv_port_attr portAttr{};
        if (ibv_query_port(context, port, &portAttr) == 0 && portAttr.state == IBV_PORT_ACTIVE) {
          reason.clear();
          break;
        }
      }
    }
    ibv_close_device(context);
  }
  ibv_free_device_list(devices);
  return reason;
}

std::unique_ptr<Connection> rdmaConnect(const Endpoint& endpoint, unsigned timeoutMs,
                                        PinnedMemory& pinned) {
  CmHandles cm;
  timeoutMs = rdma::startActiveSide(endpoint, timeoutMs, cm);
  std::string where = endpoint.url();
  // Handed on before the connection is made: it owns them even when its constructor throws.
  rdma_event_channel* channel = std::exchange(cm.channel, nullptr);
  rdma_cm_id* id = std::exchange(cm.id, nullptr);
  auto connection = std::make_unique<RdmaConnection>(channel, id, true, pinned);
  ConnectParams params = localParams();
  rdma_conn_param param = rdma::connectionParameters(&params, id->verbs);
  if (rdma_connect(id, &param) != 0) {
    throw TransportError(TransportError::Kind::kUnavailable,
                         "connecting to " + where + ": " + std::strerror(errno));
  }
  // The rdma_connect timeout is the CM's own; waiting a little longer reports its verdict.
  rdma::awaitCmEvent(id->channel, RDMA_CM_EVENT_ESTABLISHED, timeoutMs + 1000,
                     "connecting to " + where);
  connection->markEstablished();
  return connection;
}

std::unique_ptr<Listener> rdmaListen(const Endpoint& endpoint, PinnedMemory& pinned,
                                     std::chrono::microseconds pollMax) {
  if (endpoint.scheme != "rdma")
    throw TransportError(TransportError::Kind::kUnavailable,
                         "not an rdma endpoint: " + endpoint.url());
  if (const std::string& error = rdma::verbsLoadError(); !error.empty()) {
    throw TransportError(TransportError::Kind::kUnavailable, error);
  }
  return std::make_unique<RdmaListener>(endpoint, pinned, pollMax);
}

const RdmaStats* rdmaStatsOf(const Connection& connection) {
  auto* rdma = dynamic_cast<const RdmaConnection*>(&connection);
  return rdma ? &rdma->stats() : nullptr;
}

bool rdmaStopAnswering(Connection& connection) {
  auto* rdma = dynamic_cast<RdmaConnection*>(&connection);
  if (rdma) rdma->stopAnswering();
  return rdma != nullptr;
}

}  // namespace gpupool::transport
