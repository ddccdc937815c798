// The server end of the raw-verbs baseline (rdma_baseline_client.h): gpupoold's RDMA listener hands
// it every connect request that asks for the baseline instead of a session. Each such client gets a
// thread that busy-polls (as perftest's server does), answers SENDs with SENDs of the same size and
// owns a registered sink the client RDMA WRITEs into. No session, backend or CUDA call is involved.
#pragma once

#include <rdma/rdma_cma.h>

#include <atomic>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/rdma/baseline/rdma_baseline_queue.h"

namespace gpupool::transport::rdma {

// Whether a connect request's private data asks for the baseline; copies the request if so.
bool parseBaselineRequest(const void* data, size_t size, BaselineRequest* request);

class BaselineResponders {
 public:
  // At most this many baseline clients at once; more are rejected (each may hold a large sink).
  static constexpr size_t kMaxClients = 4;

  BaselineResponders();
  // Stops every responder (their clients see the connection end) and joins their threads.
  ~BaselineResponders();
  BaselineResponders(const BaselineResponders&) = delete;
  BaselineResponders& operator=(const BaselineResponders&) = delete;

  // Serves the client whose connect request is pending on `id`, already migrated to its own
  // `channel`; takes both over. Out-of-range requests and clients over kMaxClients are rejected.
  void start(rdma_event_channel* channel, rdma_cm_id* id, const BaselineRequest& request);

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  void reapFinished();

  int stopFd_ = -1;  // eventfd: once written, every responder's wait wakes and ends
  std::list<Worker> workers_;
};

}  // namespace gpupool::transport::rdma
