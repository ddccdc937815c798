#include "server/backends/cuda/cuda_gated_launches.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace gpupool::server {

// Times one kernel; `started` and `ended` may go unused when the driver cannot time them.
struct CudaGatedLaunches::TicketEvents {
  CUevent ready = nullptr;    // the stream's work before the kernel is done
  CUevent started = nullptr;  // the gate word's wait passed
  CUevent ended = nullptr;    // the kernel ended (blocking sync: the worker sleeps on it)
};

namespace {

using TicketEvents = CudaGatedLaunches::TicketEvents;

using Clock = std::chrono::steady_clock;

// How long a worker that is told to stop keeps waiting for its stream's earlier work: past it the
// stream is held by something nobody will meet, and its kernel is let through ungated (it cannot
// run before that something is met anyway).
constexpr auto kStopGrace = std::chrono::seconds(5);

Status createEvents(const CudaDriver& driver, TicketEvents* events) {
  Status s = driver.call(driver.eventCreate, &events->ready, unsigned{CU_EVENT_DISABLE_TIMING});
  if (s.ok()) s = driver.call(driver.eventCreate, &events->started, unsigned{CU_EVENT_DEFAULT});
  if (s.ok()) {
    s = driver.call(driver.eventCreate, &events->ended, unsigned{CU_EVENT_BLOCKING_SYNC});
  }
  return s;
}

void destroyEvents(const CudaDriver& driver, const TicketEvents& events) {
  for (CUevent event : {events.ready, events.started, events.ended}) {
    if (event) (void)driver.call(driver.eventDestroy, event);
  }
}

CUstreamBatchMemOpParams gateWordOp(CUstreamBatchMemOpType kind, CUdeviceptr word, uint32_t value) {
  CUstreamBatchMemOpParams op{};
  op.operation = kind;
  if (kind == CU_STREAM_MEM_OP_WAIT_VALUE_32) {
    op.waitValue.address = word;
    op.waitValue.value = value;
    op.waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;  // EQ, not GEQ: the count may wrap around
  } else {
    op.writeValue.address = word;
    op.writeValue.value = value;
    op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }
  return op;
}

}  // namespace

class CudaGatedLaunches::StreamWorker {
 public:
  // A worker with its gate word allocated and zeroed (through `gateStream`, which is synchronized).
  static Status create(std::shared_ptr<CudaDriver> driver, CUcontext context, CUstream gateStream,
                       std::shared_ptr<LaunchGate> gate, std::unique_ptr<StreamWorker>* worker) {
    std::unique_ptr<StreamWorker> made(
        new StreamWorker(std::move(driver), context, gateStream, std::move(gate)));
    const CudaDriver& d = *made->driver_;
    if (Status s = d.call(d.memAlloc, &made->word_, size_t{sizeof(uint32_t)}); !s.ok()) return s;
    CUstreamBatchMemOpParams zero = gateWordOp(CU_STREAM_MEM_OP_WRITE_VALUE_32, made->word_, 0);
    Status s = d.call(d.streamBatchMemOp, gateStream, 1u, &zero, 0u);
    if (s.ok()) s = d.call(d.streamSynchronize, gateStream);
    if (!s.ok()) return s;
    made->thread_ = std::thread([w = made.get(), caller = CudaDriver::caller()] {
      CudaDriver::setCaller(caller);  // its fatal faults are its session's
      w->run();
    });
    *worker = std::move(made);
    return Status::success();
  }

  ~StreamWorker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      stopDeadline_ = Clock::now() + kStopGrace;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (const TicketEvents& events : spare_) destroyEvents(*driver_, events);
  }

  // Queues the wait, the kernel and its events on `stream` and hands the ticket to the thread;
  // returns start()'s status. *waitRefused: the wait could not be queued (nor anything else).
  Status queue(CUstream stream, const std::function<Status()>& start, bool* waitRefused) {
    *waitRefused = true;  // until the wait is queued
    TicketEvents events;
    if (Status s = takeEvents(&events); !s.ok()) return s;
    const CudaDriver& d = *driver_;
    const uint32_t value = queued_ + 1;
    CUstreamBatchMemOpParams wait = gateWordOp(CU_STREAM_MEM_OP_WAIT_VALUE_32, word_, value);
    Status s = d.call(d.eventRecord, events.ready, stream);
    if (s.ok()) s = d.call(d.streamBatchMemOp, stream, 1u, &wait, 0u);
    if (!s.ok()) {
      giveEvents(events);
      return s;
    }
    *waitRefused = false;
    // The wait is queued: from here the ticket must reach the thread, or the stream stays held.
    queued_ = value;
    Ticket ticket{events, value, false, false};
    Status launched = d.call(d.eventRecord, events.started, stream);
    if (launched.ok()) launched = start();
    ticket.launched = launched.ok();
    ticket.timed = ticket.launched && d.call(d.eventRecord, events.ended, stream).ok();
    {
      std::lock_guard lock(mutex_);
      tickets_.push_back(ticket);
    }
    wake_.notify_one();
    return launched;
  }

 private:
  struct Ticket {
    TicketEvents events;
    uint32_t value = 0;     // what the gate word must hold for the kernel to start
    bool launched = false;  // false: nothing to admit, only the word to move on
    bool timed = false;     // its `ended` event was recorded
  };

  StreamWorker(std::shared_ptr<CudaDriver> driver, CUcontext context, CUstream gateStream,
               std::shared_ptr<LaunchGate> gate)
      : driver_(std::move(driver)),
        context_(context),
        gateStream_(gateStream),
        gate_(std::move(gate)) {}

  Status takeEvents(TicketEvents* events) {
    {
      std::lock_guard lock(mutex_);
      if (!spare_.empty()) {
        *events = spare_.back();
        spare_.pop_back();
        return Status::success();
      }
    }
    Status s = createEvents(*driver_, events);
    if (!s.ok()) destroyEvents(*driver_, *events);
    return s;
  }

  void giveEvents(const TicketEvents& events) {
    std::lock_guard lock(mutex_);
    spare_.push_back(events);
  }

  void run() {
    (void)driver_->call(driver_->ctxSetCurrent, context_);
    for (;;) {
      Ticket ticket;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !tickets_.empty(); });
        if (tickets_.empty()) return;  // stopping, and nothing left
        ticket = tickets_.front();
      }
      admit(ticket);
      std::lock_guard lock(mutex_);
      tickets_.pop_front();
      spare_.push_back(ticket.events);
    }
  }

  // Waits for the stream's earlier work, lets the kernel through the gate and meters it.
  void admit(const Ticket& ticket) {
    const CudaDriver& d = *driver_;
    const bool ready = waitReady(ticket.events.ready);
    const bool gated = ready && ticket.launched;
    if (gated) gate_->enter();
    const auto admitted = Clock::now();
    CUstreamBatchMemOpParams write =
        gateWordOp(CU_STREAM_MEM_OP_WRITE_VALUE_32, word_, ticket.value);
    Status s = d.call(d.streamBatchMemOp, gateStream_, 1u, &write, 0u);
    if (!gated) return;
    if (s.ok() && ticket.timed) s = d.call(d.eventSynchronize, ticket.events.ended);
    double seconds = std::chrono::duration<double>(Clock::now() - admitted).count();
    float milliseconds = 0;
    if (s.ok() && ticket.timed &&
        d.call(d.eventElapsedTime, &milliseconds, ticket.events.started, ticket.events.ended)
            .ok()) {
      seconds = milliseconds / 1000.0;
    }
    gate_->leave(seconds);
  }

  // True once `ready` has passed (or failed: a broken context runs nothing more). Polled rather
  // than synchronized so that a worker told to stop gives up on a stream nothing will move.
  bool waitReady(CUevent ready) {
    auto pause = std::chrono::microseconds(0);
    for (;;) {
      CUresult result = driver_->eventQuery.fn ? driver_->eventQuery.fn(ready) : CUDA_SUCCESS;
      if (result != CUDA_ERROR_NOT_READY) return true;
      {
        std::unique_lock lock(mutex_);
        if (stopping_ && Clock::now() >= stopDeadline_) return false;
        if (pause.count() > 0) wake_.wait_for(lock, pause);
      }
      // Most kernels find their stream ready at once (the one before just ended); the rest wait
      // behind copies or stream waits, where a millisecond is small.
      pause = std::min(std::chrono::microseconds(1000),
                       std::max(std::chrono::microseconds(20), pause * 2));
    }
  }

  std::shared_ptr<CudaDriver> driver_;
  CUcontext context_;
  CUstream gateStream_;
  std::shared_ptr<LaunchGate> gate_;
  CUdeviceptr word_ = 0;
  uint32_t queued_ = 0;  // the value of the last wait queued (serving thread only)

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Ticket> tickets_;       // queued, not yet admitted and ended; the front is current
  std::vector<TicketEvents> spare_;  // events of tickets done, for the next ones
  bool stopping_ = false;
  Clock::time_point stopDeadline_;
  std::thread thread_;
};

CudaGatedLaunches::CudaGatedLaunches(std::shared_ptr<CudaDriver> driver, CUcontext context,
                                     std::shared_ptr<LaunchGate> gate)
    : driver_(std::move(driver)), context_(context), gate_(std::move(gate)) {}

CudaGatedLaunches::~CudaGatedLaunches() {
  workers_.clear();  // each finishes its queue first
  if (gateStream_) (void)driver_->call(driver_->streamDestroy, gateStream_);
  destroyEvents(*driver_, {nullptr, fallbackStarted_, fallbackEnded_});
}

Status CudaGatedLaunches::launch(CUstream stream, const std::function<Status()>& start) {
  bool queued = false;
  Status s = unsupported_ ? Status::success() : queue(stream, start, &queued);
  // What kept the admission from being queued (no memory for a gate word, a driver without the
  // operations) must not fail the launch: it is admitted the old way.
  return queued ? s : launchAndWait(stream, start);
}

Status CudaGatedLaunches::queue(CUstream stream, const std::function<Status()>& start,
                                bool* queued) {
  if (!gateStream_) {
    if (!driver_->streamBatchMemOp.fn) {
      unsupported_ = true;
      return Status::error(CUDA_ERROR_NOT_SUPPORTED, "no stream memory operations");
    }
    if (Status s =
            driver_->call(driver_->streamCreate, &gateStream_, unsigned{CU_STREAM_NON_BLOCKING}, 0);
        !s.ok()) {
      gateStream_ = nullptr;
      return s;
    }
  }
  auto found = workers_.find(stream);
  if (found == workers_.end()) {
    std::unique_ptr<StreamWorker> worker;
    Status s = StreamWorker::create(driver_, context_, gateStream_, gate_, &worker);
    if (s.code == CUDA_ERROR_NOT_SUPPORTED) unsupported_ = true;
    if (!s.ok()) return s;
    found = workers_.emplace(stream, std::move(worker)).first;
  }
  bool waitRefused = false;
  Status s = found->second->queue(stream, start, &waitRefused);
  *queued = !waitRefused;
  // A driver that has the entry point but not the operation (a device without stream memory
  // operations) refuses the wait itself.
  if (waitRefused && s.code == CUDA_ERROR_NOT_SUPPORTED) unsupported_ = true;
  return s;
}

// Without stream memory operations the kernel is admitted, launched and waited for here. A kernel
// behind a stream wait that only a later call meets then holds the session (docs/hardening.md).
Status CudaGatedLaunches::launchAndWait(CUstream stream, const std::function<Status()>& start) {
  if (!fallbackStarted_) {
    Status s = driver_->call(driver_->eventCreate, &fallbackStarted_, unsigned{CU_EVENT_DEFAULT});
    if (s.ok()) {
      s = driver_->call(driver_->eventCreate, &fallbackEnded_, unsigned{CU_EVENT_BLOCKING_SYNC});
    }
    if (!s.ok()) {
      destroyEvents(*driver_, {nullptr, fallbackStarted_, fallbackEnded_});
      fallbackStarted_ = fallbackEnded_ = nullptr;
      return s;
    }
  }
  gate_->enter();
  auto launched = Clock::now();
  Status s = driver_->call(driver_->eventRecord, fallbackStarted_, stream);
  if (s.ok()) s = start();
  if (s.ok()) s = driver_->call(driver_->eventRecord, fallbackEnded_, stream);
  if (s.ok()) s = driver_->call(driver_->eventSynchronize, fallbackEnded_);
  double seconds = std::chrono::duration<double>(Clock::now() - launched).count();
  float milliseconds = 0;
  if (s.ok() &&
      driver_->call(driver_->eventElapsedTime, &milliseconds, fallbackStarted_, fallbackEnded_)
          .ok()) {
    seconds = milliseconds / 1000.0;
  }
  gate_->leave(seconds);
  return s;
}

}  // namespace gpupool::server
