// rdma_cm steps shared by the connection, the listener and the raw-verbs baseline: events,
// address and route resolution, connection parameters.
#include "transport/rdma/rdma_cm_setup.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/pinned_memory.h"
#include "transport/rdma/rdma_connection_internal.h"
#include "transport/rdma/rdma_queue_pair.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/verbs_library.h"

namespace gpupool::transport::rdma {
void awaitCmEvent(rdma_event_channel* channel, rdma_cm_event_type expected, unsigned timeoutMs,
                  const std::string& what, std::vector<std::byte>* privateData) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs ? timeoutMs : 5000);
  setNonBlocking(channel->fd);
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) == 0) {
      rdma_cm_event_type type = event->event;
      int status = event->status;
      if (privateData) {
        auto* data = static_cast<const std::byte*>(event->param.conn.private_data);
        privateData->assign(data, data ? data + event->param.conn.private_data_len : data);
      }
      rdma_ack_cm_event(event);
      if (type == expected) return;
      std::string why = rdma_event_str(type);
      if (type == RDMA_CM_EVENT_REJECTED) why = "connection refused (rejected by the peer)";
      if (status) why += " (status " + std::to_string(status) + ")";
      throw TransportError(Kind::kUnavailable, what + " failed: " + why);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      throw TransportError(Kind::kUnavailable,
                           what + " failed: rdma_get_cm_event: " + std::strerror(errno));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) throw TransportError(Kind::kTimeout, what + " timed out");
    pollfd p{channel->fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

CmHandles::~CmHandles() {
  if (id) rdma_destroy_id(id);
  if (channel) rdma_destroy_event_channel(channel);
}

void resolveRoute(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(endpoint.host.c_str(), std::to_string(endpoint.port).c_str(), &hints, &list);
  if (rc != 0 || !list) {
    throw TransportError(Kind::kUnavailable,
                         "cannot resolve '" + endpoint.host + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> holder(list, freeaddrinfo);
  if (const std::string& error = verbsLoadError(); !error.empty())
    throw TransportError(Kind::kUnavailable, error);
  cm.channel = rdma_create_event_channel();
  if (!cm.channel) {
    throw TransportError(Kind::kUnavailable,
                         std::string("rdma_create_event_channel: ") + std::strerror(errno));
  }
  if (rdma_create_id(cm.channel, &cm.id, nullptr, RDMA_PS_TCP) != 0) {
    throw TransportError(Kind::kUnavailable,
                         std::string("rdma_create_id: ") + std::strerror(errno));
  }
  std::string where = endpoint.url();
  if (rdma_resolve_addr(cm.id, nullptr, list->ai_addr, int(timeoutMs)) != 0) {
    throw TransportError(Kind::kUnavailable, "resolving " + where + ": " + std::strerror(errno));
  }
  awaitCmEvent(cm.channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeoutMs + 1000,
               "resolving " + where + " to an RDMA device");
  if (rdma_resolve_route(cm.id, int(timeoutMs)) != 0) {
    throw TransportError(Kind::kUnavailable, "route to " + where + ": " + std::strerror(errno));
  }
  awaitCmEvent(cm.channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeoutMs + 1000, "route to " + where);
}

unsigned startActiveSide(const Endpoint& endpoint, unsigned timeoutMs, CmHandles& cm) {
  if (endpoint.scheme != "rdma") {
    throw TransportError(Kind::kUnavailable, "not an rdma endpoint: " + endpoint.url());
  }
  std::string reason = rdmaUnavailableReason();
  if (!reason.empty()) throw TransportError(Kind::kUnavailable, reason);
  if (!timeoutMs) timeoutMs = 5000;
  resolveRoute(endpoint, timeoutMs, cm);
  return timeoutMs;
}

rdma_conn_param connectionParameters(const ConnectParams* params, ibv_context* verbs) {
  rdma_conn_param param{};
  param.private_data = params;
  param.private_data_len = sizeof *params;
  ibv_device_attr attr{};
  uint8_t depth = 4;
  if (verbs && ibv_query_device(verbs, &attr) == 0) {
    depth = static_cast<uint8_t>(
        std::clamp(std::min(attr.max_qp_rd_atom, attr.max_qp_init_rd_atom), 1, 16));
  }
  param.responder_resources = depth;
  param.initiator_depth = depth;
  param.retry_count = 7;
  // Credits make RNR impossible; a finite count turns a bug into an error instead of a stall.
  param.rnr_retry_count = 6;
  return param;
}

}  // namespace gpupool::transport::rdma
