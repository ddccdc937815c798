// Execution core (internal): the state of one running thread block and the warp scheduler.
// Warp-at-a-time: each warp keeps 32 per-lane PCs and call stacks; every step runs one
// instruction for the lanes with the lowest (-call depth, PC) key, which reconverges divergent
// branches at their join without a CFG. Warp collectives wait until every non-exited lane of
// their member mask arrives with the same (opcode, mask); block barriers switch warps
// cooperatively. Arithmetic/memory semantics live in instruction_semantics.cpp.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cluster.h"
#include "device_heap.h"
#include "interpreter.h"
#include "printf_format.h"
#include "scalar_ops.h"

namespace gpupool::ptx::execution {

using namespace scalar;

enum class LaneState : uint8_t { kRun, kExited, kBarrier, kWarpSync, kClusterWait };

inline constexpr uint32_t kMaxCallDepth = 1024;
inline constexpr uint64_t kMaxLocalBytesPerThread = 16ull << 20;
inline constexpr uint64_t kWindowSize = 1ull << 32;

struct Frame {
  uint32_t function = 0;
  uint32_t callPc = 0;
  uint32_t localBase = 0;
  uint32_t paramBase = 0;
};

struct Warp {
  uint32_t index = 0;
  uint32_t live = 0;  // lanes that exist and have not exited
  uint32_t pc[32] = {};
  uint16_t depth[32] = {};
  LaneState state[32] = {};
  uint8_t carry[32] = {};
  uint64_t syncKey[32] = {};
  uint32_t syncMask[32] = {};
  uint32_t barrierId[32] = {};
  uint32_t barrierCount[32] = {};
  bool barrierPred[32] = {};  // bar.red: this lane's predicate
  uint32_t barrierLanes = 0;  // lanes in LaneState::kBarrier
  // When every lane of barrierLanes waits at one bar.sync (one pc, depth and barrier id, no
  // reduction): that pc, so a release moves them at once; kMixedBarrier otherwise.
  uint32_t barrierAt = 0;
  uint32_t barrierDepth = 0;
  uint32_t lanesInCalls = 0;  // lanes at call depth 1 or more
  // barrier.cluster: lanes that arrived and have not waited yet, and the phase each arrived in.
  uint32_t clusterArrived = 0;
  uint64_t clusterPhase[32] = {};
  // The scheduler's knowledge, kept between turns (runWarp): the group that runs next when
  // non-zero, its key, and the lowest key of the other running lanes.
  // The group's lanes move together without their pc[] being written: pc[] is theirs again once
  // the group is let go (BlockRunner::settle).
  uint32_t nextGroup = 0;
  uint64_t nextKey = 0, othersKey = ~0ull;
  // After a divergent branch taken while no other lane ran: the half that waits, which is every
  // other running lane (at othersKey), so the running half rejoins it without a scan.
  uint32_t pendingGroup = 0;
  std::vector<std::vector<uint64_t>> regs;  // [depth][reg * 32 + lane]
  std::vector<Frame> frames[32];
  std::vector<uint8_t> local[32];
  std::vector<uint8_t> params[32];
};

template <class F>
inline void forLanes(uint32_t mask, F&& f) {
  while (mask) {
    int l = std::countr_zero(mask);
    mask &= mask - 1;
    f(l);
  }
}

// The lanes whose predicate register (bit 0 of each lane's value) is set, as a mask.
inline uint32_t predicateMask(const uint64_t* lanes) {
#if defined(__SSE2__)
  // Two lanes per step: bit 0 moved to each 64-bit half's sign, read by movemask.
  uint32_t mask = 0;
  for (int l = 0; l < 32; l += 2) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lanes + l));
    mask |= static_cast<uint32_t>(_mm_movemask_pd(_mm_castsi128_pd(_mm_slli_epi64(v, 63)))) << l;
  }
  return mask;
#else
  uint32_t mask = 0;
  for (int l = 0; l < 32; ++l) mask |= static_cast<uint32_t>(lanes[l] & 1) << l;
  return mask;
#endif
}

template <class F>
inline void withIntType(Type t, F&& f) {
  switch (t) {
    case Type::kS8:
      f(int8_t{});
      break;
    case Type::kS16:
      f(int16_t{});
      break;
    case Type::kS32:
      f(int32_t{});
      break;
    case Type::kS64:
      f(int64_t{});
      break;
    case Type::kU8:
    case Type::kB8:
    case Type::kPred:
      f(uint8_t{});
      break;
    case Type::kU16:
    case Type::kB16:
      f(uint16_t{});
      break;
    case Type::kU32:
    case Type::kB32:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

// cvta (to = false) and cvta.to (to = true) between a generic address and one in the space whose
// generic window starts at `window` (0 for global and the other spaces: the same address).
constexpr uint64_t cvtaWindow(Space space) {
  return space == Space::kShared ? kSharedWindow : space == Space::kLocal ? kLocalWindow : 0;
}
inline uint64_t cvtaAddress(uint64_t v, uint64_t window, bool to) {
  if (!window) return v;
  return to ? (v >= window && v < window + kWindowSize ? v - window : v)
            : (v & 0xffffffffu) + window;
}

template <class T>
inline uint64_t raw(T v) {
  return static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
}

class BlockRunner {
  friend struct FastSteps;  // fast_steps.cc: specialized forms of executeSimple's cases

 public:
  // One runner per worker thread of a launch: start() readies it for each block in turn, reusing
  // the storage of the last (a block costs no allocation once the first has run).
  BlockRunner(LaunchContext& ctx, unsigned worker)
      : ctx_(ctx),
        img_(ctx.image),
        code_(ctx.image.code.data()),
        fastSteps_(ctx.image.fastSteps.size() == ctx.image.code.size() &&
                           !ctx.services.genericPathOnly
                       ? ctx.image.fastSteps.data()
                       : nullptr),
        worker_(worker),
        memoryChanges_(ctx.memory.changes()) {}

  void start(uint64_t blockIndex) {
    const auto& g = ctx_.config.grid;
    block_[0] = static_cast<uint32_t>(blockIndex % g[0]);
    block_[1] = static_cast<uint32_t>((blockIndex / g[0]) % g[1]);
    block_[2] = static_cast<uint32_t>(blockIndex / (uint64_t{g[0]} * g[1]));
    const auto& b = ctx_.config.block;
    threads_ = b[0] * b[1] * b[2];
    // Without a cluster every CTA is a cluster of one.
    const auto& c = ctx_.config.cluster;
    for (int i = 0; i < 3; ++i) {
      clusterId_[i] = block_[i] / c[i];
      clusterCtaid_[i] = block_[i] % c[i];
    }
    clusterRank_ = clusterCtaid_[0] + c[0] * (clusterCtaid_[1] + c[1] * clusterCtaid_[2]);
    cluster_ = nullptr;
    clusterWaiting_ = 0;
    shared_.assign(ctx_.sharedBytes, 0);
    localWarpSteps_ = localThreadSteps_ = 0;
    yieldWarp_ = false;
    std::fill(std::begin(arrivals_), std::end(arrivals_), 0u);
    std::fill(std::begin(arrivalCount_), std::end(arrivalCount_), 0u);
    std::fill(std::begin(barrierWaiting_), std::end(barrierWaiting_), 0u);
    std::fill(std::begin(barrierNamed_), std::end(barrierNamed_), 0u);
    barriersWaiting_ = 0;
    barrierWarps_ = 0;
    liveThreads_ = threads_;
    barrierReductions_ = false;
    const FunctionImage& entry = img_.functions[ctx_.function];
    warps_.resize((threads_ + 31) / 32);
    for (uint32_t wi = 0; wi < warps_.size(); ++wi) {
      Warp& w = warps_[wi];
      w.index = wi;
      w.live = 0;
      // Registers start at zero in a runner's first block, and later blocks find what the last
      // one left (PTX leaves them undefined): zeroing each block's cost more than its work in
      // short kernels.
      w.regs.resize(std::max<size_t>(w.regs.size(), 1));
      w.regs[0].resize(std::max<uint32_t>(entry.numRegs, 1) * 32, 0);
      std::fill(std::begin(w.depth), std::end(w.depth), uint16_t{0});
      std::fill(std::begin(w.carry), std::end(w.carry), uint8_t{0});
      std::fill(std::begin(w.barrierPred), std::end(w.barrierPred), false);
      w.lanesInCalls = 0;
      w.clusterArrived = 0;
      w.barrierLanes = 0;
      for (int l = 0; l < 32; ++l) {
        bool exists = wi * 32 + l < threads_;
        w.state[l] = exists ? LaneState::kRun : LaneState::kExited;
        w.frames[l].clear();
        if (!exists) continue;
        w.live |= 1u << l;
        w.pc[l] = entry.entryPc;
        w.frames[l].push_back(Frame{ctx_.function, 0, 0, 0});
        w.local[l].assign(entry.localBytes, 0);
        w.params[l].assign(entry.frameParamBytes, 0);
      }
      w.nextGroup = w.live;
      w.nextKey = scheduleKey(0, entry.entryPc);
      w.othersKey = ~0ull;
      w.pendingGroup = 0;
    }
  }

  // The CTA runs in `group`'s cluster: its shared memory is the group's for this cluster.
  void joinCluster(ClusterGroup* group) {
    cluster_ = group;
    group->publish(clusterRank_, shared_.data(), shared_.size());
  }

  void run() {
    while (true) {
      bool progress = false, allDone = true;
      for (Warp& w : warps_) {
        if (!w.live) continue;
        allDone = false;
        progress |= runWarp(w);
      }
      if (allDone) break;
      // The blocks of a cooperative launch or a cluster share the host's cores: a block whose
      // warps spin on a grid barrier or a flag lets the blocks that still have to arrive run.
      if (ctx_.config.cooperative || cluster_) std::this_thread::yield();
      if (releaseBarriers()) continue;
      if (clusterWaiting_ && releaseClusterWaits()) continue;
      if (!progress) {
        if (!clusterWaiting_) deadlock();
        awaitCluster();
      }
    }
    if (cluster_) cluster_->finished();
    flushSteps();
  }

 private:
  // ---- scheduling ---------------------------------------------------------------------------
  // A lane's place in the scheduling order: the group with the lowest key runs next (deepest
  // call first, then lowest pc).
  static uint64_t scheduleKey(uint32_t depth, uint32_t pc) {
    return (uint64_t{0xffffu - depth} << 32) | pc;
  }

  static constexpr uint32_t kMixedBarrier = 0xffffffffu;  // Warp::barrierAt

  bool runWarp(Warp& w) {
    bool any = false;
    // A warp spinning on memory another warp of the block writes (a flag, a lock) must let that
    // warp run: after this many steps in a row the warp yields.
    constexpr uint32_t kStepsPerTurn = 1u << 16;
    // While the group that ran stays together and its new key stays below every other running
    // lane's (othersKey, which only a scan changes: the other lanes do not move meanwhile), it
    // is the next group again: no need to look at each lane.
    for (uint32_t steps = 0;; ++steps) {
      if (steps == kStepsPerTurn) {
        settle(w);
        return true;
      }
      uint32_t group = w.nextGroup;
      uint64_t key = w.nextKey;
      if (!group) {
        scan(w, &group, &key);
        if (!group) {
          if (releaseWarpSync(w)) {
            any = true;
            continue;
          }
          return any;
        }
      }
      const uint32_t depth = 0xffffu - static_cast<uint32_t>(key >> 32);
      const uint32_t groupPc = execute(w, group, static_cast<uint32_t>(key), depth);
      bool idle = false;
      if (groupPc == kSplitGroup) {
        // A divergent branch: the half with the lower key runs next if it is below every other
        // lane; the other half joins the others.
        const uint64_t takenKey = scheduleKey(depth, splitTarget_);
        const uint64_t fallKey = scheduleKey(depth, static_cast<uint32_t>(key) + 1);
        const bool takenFirst = takenKey < fallKey;
        const uint64_t firstKey = takenFirst ? takenKey : fallKey;
        const uint64_t othersBefore = w.othersKey;
        w.nextGroup =
            firstKey < w.othersKey ? (takenFirst ? splitTaken_ : group & ~splitTaken_) : 0;
        w.nextKey = firstKey;
        if (w.nextGroup) {
          w.othersKey = std::min(w.othersKey, takenFirst ? fallKey : takenKey);
          w.pendingGroup = othersBefore == ~0ull ? group & ~w.nextGroup : 0;
        }
      } else if (groupPc == kGroupWaits) {
        // Every lane of the group waits at a barrier; with no other lane running, neither does
        // the warp.
        w.nextGroup = 0;
        idle = w.othersKey == ~0ull;
      } else {
        w.nextKey = scheduleKey(depth, groupPc);
        if (groupPc != kScatteredGroup && w.nextKey < w.othersKey) {
          w.nextGroup = group;
        } else if (groupPc != kScatteredGroup && w.nextKey == w.othersKey && w.pendingGroup) {
          // The running half of a split reaches the other half: the warp reconverges.
          w.nextGroup = group | w.pendingGroup;
          w.othersKey = ~0ull;
          w.pendingGroup = 0;
        } else {
          if (groupPc != kScatteredGroup) {
            w.nextGroup = group;
            settle(w);
          }
          w.nextGroup = 0;
        }
      }
      any = true;
      ++localWarpSteps_;
      localThreadSteps_ += group == 0xffffffffu ? 32 : static_cast<uint64_t>(std::popcount(group));
      if ((localWarpSteps_ & 0xfff) == 0) flushSteps();
      if (!w.live || idle) return true;
      if (yieldWarp_) {
        yieldWarp_ = false;
        settle(w);
        return true;
      }
    }
  }

  // Writes the pc of the group runWarp holds into its lanes (Warp::nextGroup).
  static void settle(Warp& w) {
    const uint32_t pc = static_cast<uint32_t>(w.nextKey);
    if (w.nextGroup == 0xffffffffu)
      std::fill(std::begin(w.pc), std::end(w.pc), pc);
    else
      forLanes(w.nextGroup, [&](int l) { w.pc[l] = pc; });
  }

  // Finds the running lanes with the lowest key (the group), and the lowest key of the others.
  // Branch-free passes; 32-bit keys (the pc alone) while no lane is inside a call.
  void scan(Warp& w, uint32_t* group, uint64_t* key) {
    if (w.lanesInCalls == 0)
      scanKeys<uint32_t>(w, group, key, [&](int l) { return w.pc[l]; });
    else
      scanKeys<uint64_t>(w, group, key, [&](int l) { return scheduleKey(w.depth[l], w.pc[l]); });
  }
  template <class K, class KeyOf>
  void scanKeys(Warp& w, uint32_t* group, uint64_t* key, KeyOf keyOf) {
    constexpr K kNone = ~K{0};
    K keys[32];
    K best = kNone, others = kNone;
    for (int l = 0; l < 32; ++l) {
      keys[l] = w.state[l] == LaneState::kRun ? static_cast<K>(keyOf(l)) : kNone;
      best = std::min(best, keys[l]);
    }
    *group = 0;
    for (int l = 0; l < 32; ++l) {
      *group |= static_cast<uint32_t>(keys[l] == best) << l;
      others = std::min(others, keys[l] == best ? kNone : keys[l]);
    }
    // A 32-bit key is a pc at depth 0.
    auto full = [](K k) {
      return sizeof(K) == 8 ? uint64_t{k} : scheduleKey(0, static_cast<uint32_t>(k));
    };
    if (best == kNone) *group = 0;
    *key = full(best);
    w.othersKey = others == kNone ? ~0ull : full(others);
    w.pendingGroup = 0;
  }

  void flushSteps() {
    uint64_t total = ctx_.warpSteps.fetch_add(localWarpSteps_) + localWarpSteps_;
    ctx_.threadSteps.fetch_add(localThreadSteps_);
    localWarpSteps_ = localThreadSteps_ = 0;
    if (ctx_.services.stepBudget && total > ctx_.services.stepBudget)
      throw LaunchFault{
          Status::error(CUDA_ERROR_LAUNCH_TIMEOUT,
                        "kernel " + ctx_.kernel.name + " exceeded the step budget of " +
                            std::to_string(ctx_.services.stepBudget) + " warp-instructions")};
    if (ctx_.failed.load(std::memory_order_relaxed))
      throw LaunchFault{Status::error(CUDA_ERROR_LAUNCH_FAILED, "")};
    if (ctx_.services.cancel && ctx_.services.cancel->load(std::memory_order_relaxed))
      throw LaunchFault{
          Status::error(CUDA_ERROR_LAUNCH_FAILED, "kernel " + ctx_.kernel.name + " cancelled")};
  }

  // Releases each barrier whose waiting lanes and arrivals reach its count. The waiting lanes are
  // counted as they arrive (waitAtBarrier), so a release visits only the warps that wait.
  bool releaseBarriers() {
    bool released = false;
    for (uint32_t ids = barriersWaiting_; ids; ids &= ids - 1) {
      const uint32_t id = static_cast<uint32_t>(std::countr_zero(ids));
      const uint32_t waiting = barrierWaiting_[id];
      const uint32_t count = barrierNamed_[id] ? barrierNamed_[id] : arrivalCount_[id];
      const uint32_t expected = count ? std::min(count, liveThreads_) : liveThreads_;
      if (waiting + arrivals_[id] < expected) continue;
      released = true;
      // Arrivals beyond this release's count belong to the barrier's next use.
      const uint32_t named = count ? count : liveThreads_;
      arrivals_[id] -= std::min(arrivals_[id], named - std::min(named, waiting));
      if (!arrivals_[id]) arrivalCount_[id] = 0;
      barrierWaiting_[id] = 0;
      barrierNamed_[id] = 0;
      barriersWaiting_ &= ~(1u << id);
      // bar.red: the reduction covers the predicates of the waiting threads.
      uint32_t trueCount = 0;
      if (barrierReductions_)
        for (uint32_t ws = barrierWarps_; ws; ws &= ws - 1) {
          const Warp& w = warps_[static_cast<size_t>(std::countr_zero(ws))];
          forLanes(w.barrierLanes, [&](int l) {
            if ((w.barrierId[l] & 15) == id) trueCount += w.barrierPred[l] ? 1 : 0;
          });
        }
      for (uint32_t ws = barrierWarps_; ws; ws &= ws - 1) {
        Warp& w = warps_[static_cast<size_t>(std::countr_zero(ws))];
        // Lanes move: a warp whose running lanes are all released together, at one pc, runs them
        // next as one group; any other warp's next group is found anew.
        uint32_t releasedLanes = 0, releasedPc = 0, releasedDepth = 0;
        bool together = true;
        if (w.barrierAt != kMixedBarrier &&
            (w.barrierId[std::countr_zero(w.barrierLanes)] & 15) == id) {
          // Every lane of the warp that waits, waits here: they move at once.
          releasedLanes = w.barrierLanes;
          releasedPc = w.barrierAt;
          releasedDepth = w.barrierDepth;
          if (releasedLanes == 0xffffffffu) {
            std::fill(std::begin(w.state), std::end(w.state), LaneState::kRun);
            std::fill(std::begin(w.pc), std::end(w.pc), releasedPc + 1);
          } else {
            forLanes(releasedLanes, [&](int l) {
              w.state[l] = LaneState::kRun;
              w.pc[l] = releasedPc + 1;
            });
          }
        } else {
          forLanes(w.barrierLanes, [&](int l) {
            if ((w.barrierId[l] & 15) != id) return;
            if (releasedLanes && (w.pc[l] != releasedPc || w.depth[l] != releasedDepth))
              together = false;
            releasedLanes |= 1u << l;
            releasedPc = w.pc[l];
            releasedDepth = w.depth[l];
            const Instr& in = code_[w.pc[l]];
            if (in.mode >= static_cast<uint8_t>(BarMode::kRedPopc) &&
                in.ops[0].kind == OperandKind::kReg) {
              uint64_t& result = w.regs[w.depth[l]][in.ops[0].index * 32 + l];
              if (in.mode == static_cast<uint8_t>(BarMode::kRedPopc)) result = trueCount;
              if (in.mode == static_cast<uint8_t>(BarMode::kRedAnd))
                result = trueCount == waiting ? 1 : 0;
              if (in.mode == static_cast<uint8_t>(BarMode::kRedOr)) result = trueCount != 0 ? 1 : 0;
            }
            w.state[l] = LaneState::kRun;
            ++w.pc[l];
          });
        }
        if (!releasedLanes) continue;
        w.barrierLanes &= ~releasedLanes;
        if (!w.barrierLanes) barrierWarps_ &= ~(1u << w.index);
        forLanes(w.live & ~w.barrierLanes & ~releasedLanes,
                 [&](int l) { together &= w.state[l] != LaneState::kRun; });
        w.nextGroup = together ? releasedLanes : 0;
        w.nextKey = scheduleKey(releasedDepth, releasedPc + 1);
        w.othersKey = ~0ull;
        w.pendingGroup = 0;
      }
    }
    return released;
  }

  // bar.sync / bar.red: the lanes of `exec` wait at the barrier the instruction names.
  void waitAtBarrier(Warp& w, const Instr& in, uint32_t exec, uint32_t depth) {
    if (!exec) return;
    const bool reduction = in.mode >= static_cast<uint8_t>(BarMode::kRedPopc);
    auto enter = [&](int l, uint32_t id, uint32_t count) {
      w.state[l] = LaneState::kBarrier;
      w.barrierId[l] = id;
      w.barrierCount[l] = count;
      w.barrierPred[l] = reduction && (value(in.ops[3], l) & 1) != 0;
      ++barrierWaiting_[id & 15];
      barriersWaiting_ |= 1u << (id & 15);
      if (count) barrierNamed_[id & 15] = count;
    };
    const bool countGiven = in.ops[2].kind != OperandKind::kNone;
    const bool uniform =
        in.ops[1].kind == OperandKind::kImm && (!countGiven || in.ops[2].kind == OperandKind::kImm);
    const bool oneWait = uniform && !reduction;
    if (!w.barrierLanes) {
      w.barrierAt = oneWait ? curPc_ : kMixedBarrier;
      w.barrierDepth = depth;
    } else if (!oneWait || w.barrierAt != curPc_ || w.barrierDepth != depth) {
      w.barrierAt = kMixedBarrier;
    }
    if (uniform) {
      // The common form (bar.sync 0): one id and count for every lane.
      const uint32_t id = static_cast<uint32_t>(in.ops[1].imm);
      const uint32_t count = countGiven ? static_cast<uint32_t>(in.ops[2].imm) : 0;
      forLanes(exec, [&](int l) { enter(l, id, count); });
    } else {
      forLanes(exec, [&](int l) {
        enter(l, static_cast<uint32_t>(value(in.ops[1], l)),
              countGiven ? static_cast<uint32_t>(value(in.ops[2], l)) : 0);
      });
    }
    w.barrierLanes |= exec;
    barrierWarps_ |= 1u << w.index;
    if (reduction) barrierReductions_ = true;
  }

  // ---- barrier.cluster ---------------------------------------------------------------------
  void clusterBarrier(Warp& w, const Instr& in, uint32_t exec) {
    if (!cluster_) {
      // A launch without clusters runs each CTA as a cluster of one: the barrier is the CTA's
      // threads alone, those that exited already excepted.
      soloCluster_ = std::make_unique<ClusterGroup>(1, threads_);
      soloCluster_->gather([] { return false; });
      joinCluster(soloCluster_.get());
      for (Warp& other : warps_) {
        for (uint32_t l = 0; l < 32; ++l)
          if (other.index * 32 + l < threads_ && !((other.live >> l) & 1))
            soloCluster_->exited(~0ull);
      }
    }
    if (static_cast<ClusterBarrierMode>(in.mode) == ClusterBarrierMode::kArrive) {
      if (w.clusterArrived & exec)
        fault(CUDA_ERROR_LAUNCH_FAILED, std::countr_zero(w.clusterArrived & exec), curPc_,
              "barrier.cluster.arrive again before barrier.cluster.wait");
      const uint64_t phase = cluster_->arrive(static_cast<uint32_t>(std::popcount(exec)));
      forLanes(exec, [&](int l) { w.clusterPhase[l] = phase; });
      w.clusterArrived |= exec;
      return;
    }
    if (exec & ~w.clusterArrived)
      fault(CUDA_ERROR_LAUNCH_FAILED, std::countr_zero(exec & ~w.clusterArrived), curPc_,
            "barrier.cluster.wait without barrier.cluster.arrive");
    const uint64_t now = cluster_->phase();
    forLanes(exec, [&](int l) {
      if (w.clusterPhase[l] != now) {  // the phase it arrived in is over
        w.clusterArrived &= ~(1u << l);
        return;
      }
      w.state[l] = LaneState::kClusterWait;
      ++clusterWaiting_;
    });
  }

  // Lets the lanes whose phase has ended go on; true when any did.
  bool releaseClusterWaits() {
    const uint64_t now = cluster_->phase();
    bool released = false;
    for (Warp& w : warps_) {
      uint32_t lanes = 0;
      forLanes(w.live, [&](int l) {
        if (w.state[l] != LaneState::kClusterWait || w.clusterPhase[l] == now) return;
        w.state[l] = LaneState::kRun;
        ++w.pc[l];
        lanes |= 1u << l;
      });
      if (!lanes) continue;
      w.clusterArrived &= ~lanes;
      clusterWaiting_ -= static_cast<uint32_t>(std::popcount(lanes));
      w.nextGroup = 0;  // found anew
      w.othersKey = ~0ull;
      w.pendingGroup = 0;
      released = true;
    }
    return released;
  }

  // Nothing in this CTA can run until the cluster's phase ends.
  void awaitCluster() {
    flushSteps();
    uint64_t phase = 0;
    for (Warp& w : warps_)
      forLanes(w.live, [&](int l) {
        if (w.state[l] == LaneState::kClusterWait) phase = w.clusterPhase[l];
      });
    switch (cluster_->wait(phase, [&] { return ctx_.stopped(); })) {
      case ClusterGroup::Wait::kReleased:
        return;
      case ClusterGroup::Wait::kStopped:
        flushSteps();  // throws: the launch failed elsewhere or was cancelled
        throw LaunchFault{Status::error(CUDA_ERROR_LAUNCH_FAILED, "")};
      case ClusterGroup::Wait::kDeadlock:
        deadlock();
    }
  }

  [[noreturn]] void deadlock() {
    std::ostringstream s;
    s << "deadlock in kernel " << ctx_.kernel.name << " block (" << block_[0] << "," << block_[1]
      << "," << block_[2] << "): no thread can make progress;";
    for (Warp& w : warps_) {
      forLanes(w.live, [&](int l) {
        // One line per distinct (state, pc) within the warp.
        for (int k = 0; k < l; ++k)
          if (((w.live >> k) & 1) && w.state[k] == w.state[l] && w.pc[k] == w.pc[l]) return;
        uint32_t lanes = 0;
        forLanes(w.live, [&](int k) {
          if (w.state[k] == w.state[l] && w.pc[k] == w.pc[l]) lanes |= 1u << k;
        });
        s << " warp " << w.index << " lanes 0x" << std::hex << lanes << std::dec
          << (w.state[l] == LaneState::kBarrier       ? " at barrier"
              : w.state[l] == LaneState::kClusterWait ? " at the cluster barrier"
                                                      : " at warp-sync")
          << " pc " << w.pc[l] << " (line " << code_[w.pc[l]].line << ": "
          << img_.instructionText[w.pc[l]] << ");";
      });
    }
    throw LaunchFault{Status::error(CUDA_ERROR_LAUNCH_FAILED, s.str())};
  }

  [[noreturn]] void fault(CUresult code, int lane, uint32_t pc, const std::string& what) {
    uint32_t t = w_->index * 32 + static_cast<uint32_t>(lane);
    const auto& b = ctx_.config.block;
    std::ostringstream s;
    s << what << " in kernel " << ctx_.kernel.name << " block (" << block_[0] << "," << block_[1]
      << "," << block_[2] << ") thread (" << t % b[0] << "," << (t / b[0]) % b[1] << ","
      << t / (b[0] * b[1]) << ") lane " << lane << " pc " << pc << " line " << code_[pc].line
      << ": " << img_.instructionText[pc];
    throw LaunchFault{Status::error(code, s.str())};
  }

  // ---- operands -----------------------------------------------------------------------------
  uint64_t symbolBase(const Operand& o, int l) {
    switch (o.symbol) {
      case SymbolKind::kGlobal:
        if (!img_.bound)
          fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_, "module globals were not bound");
        return img_.globalAddresses[o.index];
      case SymbolKind::kShared:
        return ctx_.sharedOffsets[o.index];
      case SymbolKind::kLocal:
        return w_->frames[l].back().localBase;
      case SymbolKind::kKernelParam:
        return kParamWindow;
      case SymbolKind::kFrameParam:
        return w_->frames[l].back().paramBase;
      case SymbolKind::kFunction:
        return kFunctionWindow + uint64_t{o.index} * 16;
      default:
        return 0;
    }
  }

  uint64_t special(uint32_t id, int l) {
    uint32_t t = w_->index * 32 + static_cast<uint32_t>(l);
    const auto& b = ctx_.config.block;
    const auto& g = ctx_.config.grid;
    const Special s = static_cast<Special>(id);
    switch (s) {
      case Special::kTidX:
        return t % b[0];
      case Special::kTidY:
        return (t / b[0]) % b[1];
      case Special::kTidZ:
        return t / (b[0] * b[1]);
      case Special::kNtidX:
        return b[0];
      case Special::kNtidY:
        return b[1];
      case Special::kNtidZ:
        return b[2];
      case Special::kCtaidX:
        return block_[0];
      case Special::kCtaidY:
        return block_[1];
      case Special::kCtaidZ:
        return block_[2];
      case Special::kNctaidX:
        return g[0];
      case Special::kNctaidY:
        return g[1];
      case Special::kNctaidZ:
        return g[2];
      case Special::kLaneId:
        return static_cast<uint64_t>(l);
      case Special::kWarpId:
        return w_->index;
      case Special::kNWarpId:
        return warps_.size();
      case Special::kSmId:
        return worker_;
      case Special::kNSmId:
        return ctx_.workers;
      case Special::kLanemaskEq:
        return 1u << l;
      case Special::kLanemaskLt:
        return (1u << l) - 1;
      case Special::kLanemaskLe:
        return static_cast<uint32_t>((2ull << l) - 1);
      case Special::kLanemaskGt:
        return ~static_cast<uint32_t>((2ull << l) - 1);
      case Special::kLanemaskGe:
        return ~((1u << l) - 1);
      case Special::kClock:
      case Special::kClock64:
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - ctx_.start)
                                         .count());
      case Special::kGlobalTimer:
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
      case Special::kDynamicSmemSize:
        return ctx_.config.dynamicSharedBytes;
      case Special::kTotalSmemSize:
        return ctx_.sharedBytes;
      case Special::kWarpSize:
        return 32;
      case Special::kGridId:
        return 1;
      case Special::kGridWorkspaceLo:
        return ctx_.config.gridWorkspace & 0xffffffffu;
      case Special::kGridWorkspaceHi:
        return ctx_.config.gridWorkspace >> 32;
      case Special::kClusterIdX:
      case Special::kClusterIdY:
      case Special::kClusterIdZ:
        return clusterId_[static_cast<int>(s) - static_cast<int>(Special::kClusterIdX)];
      case Special::kNClusterIdX:
      case Special::kNClusterIdY:
      case Special::kNClusterIdZ: {
        const int i = static_cast<int>(s) - static_cast<int>(Special::kNClusterIdX);
        return g[i] / ctx_.config.cluster[i];
      }
      case Special::kClusterCtaidX:
      case Special::kClusterCtaidY:
      case Special::kClusterCtaidZ:
        return clusterCtaid_[static_cast<int>(s) - static_cast<int>(Special::kClusterCtaidX)];
      case Special::kClusterNctaidX:
      case Special::kClusterNctaidY:
      case Special::kClusterNctaidZ:
        return ctx_.config
            .cluster[static_cast<int>(s) - static_cast<int>(Special::kClusterNctaidX)];
      case Special::kClusterCtaRank:
        return clusterRank_;
      case Special::kClusterNctaRank:
        return ctx_.config.cluster[0] * ctx_.config.cluster[1] * ctx_.config.cluster[2];
      case Special::kIsExplicitCluster:
        return ctx_.config.explicitCluster ? 1 : 0;
      case Special::kReservedSmemBegin:
      case Special::kReservedSmem0:
        return 0;
      case Special::kReservedSmem1:
        return kReservedSharedBytes / 2;
      case Special::kReservedSmemEnd:
      case Special::kReservedSmemCap:
        return kReservedSharedBytes;
    }
    return 0;
  }

  inline uint64_t value(const Operand& o, int l) {
    switch (o.kind) {
      case OperandKind::kReg: {
        uint64_t v = R_[o.index * 32 + l];
        return o.negate ? (v & 1) ^ 1 : v;
      }
      case OperandKind::kImm:
        return o.imm;
      case OperandKind::kSpecial:
        return special(o.index, l);
      case OperandKind::kSymbol:
        return symbolBase(o, l) + o.imm;
      default:
        return 0;
    }
  }
  inline void set(const Operand& o, int l, uint64_t v) {
    if (o.kind == OperandKind::kReg) R_[o.index * 32 + l] = v;
  }
  const Operand& element(const Operand& vec, unsigned k) {
    return img_.vectorElements[vec.index + k];
  }

  uint64_t address(const Operand& o, int l) {
    uint64_t base = o.symbol != SymbolKind::kNone ? symbolBase(o, l)
                    : o.index != Operand::kNoReg  ? R_[o.index * 32 + l]
                                                  : 0;
    return base + o.imm;
  }

  // ---- memory -------------------------------------------------------------------------------
  uint8_t* illegal(int l, uint64_t addr, uint64_t len, const char* space) {
    std::ostringstream s;
    s << "illegal address: " << space << " access of " << len << " bytes at 0x" << std::hex << addr;
    fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_, s.str());
  }

  uint8_t* sharedPtr(uint64_t off, uint64_t len, int l, uint64_t shown) {
    if (off + len <= shared_.size() && off + len >= off) return shared_.data() + off;
    // Another CTA's shared memory, at the addresses mapa gives (cluster.h).
    if (cluster_ && off >> kClusterRankShift) {
      const uint64_t rank = (off >> kClusterRankShift) - 1;
      if (rank < cluster_->ctas())
        if (uint8_t* p =
                cluster_->sharedOf(static_cast<uint32_t>(rank), off & kClusterOffsetMask, len))
          return p;
    }
    return illegal(l, shown, len, "shared");
  }
  // mapa: the address at which rank `rank` holds what `address` names in this CTA's (or any
  // CTA's) shared memory; getctarank: the rank whose shared memory `address` names.
  uint64_t mapSharedRank(uint64_t offset, uint64_t rank, int l) {
    const uint32_t ctas = cluster_ ? cluster_->ctas() : 1;
    if (rank >= ctas)
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, curPc_,
            "mapa: rank " + std::to_string(rank) + " is outside the cluster of " +
                std::to_string(ctas));
    const uint64_t inCta = offset & kClusterOffsetMask;
    return rank == clusterRank_ ? inCta : sharedClusterAddress(static_cast<uint32_t>(rank), inCta);
  }
  // The shared addresses a bulk copy writes at `address`: with .multicast::cluster the same offset
  // in each CTA of the mask (ops[4]), else `address` alone. Returns how many it put in `out`.
  unsigned multicastTargets(const Instr& in, uint64_t address, int l,
                            uint64_t (&out)[kMaxClusterCtas]) {
    if (!in.has(kMulticast)) {
      out[0] = address;
      return 1;
    }
    const uint32_t mask = static_cast<uint32_t>(value(in.ops[4], l)) & 0xffffu;
    unsigned n = 0;
    for (uint32_t rank = 0; rank < kMaxClusterCtas; ++rank)
      if ((mask >> rank) & 1) out[n++] = mapSharedRank(address, rank, l);
    if (n == 0)
      fault(CUDA_ERROR_LAUNCH_FAILED, l, curPc_, "a multicast bulk copy with an empty CTA mask");
    return n;
  }
  uint32_t sharedRankOf(uint64_t offset) const {
    return offset >> kClusterRankShift ? static_cast<uint32_t>((offset >> kClusterRankShift) - 1)
                                       : clusterRank_;
  }
  uint8_t* localPtr(uint64_t off, uint64_t len, int l, uint64_t shown) {
    auto& mem = w_->local[l];
    if (off + len > mem.size() || off + len < off) return illegal(l, shown, len, "local");
    return mem.data() + off;
  }
  uint8_t* kernelParamPtr(uint64_t off, uint64_t len, int l, uint64_t shown) {
    if (off + len > ctx_.kernel.paramBytes || off + len < off)
      return illegal(l, shown, len, "param");
    return const_cast<uint8_t*>(ctx_.params) + off;
  }
  // Host pointer for [addr, addr+len) of global memory (the device's, or the device-side heap),
  // or null where that is not one resolvable range.
  uint8_t* resolveGlobal(uint64_t addr, uint64_t len) {
    // Spans come from the device memory, which never lies in the interpreter's windows.
    if (memoryChanges_ && memoryChanges_->load(std::memory_order_acquire) == spansChangeCount_) {
      for (const GlobalSpan& s : spans_) {
        uint64_t offset = addr - s.base;
        if (s.host && offset <= s.size && len <= s.size - offset) return s.host + offset;
      }
    }
    if (addr >= kHeapWindow && addr < kHeapWindow + kWindowSize) {
      DeviceHeap* heap = ctx_.services.heap;
      return heap ? static_cast<uint8_t*>(heap->translate(addr, len)) : nullptr;
    }
    if (addr >= kSharedWindow && addr < kWindowsEnd) return nullptr;
    if (memoryChanges_) {
      GlobalSpan found;
      uint64_t changeCount = 0;
      if (!ctx_.memory.span(addr, len, &found.base, &found.size, &found.host, &changeCount))
        return nullptr;
      if (changeCount != spansChangeCount_) {
        std::fill(std::begin(spans_), std::end(spans_), GlobalSpan{});
        spansChangeCount_ = changeCount;
      }
      spans_[nextSpan_++ % kKeptSpans] = found;
      return found.host + (addr - found.base);
    }
    return static_cast<uint8_t*>(ctx_.memory.translate(addr, len));
  }
  uint8_t* globalPtr(uint64_t addr, uint64_t len, int l) {
    if (uint8_t* p = resolveGlobal(addr, len)) return p;
    const bool heap = addr >= kHeapWindow && addr < kHeapWindow + kWindowSize;
    return illegal(l, addr, len, heap ? "global (heap)" : "global");
  }
  uint8_t* access(Space sp, uint64_t addr, uint64_t len, int l) {
    switch (sp) {
      case Space::kShared:
        return sharedPtr(addr, len, l, addr);
      case Space::kLocal:
        return localPtr(addr, len, l, addr);
      case Space::kParam: {
        if (addr >= kParamWindow && addr < kParamWindow + kWindowSize)
          return kernelParamPtr(addr - kParamWindow, len, l, addr);
        auto& mem = w_->params[l];
        if (addr + len > mem.size() || addr + len < addr) return illegal(l, addr, len, "param");
        return mem.data() + addr;
      }
      case Space::kGlobal:
      case Space::kConst:
        return globalPtr(addr, len, l);
      case Space::kGeneric:
        if (addr >= kSharedWindow && addr < kSharedWindow + kWindowSize)
          return sharedPtr(addr - kSharedWindow, len, l, addr);
        if (addr >= kLocalWindow && addr < kLocalWindow + kWindowSize)
          return localPtr(addr - kLocalWindow, len, l, addr);
        if (addr >= kParamWindow && addr < kParamWindow + kWindowSize)
          return kernelParamPtr(addr - kParamWindow, len, l, addr);
        return globalPtr(addr, len, l);
    }
    return illegal(l, addr, len, "unknown");
  }

  // Reads a NUL-terminated string at a generic address (for printf %s and assert messages).
  bool readString(uint64_t addr, int l, std::string* out) {
    out->clear();
    for (int i = 0; i < 4096; ++i) {
      char c = static_cast<char>(*access(Space::kGeneric, addr + static_cast<uint64_t>(i), 1, l));
      if (!c) return true;
      out->push_back(c);
    }
    return true;
  }

  // ---- execution ----------------------------------------------------------------------------
  void advance(uint32_t mask, uint32_t pc) {
    if (mask == 0xffffffffu) {
      std::fill(std::begin(w_->pc), std::end(w_->pc), pc);
      return;
    }
    forLanes(mask, [&](int l) { w_->pc[l] = pc; });
  }
  void exitLane(int l) {
    w_->state[l] = LaneState::kExited;
    liveThreads_ -= (w_->live >> l) & 1;
    w_->live &= ~(1u << l);
    if (cluster_) clusterExit(*w_, 1u << l);
  }
  // Exited lanes hold the cluster barrier no longer.
  void clusterExit(Warp& w, uint32_t lanes) {
    forLanes(lanes, [&](int l) {
      cluster_->exited((w.clusterArrived >> l) & 1 ? w.clusterPhase[l] : ~0ull);
    });
    w.clusterArrived &= ~lanes;
  }

  // Runs the instruction at `pc` for the lanes of `group`. Returns where the whole group went when
  // it stayed together and no lane changed state (pc + 1, or a uniform branch's target), else
  // kScatteredGroup. The group's pcs are written only where lanes part or wait; a group that
  // stays together leaves that to runWarp (settle).
  static constexpr uint32_t kScatteredGroup = 0xffffffffu;
  // Every lane of the group waits at a bar.sync.
  static constexpr uint32_t kGroupWaits = 0xfffffffdu;
  // A branch taken by some lanes of the group (splitTaken_, to splitTarget_, not pc + 1) and not
  // by others.
  static constexpr uint32_t kSplitGroup = 0xfffffffeu;
  uint32_t execute(Warp& w, uint32_t group, uint32_t pc, uint32_t depth) {
    w_ = &w;
    R_ = w.regs[depth].data();
    curPc_ = pc;
    const Instr& in = code_[pc];
    uint32_t exec = group;
    if (in.guard != Operand::kNoReg) {
      const uint32_t set = predicateMask(R_ + size_t{in.guard} * 32);
      exec = (in.guardNegated ? ~set : set) & group;
    }
    if (const FastStep step = fastSteps_ ? fastSteps_[pc] : nullptr) {
      // The group's pcs stay as they were: runWarp holds the group (Warp::nextGroup).
      if (exec) step(*this, in, exec);
      return pc + 1;
    }
    switch (in.op) {
      case Op::kBra:
        advance(exec, in.ops[0].index);
        advance(group & ~exec, pc + 1);
        if (exec == group) return in.ops[0].index;
        if (exec == 0 || in.ops[0].index == pc + 1) return pc + 1;
        splitTaken_ = exec;
        splitTarget_ = in.ops[0].index;
        return kSplitGroup;
      case Op::kRet:
        doRet(exec);
        advance(group & ~exec, pc + 1);
        return kScatteredGroup;
      case Op::kExit:
        forLanes(exec, [&](int l) { exitLane(l); });
        advance(group & ~exec, pc + 1);
        return kScatteredGroup;
      case Op::kCall:
        doCall(in, exec, pc);
        advance(group & ~exec, pc + 1);
        return kScatteredGroup;
      case Op::kTrap:
        if (exec) fault(CUDA_ERROR_LAUNCH_FAILED, std::countr_zero(exec), pc, "trap");
        break;
      case Op::kBar:
        if (static_cast<BarMode>(in.mode) == BarMode::kArrive) {
          // An arrival counts toward the barrier's next release; the thread does not wait.
          forLanes(exec, [&](int l) {
            const uint32_t id = static_cast<uint32_t>(value(in.ops[1], l)) & 15;
            ++arrivals_[id];
            arrivalCount_[id] = static_cast<uint32_t>(value(in.ops[2], l));
          });
          break;
        }
        advance(exec, pc);
        waitAtBarrier(w, in, exec, depth);
        advance(group & ~exec, pc + 1);
        return exec && exec == group ? kGroupWaits : kScatteredGroup;
      case Op::kClusterBarrier:
        advance(exec, pc);
        clusterBarrier(w, in, exec);
        advance(group & ~exec, pc + 1);
        if (static_cast<ClusterBarrierMode>(in.mode) == ClusterBarrierMode::kArrive) {
          advance(exec, pc + 1);
          return pc + 1;
        }
        // Lanes whose phase already ended go on; the others wait (releaseClusterWaits).
        forLanes(exec, [&](int l) {
          if (w.state[l] == LaneState::kRun) ++w.pc[l];
        });
        return kScatteredGroup;
      case Op::kShfl:
      case Op::kVote:
      case Op::kRedux:
      case Op::kMatch:
      case Op::kElect:
      case Op::kBarWarpSync:
      case Op::kMatrix: {
        // Matrix instructions (.aligned) gather the whole warp at the same instruction.
        uint64_t key = static_cast<uint64_t>(in.op) | (uint64_t{in.mode} << 8) |
                       (uint64_t(in.type) << 16) | (uint64_t{in.call} << 32);
        advance(exec, pc);
        const Operand& maskOp = in.ops[in.op == Op::kShfl          ? 4
                                       : in.op == Op::kBarWarpSync ? 0
                                       : in.op == Op::kElect       ? 1
                                                                   : 2];
        forLanes(exec, [&](int l) {
          w.state[l] = LaneState::kWarpSync;
          w.syncKey[l] = key;
          w.syncMask[l] =
              in.op == Op::kMatrix ? 0xffffffffu : static_cast<uint32_t>(value(maskOp, l));
        });
        advance(group & ~exec, pc + 1);
        releaseWarpSync(w);
        return kScatteredGroup;
      }
      default:
        if (exec) executeSimple(in, exec, group);
        break;
    }
    advance(group, pc + 1);
    return pc + 1;
  }

  void doCall(const Instr& in, uint32_t exec, uint32_t pc) {
    const CallSite& cs = img_.calls[in.call];
    forLanes(exec, [&](int l) {
      uint32_t callee;
      if (cs.callee >= 0) {
        callee = static_cast<uint32_t>(cs.callee);
      } else {
        uint64_t target = R_[in.ops[0].index * 32 + l];
        uint64_t idx = (target - kFunctionWindow) / 16;
        if (target < kFunctionWindow || (target - kFunctionWindow) % 16 ||
            idx >= img_.functions.size())
          fault(CUDA_ERROR_ILLEGAL_ADDRESS, l, pc, "indirect call to a non-function address");
        callee = static_cast<uint32_t>(idx);
      }
      const FunctionImage& f = img_.functions[callee];
      if (f.builtin != Builtin::kNone) {
        runBuiltin(f.builtin, cs, l, pc);
        w_->pc[l] = pc + 1;
        return;
      }
      if (!f.defined)
        fault(CUDA_ERROR_LAUNCH_FAILED, l, pc, "call to undefined function " + f.name);
      Warp& w = *w_;
      Frame cur = w.frames[l].back();
      const FunctionImage& cf = img_.functions[cur.function];
      if (w.frames[l].size() >= kMaxCallDepth)
        fault(CUDA_ERROR_LAUNCH_FAILED, l, pc, "call stack overflow");
      Frame nf{callee, pc, static_cast<uint32_t>((cur.localBase + cf.localBytes + 15) & ~15u),
               static_cast<uint32_t>((cur.paramBase + cf.frameParamBytes + 15) & ~15u)};
      uint64_t localEnd = uint64_t{nf.localBase} + f.localBytes;
      if (localEnd > kMaxLocalBytesPerThread)
        fault(CUDA_ERROR_LAUNCH_FAILED, l, pc, "local memory stack overflow");
      if (w.local[l].size() < localEnd) w.local[l].resize(localEnd);
      if (w.params[l].size() < nf.paramBase + f.frameParamBytes)
        w.params[l].resize(nf.paramBase + f.frameParamBytes);
      uint8_t* area = w.params[l].data();
      for (size_t i = 0; i < f.params.size() && i < cs.args.size(); ++i)
        std::memcpy(area + nf.paramBase + f.params[i].offset,
                    area + cur.paramBase + cs.args[i].offset,
                    std::min(f.params[i].size, cs.args[i].size));
      w.frames[l].push_back(nf);
      uint32_t d = ++w.depth[l];
      if (d == 1) ++w.lanesInCalls;
      if (w.regs.size() <= d) w.regs.resize(d + 1);
      if (w.regs[d].size() < uint64_t{f.numRegs} * 32) w.regs[d].resize(uint64_t{f.numRegs} * 32);
      w.pc[l] = f.entryPc;
    });
  }

  void doRet(uint32_t exec) {
    Warp& w = *w_;
    if (w.lanesInCalls == 0) {  // every lane returns from the kernel: it exits
      for (int l = 0; l < 32; ++l)
        if ((exec >> l) & 1) w.state[l] = LaneState::kExited;
      liveThreads_ -= static_cast<uint32_t>(std::popcount(w.live & exec));
      w.live &= ~exec;
      if (cluster_) clusterExit(w, exec);
      return;
    }
    forLanes(exec, [&](int l) {
      if (w.frames[l].size() == 1) {
        exitLane(l);
        return;
      }
      Frame f = w.frames[l].back();
      w.frames[l].pop_back();
      const Frame& caller = w.frames[l].back();
      const FunctionImage& callee = img_.functions[f.function];
      const CallSite& cs = img_.calls[code_[f.callPc].call];
      uint8_t* area = w.params[l].data();
      for (size_t i = 0; i < cs.results.size() && i < callee.returns.size(); ++i)
        std::memcpy(area + caller.paramBase + cs.results[i].offset,
                    area + f.paramBase + callee.returns[i].offset,
                    std::min(cs.results[i].size, callee.returns[i].size));
      w.pc[l] = f.callPc + 1;
      if (--w.depth[l] == 0) --w.lanesInCalls;
    });
  }

  uint64_t frameParam(int l, const ParamSlot& slot) {
    uint64_t v = 0;
    const Frame& f = w_->frames[l].back();
    std::memcpy(&v, w_->params[l].data() + f.paramBase + slot.offset,
                std::min<uint32_t>(slot.size, 8));
    return v;
  }
  void setFrameParam(int l, const ParamSlot& slot, uint64_t v) {
    const Frame& f = w_->frames[l].back();
    std::memcpy(w_->params[l].data() + f.paramBase + slot.offset, &v,
                std::min<uint32_t>(slot.size, 8));
  }

  void runBuiltin(Builtin b, const CallSite& cs, int l, uint32_t pc) {
    auto arg = [&](size_t i) { return i < cs.args.size() ? frameParam(l, cs.args[i]) : 0; };
    switch (b) {
      case Builtin::kVprintf: {
        std::string format;
        readString(arg(0), l, &format);
        uint64_t buffer = arg(1);
        PrintfArguments pa;
        pa.read = [&](uint64_t off, void* out, uint64_t len) {
          std::memcpy(out, access(Space::kGeneric, buffer + off, len, l), len);
          return true;
        };
        pa.readString = [&](uint64_t addr, std::string* out) { return readString(addr, l, out); };
        std::string text = formatDevicePrintf(format, pa);
        if (ctx_.services.printfSink) {
          std::lock_guard lock(ctx_.printfMutex);
          ctx_.services.printfSink(text);
        }
        if (!cs.results.empty())
          setFrameParam(l, cs.results[0], static_cast<uint32_t>(text.size()));
        break;
      }
      case Builtin::kMalloc: {
        // No heap (a launch without LaunchServices::heap): malloc() returns NULL, as when full.
        uint64_t p = ctx_.services.heap ? ctx_.services.heap->allocate(arg(0)) : 0;
        if (!cs.results.empty()) setFrameParam(l, cs.results[0], p);
        break;
      }
      case Builtin::kFree:
        if (ctx_.services.heap) ctx_.services.heap->release(arg(0));
        break;
      case Builtin::kAssertFail: {
        std::string msg, file, func;
        readString(arg(0), l, &msg);
        readString(arg(1), l, &file);
        readString(arg(3), l, &func);
        uint32_t line = static_cast<uint32_t>(arg(2));
        fault(
            CUDA_ERROR_ASSERT, l, pc,
            file + ":" + std::to_string(line) + ": " + func + ": Assertion `" + msg + "` failed.");
      }
      case Builtin::kGraphSetConditional:
        if (!ctx_.services.setConditional ||
            !ctx_.services.setConditional(arg(0), static_cast<uint32_t>(arg(1)))) {
          fault(CUDA_ERROR_LAUNCH_FAILED, l, pc,
                "cudaGraphSetConditional: handle " + std::to_string(arg(0)) +
                    " is not a conditional handle of this context");
        }
        break;
      case Builtin::kNone:
        break;
    }
  }

  // ---- warp collectives ---------------------------------------------------------------------
  bool releaseWarpSync(Warp& w) {
    uint32_t waiting = 0;
    for (int l = 0; l < 32; ++l)
      if (w.state[l] == LaneState::kWarpSync) waiting |= 1u << l;
    bool released = false;
    while (waiting) {
      int first = std::countr_zero(waiting);
      uint32_t same = 0;
      forLanes(waiting, [&](int l) {
        if (w.syncKey[l] == w.syncKey[first] && w.syncMask[l] == w.syncMask[first]) same |= 1u << l;
      });
      waiting &= ~same;
      uint32_t needed = w.syncMask[first] & w.live;
      if (needed & ~same) continue;
      collective(w, same);
      released = true;
    }
    return released;
  }

  void collective(Warp& w, uint32_t lanes) {
    w_ = &w;
    if (code_[w.pc[std::countr_zero(lanes)]].op == Op::kMatrix) {
      matrixCollective(w, lanes);
      return;
    }
    uint64_t a[32] = {}, b[32] = {}, c[32] = {}, result[32] = {};
    bool pred[32] = {};
    const Instr* ins[32] = {};
    forLanes(lanes, [&](int l) {
      ins[l] = &code_[w.pc[l]];
      R_ = w.regs[w.depth[l]].data();
      curPc_ = w.pc[l];
      if (ins[l]->numOps > 1) a[l] = value(ins[l]->ops[1], l);
      if (ins[l]->numOps > 2) b[l] = value(ins[l]->ops[2], l);
      if (ins[l]->numOps > 3) c[l] = value(ins[l]->ops[3], l);
    });
    const Instr& in = *ins[std::countr_zero(lanes)];
    unsigned bytes = typeBytes(in.type);
    switch (in.op) {
      case Op::kShfl:
        forLanes(lanes, [&](int l) {
          int lane = l;
          int bval = static_cast<int>(b[l] & 0x1f);
          int cval = static_cast<int>(c[l] & 0x1f);
          int segmask = static_cast<int>((c[l] >> 8) & 0x1f);
          int maxLane = (lane & segmask) | (cval & ~segmask);
          int minLane = lane & segmask;
          int j = lane;
          bool p = false;
          switch (static_cast<ShflMode>(in.mode)) {
            case ShflMode::kUp:
              j = lane - bval;
              p = j >= maxLane;
              break;
            case ShflMode::kDown:
              j = lane + bval;
              p = j <= maxLane;
              break;
            case ShflMode::kBfly:
              j = lane ^ bval;
              p = j <= maxLane;
              break;
            case ShflMode::kIdx:
              j = minLane | (bval & ~segmask);
              p = j <= maxLane;
              break;
          }
          if (!p) j = lane;
          result[l] = ((lanes >> j) & 1) ? a[j] : a[l];
          pred[l] = p;
        });
        break;
      case Op::kVote: {
        uint32_t ballot = 0;
        forLanes(lanes, [&](int l) {
          if (a[l] & 1) ballot |= 1u << l;
        });
        forLanes(lanes, [&](int l) {
          switch (static_cast<VoteMode>(in.mode)) {
            case VoteMode::kAll:
              result[l] = ballot == lanes;
              break;
            case VoteMode::kAny:
              result[l] = ballot != 0;
              break;
            case VoteMode::kUni:
              result[l] = ballot == 0 || ballot == lanes;
              break;
            case VoteMode::kBallot:
              result[l] = ballot;
              break;
          }
        });
        break;
      }
      case Op::kRedux: {
        bool s = isSigned(in.type);
        uint32_t acc = static_cast<uint32_t>(a[std::countr_zero(lanes)]);
        forLanes(lanes & (lanes - 1), [&](int l) {
          uint32_t v = static_cast<uint32_t>(a[l]);
          switch (static_cast<ReduxOp>(in.mode)) {
            case ReduxOp::kAdd:
              acc += v;
              break;
            case ReduxOp::kMin:
              acc = s ? static_cast<uint32_t>(
                            std::min(static_cast<int32_t>(acc), static_cast<int32_t>(v)))
                      : std::min(acc, v);
              break;
            case ReduxOp::kMax:
              acc = s ? static_cast<uint32_t>(
                            std::max(static_cast<int32_t>(acc), static_cast<int32_t>(v)))
                      : std::max(acc, v);
              break;
            case ReduxOp::kAnd:
              acc &= v;
              break;
            case ReduxOp::kOr:
              acc |= v;
              break;
            case ReduxOp::kXor:
              acc ^= v;
              break;
          }
        });
        forLanes(lanes, [&](int l) { result[l] = acc; });
        break;
      }
      case Op::kMatch: {
        uint64_t m = widthMask(bytes);
        bool allEqual = true;
        int first = std::countr_zero(lanes);
        forLanes(lanes, [&](int l) { allEqual &= (a[l] & m) == (a[first] & m); });
        forLanes(lanes, [&](int l) {
          if (in.mode == 1) {  // all
            result[l] = allEqual ? lanes : 0;
            pred[l] = allEqual;
          } else {
            uint32_t eq = 0;
            forLanes(lanes, [&](int k) {
              if ((a[k] & m) == (a[l] & m)) eq |= 1u << k;
            });
            result[l] = eq;
          }
        });
        break;
      }
      case Op::kElect: {
        // The leader is the lowest lane of the member mask that takes part.
        const int leader = std::countr_zero(lanes);
        forLanes(lanes, [&](int l) {
          result[l] = static_cast<uint64_t>(leader);
          pred[l] = l == leader;
        });
        break;
      }
      default:
        break;  // bar.warp.sync: synchronization only
    }
    forLanes(lanes, [&](int l) {
      R_ = w.regs[w.depth[l]].data();
      if (in.op != Op::kBarWarpSync) {
        set(ins[l]->ops[0], l, in.op == Op::kShfl ? result[l] & widthMask(bytes) : result[l]);
        if (ins[l]->ops[5].kind == OperandKind::kReg) set(ins[l]->ops[5], l, pred[l] ? 1 : 0);
      }
      w.state[l] = LaneState::kRun;
      ++w.pc[l];
    });
  }

  // ---- arithmetic and memory instructions -----------------------------------------------------
  void executeSimple(const Instr& in, uint32_t exec, uint32_t group);
  template <class Fn>
  void floatBinary(const Instr& in, uint32_t exec, Fn fn);
  template <class Fn>
  void floatUnary(const Instr& in, uint32_t exec, Fn fn);
  void atomic(const Instr& in, uint32_t exec);
  void mbarrier(const Instr& in, uint32_t exec);
  // Held while an mbarrier word changes, when other CTAs of a cluster may change it too.
  std::unique_lock<std::mutex> clusterMbarrierLock() {
    return cluster_ ? std::unique_lock(cluster_->mbarrierMutex()) : std::unique_lock<std::mutex>();
  }
  // complete_tx of `bytes` on the mbarrier at a shared-space address (clusterMbarrierLock held).
  void mbarrierCompleteTx(uint64_t addr, uint64_t bytes, int l);
  void bulkCopy(const Instr& in, uint32_t exec);
  void tensorCopy(const Instr& in, int l);  // cp{.reduce}.async.bulk.tensor, one lane's
  void fp8Convert(const Instr& in, uint32_t exec);
  void integerOp(const Instr& in, uint32_t exec);
  void textureAccess(const Instr& in, uint32_t exec);  // tex, suld, sust (texture_instructions.cc)
  void textureQuery(const Instr& in, uint32_t exec);   // txq, suq (texture_instructions.cc)
  // The view `handle` names for `lane`, of the kind asked; null for a texture reference nothing
  // is bound to (it reads 0); else the launch faults.
  const TextureView* boundTexture(uint64_t handle, bool surface, int lane);
  // mma.sync, wmma.*, ldmatrix, stmatrix, movmatrix for a gathered warp (matrix_instructions.cc)
  void matrixCollective(Warp& w, uint32_t lanes);
  uint64_t fragmentRegister(Warp& w, const Operand& fragment, unsigned reg, int lane);
  void setFragmentRegister(Warp& w, const Operand& fragment, unsigned reg, int lane, uint64_t v);
  uint64_t readMatrixBits(Space space, uint64_t address, uint64_t bit, unsigned bits, int lane);
  void writeMatrixBits(Space space, uint64_t address, uint64_t bit, unsigned bits, int lane,
                       uint64_t v);
  uint64_t halfResult(double r, Type t, uint32_t flags) {
    if (flags & kSat) r = std::isnan(r) ? 0.0 : r < 0 ? 0.0 : r > 1 ? 1.0 : r;
    if ((flags & kRelu) && !std::isnan(r) && r < 0) r = 0.0;
    return t == Type::kBF16 || t == Type::kBF16x2 ? doubleToBfloat(r) : doubleToHalf(r);
  }

  // Global memory ranges the device memory named (DeviceMemory::span), so accesses inside them
  // resolve without asking it (and taking its lock) again; all dropped when its changes() moves.
  struct GlobalSpan {
    uint64_t base = 0, size = 0;
    uint8_t* host = nullptr;
  };
  static constexpr unsigned kKeptSpans = 4;

  LaunchContext& ctx_;
  const ModuleImage& img_;
  const Instr* code_;
  const FastStep* fastSteps_;  // per pc, or null where the image has none
  unsigned worker_;
  uint32_t block_[3] = {};
  uint32_t threads_ = 0;
  // This CTA's cluster (start()): its coordinates, its rank, and the group it runs in when the
  // launch has clusters (null: a cluster of one).
  uint32_t clusterId_[3] = {}, clusterCtaid_[3] = {};
  uint32_t clusterRank_ = 0;
  ClusterGroup* cluster_ = nullptr;
  std::unique_ptr<ClusterGroup> soloCluster_;  // a launch without clusters that uses the barrier
  uint32_t clusterWaiting_ = 0;                // lanes in LaneState::kClusterWait
  std::vector<uint8_t> shared_;
  std::vector<Warp> warps_;
  Warp* w_ = nullptr;
  uint64_t* R_ = nullptr;
  uint32_t curPc_ = 0;
  uint64_t localWarpSteps_ = 0, localThreadSteps_ = 0;
  bool yieldWarp_ = false;          // the warp polls something only another warp can change
  uint32_t arrivals_[16] = {};      // bar.arrive arrivals not yet consumed by a release
  uint32_t arrivalCount_[16] = {};  // the thread count those arrivals named
  // bar.sync/bar.red waiters, counted as they arrive (waitAtBarrier): lanes per barrier id, the
  // count they named (0: every thread), the ids and the warps (bit per warp) with lanes waiting.
  uint32_t barrierWaiting_[16] = {};
  uint32_t barrierNamed_[16] = {};
  uint32_t barriersWaiting_ = 0;
  uint32_t barrierWarps_ = 0;
  uint32_t liveThreads_ = 0;                   // the CTA's threads that have not exited
  uint32_t splitTaken_ = 0, splitTarget_ = 0;  // execute()'s kSplitGroup
  bool barrierReductions_ = false;  // a bar.red has run in this block: releases count predicates
  const std::atomic<uint64_t>* memoryChanges_;  // null: the memory names no spans
  GlobalSpan spans_[kKeptSpans];
  unsigned nextSpan_ = 0;
  uint64_t spansChangeCount_ = 0;
};

}  // namespace gpupool::ptx::execution
