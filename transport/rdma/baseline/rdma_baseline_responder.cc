#include "transport/rdma/baseline/rdma_baseline_responder.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "transport/connection.h"
#include "transport/rdma/verbs_handles.h"

namespace gpupool::transport::rdma {
namespace {

// Empty polls between checks for a stop or a disconnect.
constexpr unsigned kPollsBetweenChecks = 1024;

void reject(CmHandles& cm) {
  if (cm.id) rdma_reject(cm.id, nullptr, 0);
}

// Accepts, then answers ping-pong SENDs until the client leaves or `stopFd` is written.
void serve(CmHandles& cm, const BaselineRequest& request, int stopFd) {
  if (request.maxMessageBytes == 0 || request.maxMessageBytes > kBaselineMaxMessageBytes ||
      request.sinkBytes > kBaselineMaxSinkBytes) {
    reject(cm);
    return;
  }
  rdma_cm_id* id = cm.id;
  std::unique_ptr<BaselineQueue> queue;
  try {
    queue = std::make_unique<BaselineQueue>(cm, request.maxMessageBytes);
  } catch (const TransportError&) {
    // The queue took the id and destroyed it; the kernel refuses the pending request.
    return;
  }
  std::vector<std::byte> sink(request.sinkBytes ? request.sinkBytes : 1);
  // Deregistered before the queue (its PD) goes and the sink is freed.
  MemoryRegionPtr sinkMr(ibv_reg_mr(queue->pd(), sink.data(), sink.size(),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!sinkMr) {
    rdma_reject(id, nullptr, 0);
    return;
  }

  BaselineAccept accept{kBaselineMagic, sinkMr->rkey, reinterpret_cast<uintptr_t>(sink.data()),
                        request.sinkBytes};
  rdma_conn_param param{};
  param.private_data = &accept;
  param.private_data_len = sizeof accept;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_accept(id, &param) != 0) return;
  awaitCmEvent(queue->cmChannel(), RDMA_CM_EVENT_ESTABLISHED, 10000, "accepting a baseline client");

  // Busy-polls, as perftest's server does, so the baseline is what the device gives; between
  // bursts of empty polls it checks (without blocking) for the client leaving or a stop.
  ibv_wc wcs[16];
  unsigned empty = 0;
  for (;;) {
    int n = queue->poll(wcs, 16);
    for (int i = 0; i < n; ++i) {
      if ((wcs[i].wr_id & kBaselineWrKindMask) != kBaselineWrRecv) continue;
      // Re-post first: the client's next SEND must never find its receive missing (RNR).
      queue->postReceive(uint32_t(wcs[i].wr_id & ~kBaselineWrKindMask));
      queue->postSend(wcs[i].byte_len);
    }
    if (n > 0 || ++empty % kPollsBetweenChecks != 0) continue;
    pollfd stop{stopFd, POLLIN, 0};
    if (::poll(&stop, 1, 0) > 0) return;
    queue->throwIfDisconnected();
  }
}

}  // namespace

bool parseBaselineRequest(const void* data, size_t size, BaselineRequest* request) {
  if (!data || size < sizeof(BaselineRequest)) return false;
  BaselineRequest r;
  std::memcpy(&r, data, sizeof r);
  if (r.magic != kBaselineMagic) return false;
  *request = r;
  return true;
}

BaselineResponders::BaselineResponders() { stopFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

BaselineResponders::~BaselineResponders() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stopFd_, &one, sizeof one);
  for (auto& w : workers_) w.thread.join();
  if (stopFd_ >= 0) ::close(stopFd_);
}

void BaselineResponders::reapFinished() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (!it->finished->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = workers_.erase(it);
  }
}

void BaselineResponders::start(rdma_event_channel* channel, rdma_cm_id* id,
                               const BaselineRequest& request) {
  reapFinished();
  auto cm = std::make_shared<CmHandles>();
  cm->channel = channel;
  cm->id = id;
  if (workers_.size() >= kMaxClients || stopFd_ < 0) {
    reject(*cm);
    return;
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  int stopFd = stopFd_;
  std::thread thread([cm, request, stopFd, finished] {
    try {
      serve(*cm, request, stopFd);
    } catch (const TransportError&) {
      // A client that leaves mid-run flushes its work requests: nothing to report.
    }
    finished->store(true);
  });
  workers_.push_back(Worker{std::move(thread), finished});
}

}  // namespace gpupool::transport::rdma
