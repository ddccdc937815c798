// When a server worker that just served a frame spins for the session's next one (shm, RDMA;
// Connection::nextFrameArrived). The spin is the whole budget each time, not adapted to the gaps
// it sees: a client calling back to back answers within microseconds once both sides spin, but a
// spin shortened after one late call misses the next, the client then sleeps and wakes late, and
// both settle on the slow wakeup (docs/shm.md, "Polling after a frame"). What a spin that catches
// nothing costs is bounded instead: after kMissesBeforeRest misses in a row only every
// kProbeEvery-th turn spins, until one catches a frame again.
#pragma once

namespace gpupool::transport {

class FramePollRhythm {
 public:
  static constexpr unsigned kMissesBeforeRest = 8;
  static constexpr unsigned kProbeEvery = 8;

  // Whether this turn spins (counts the turns skipped while resting).
  bool spinThisTurn() { return misses_ < kMissesBeforeRest || ++rested_ % kProbeEvery == 0; }
  void caught() { misses_ = 0; }
  void missed() { ++misses_; }

 private:
  unsigned misses_ = 0;  // spins in a row that caught nothing
  unsigned rested_ = 0;  // turns while resting
};

}  // namespace gpupool::transport
