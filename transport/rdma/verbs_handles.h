// Owning handles for verbs and rdma_cm resources. A class that holds several declares them in the
// order they are created, so its members unwind in reverse: what depends on a resource goes before
// it (memory regions and the queue pair before the CQ and PD, those before the cm id, the id before
// its event channel).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "transport/file_descriptor.h"

namespace gpupool::transport::rdma {

template <auto Release>
struct ReleaseWith {
  template <typename T>
  void operator()(T* resource) const {
    Release(resource);
  }
};

// unique_ptr that frees its resource with the verbs call that does, e.g.
// VerbsPtr<ibv_pd, ibv_dealloc_pd>.
template <typename T, auto Release>
using VerbsPtr = std::unique_ptr<T, ReleaseWith<Release>>;

using EventChannelPtr = VerbsPtr<rdma_event_channel, rdma_destroy_event_channel>;
using CmIdPtr = VerbsPtr<rdma_cm_id, rdma_destroy_id>;
using ProtectionDomainPtr = VerbsPtr<ibv_pd, ibv_dealloc_pd>;
using CompletionChannelPtr = VerbsPtr<ibv_comp_channel, ibv_destroy_comp_channel>;
using MemoryRegionPtr = VerbsPtr<ibv_mr, ibv_dereg_mr>;

// A CQ and the completion events taken from it that are not yet acknowledged: destroying a CQ
// waits for every event to be acknowledged, so the count goes first.
class CompletionQueue {
 public:
  CompletionQueue() = default;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  ~CompletionQueue() {
    if (!cq_) return;
    if (unackedEvents) ibv_ack_cq_events(cq_, unackedEvents);
    ibv_destroy_cq(cq_);
  }
  void reset(ibv_cq* cq) { cq_ = cq; }
  ibv_cq* get() const { return cq_; }
  explicit operator bool() const { return cq_ != nullptr; }

  unsigned unackedEvents = 0;

 private:
  ibv_cq* cq_ = nullptr;
};

// The queue pair rdma_create_qp made on a cm id (the id owns it; this destroys it first).
class CmQueuePair {
 public:
  CmQueuePair() = default;
  CmQueuePair(const CmQueuePair&) = delete;
  CmQueuePair& operator=(const CmQueuePair&) = delete;
  ~CmQueuePair() {
    if (id_) rdma_destroy_qp(id_);
  }
  // Records that `id` has its QP now.
  void created(rdma_cm_id* id) { id_ = id; }
  explicit operator bool() const { return id_ != nullptr; }

 private:
  rdma_cm_id* id_ = nullptr;
};

}  // namespace gpupool::transport::rdma
