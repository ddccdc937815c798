// A context's kernels under the pool's scheduler (LaunchGate), without the session waiting for
// them.
//
// The scheduler lets one kernel at a time run on a device and must hear when each ends. Waiting
// for the kernel on the session's serving thread would hold every later call of the session
// meanwhile, and a kernel queued behind a stream wait (cuStreamWaitValue32) that only a later call
// meets would then hold the session, and the device with it, forever. So the admission happens on
// the device instead: each gated launch is queued as
//
//   [ready event] [wait: stream's gate word == n] [started event] [kernel] [ended event]
//
// and a worker thread of that stream waits for `ready` (the stream's earlier work is done), asks
// the gate, writes n to the gate word from a stream of its own, waits for `ended` and tells the
// gate how long the kernel ran (started to ended). The stream keeps its order because everything
// is the driver's own queue; the serving thread only queues.
//
// Needs the driver's stream memory operations (CUDA 11.7 and later). Without them a gated kernel is
// admitted, launched and waited for on the calling thread, as before.
#pragma once

#include <cuda.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "server/backend.h"
#include "server/backends/cuda/cuda_driver.h"

namespace gpupool::server {

class CudaGatedLaunches {
 public:
  CudaGatedLaunches(std::shared_ptr<CudaDriver> driver, CUcontext context,
                    std::shared_ptr<LaunchGate> gate);
  // Waits until every queued kernel has passed the gate and ended (a stream whose earlier work
  // never finishes is given up after a few seconds). Stream waits that might hold the streams must
  // be met before (CudaContext::releasePendingWaits). The gate words are device memory of the
  // context, left for cuCtxDestroy: a stream may still be reading one.
  ~CudaGatedLaunches();
  CudaGatedLaunches(const CudaGatedLaunches&) = delete;
  CudaGatedLaunches& operator=(const CudaGatedLaunches&) = delete;

  // Queues the kernel (or graph) `start` launches on `stream` behind its admission; returns
  // start()'s status. The calling thread must have the context current.
  Status launch(CUstream stream, const std::function<Status()>& start);

  struct TicketEvents;  // the events around one kernel (cuda_gated_launches.cc)

 private:
  class StreamWorker;  // one per stream that launched: its gate word, queue and thread

  // The queued admission. *queued is false when nothing was queued (the status then says why);
  // sets unsupported_ when the driver cannot do it at all.
  Status queue(CUstream stream, const std::function<Status()>& start, bool* queued);
  // The synchronous admission, for drivers without stream memory operations.
  Status launchAndWait(CUstream stream, const std::function<Status()>& start);

  std::shared_ptr<CudaDriver> driver_;
  CUcontext context_;
  std::shared_ptr<LaunchGate> gate_;
  // Where the workers write the gate words: non-blocking, so no stream the tenant uses (the legacy
  // one included) can hold a write that would let that stream go on.
  CUstream gateStream_ = nullptr;
  bool unsupported_ = false;  // the driver refused the gate word's wait: never try again
  std::map<CUstream, std::unique_ptr<StreamWorker>> workers_;
  // Recorded around each kernel launchAndWait runs.
  CUevent fallbackStarted_ = nullptr, fallbackEnded_ = nullptr;
};

}  // namespace gpupool::server
