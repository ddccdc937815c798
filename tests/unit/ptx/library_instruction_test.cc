// Instructions the toolkit's header libraries (Thrust, CUB, cooperative groups, libcu++) emit,
// one tiny PTX snippet each, with the PTX ISA's edge cases: block-wide predicate reductions
// (bar.red / barrier.cta.red), split arrive/wait barriers, the barrier.cta spellings, elect.sync,
// lop3, dp4a/dp2a, fns, mbarrier, fp8 conversions, the no-op griddepcontrol/setmaxnreg, the
// cooperative-groups grid workspace registers (%envreg1/2), and what cuBLASLt and cuSPARSE add:
// set, min/max .NaN and cvt.pack.sat.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

SnippetResult runLibrarySnippet(const std::string& decls, const std::string& body,
                                std::vector<uint64_t> in = {}, uint32_t threads = 1,
                                const std::string& moduleScope = "") {
  return runPassingSnippet(decls, body, std::move(in), threads, moduleScope);
}

// Each of 64 threads stores one u64 per reduction at out[reduction * ... ]: here only thread
// t == 63 (the last warp's last lane) stores, so the slots hold what every thread should see.
TEST(LibraryInstruction, BarRedPopcAndOr) {
  auto r = runLibrarySnippet(
      ".reg .b32 %d, %m; .reg .pred %p, %q, %last;",
      "setp.eq.u32 %last, %tid, 63;"
      "rem.u32 %m, %tid, 3; setp.eq.u32 %p, %m, 0;"  // 22 of 64
      "bar.red.popc.u32 %d, 0, %p; @%last st.global.u32 [%out], %d;"
      "bar.red.popc.u32 %d, 0, !%p; @%last st.global.u32 [%out+8], %d;"
      "bar.red.and.pred %q, 0, %p; selp.u32 %d, 1, 0, %q; @%last st.global.u32 [%out+16], %d;"
      "bar.red.or.pred %q, 0, %p; selp.u32 %d, 1, 0, %q; @%last st.global.u32 [%out+24], %d;"
      "setp.lt.u32 %p, %tid, 64;"  // all true
      "bar.red.and.pred %q, 0, %p; selp.u32 %d, 1, 0, %q; @%last st.global.u32 [%out+32], %d;"
      "barrier.cta.red.or.aligned.pred %q, 1, !%p; selp.u32 %d, 1, 0, %q;"  // all false
      "@%last st.global.u32 [%out+40], %d;"
      "barrier.cta.red.popc.aligned.u32 %d, 2, %p; @%last st.global.u32 [%out+48], %d;",
      {}, 64);
  EXPECT_EQ(r.out[0], 22u);
  EXPECT_EQ(r.out[1], 42u);
  EXPECT_EQ(r.out[2], 0u);
  EXPECT_EQ(r.out[3], 1u);
  EXPECT_EQ(r.out[4], 1u);
  EXPECT_EQ(r.out[5], 0u);
  EXPECT_EQ(r.out[6], 64u);
}

// Every thread sees the same reduction, whichever warp it is in: each stores its own slot.
TEST(LibraryInstruction, BarRedResultReachesEveryThread) {
  auto r = runLibrarySnippet(
      ".reg .b32 %d; .reg .pred %p; .reg .b64 %a, %q;",
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
      "setp.eq.u32 %p, %tid, 47;"  // only one thread, in the second warp
      "bar.red.popc.u32 %d, 3, %p; st.global.u32 [%q], %d;"
      "bar.red.or.pred %p, 3, %p; selp.u32 %d, 1, 0, %p; st.global.u32 [%q+4], %d;",
      {}, 50);
  for (uint32_t t = 0; t < 50; ++t) EXPECT_EQ(r.out[t], (uint64_t{1} << 32) | 1) << t;
}

// A barrier with a thread count: only the first two warps take part; the third is elsewhere.
TEST(LibraryInstruction, BarRedWithThreadCount) {
  auto r = runLibrarySnippet(".reg .b32 %d; .reg .pred %p, %in;",
                             "setp.lt.u32 %in, %tid, 64; @!%in bra DONE;"
                             "setp.lt.u32 %p, %tid, 40;"
                             "bar.red.popc.u32 %d, 1, 64, %p;"
                             "setp.eq.u32 %p, %tid, 0; @%p st.global.u32 [%out], %d;"
                             "DONE: ret;",
                             {}, 96);
  EXPECT_EQ(r.out[0], 40u);
}

// Producer warp: writes shared, bar.arrive; consumer warp: bar.sync on the same barrier, then
// reads what the producer wrote. The producers wait elsewhere (barrier 3) meanwhile, so only
// their arrivals can release barrier 1; a second round checks the arrivals were consumed.
TEST(LibraryInstruction, BarArriveReleasesWaitingConsumers) {
  SnippetResult r = runLibrarySnippet(
      ".reg .b32 %v, %w, %a32; .reg .pred %producer; .reg .b64 %a, %q;",
      "setp.lt.u32 %producer, %tid, 32; @!%producer bra CONSUME;"
      "mul.lo.u32 %v, %tid, 7; mul.wide.u32 %a, %tid, 4; mov.u64 %q, buf; add.s64 %q, %q, %a;"
      "st.shared.u32 [%q], %v; bar.arrive 1, 64; barrier.cta.sync.aligned 3; "
      "mul.lo.u32 %v, %tid, 9; st.shared.u32 [%q], %v; barrier.cta.arrive.aligned 2, 64;"
      "bar.sync 4; ret;"
      // The producers wait at barrier 3 while the consumers pass barrier 1.
      "CONSUME: bar.sync 1, 64; sub.u32 %w, %tid, 32; mul.wide.u32 %a, %w, 4; mov.u64 %q, buf;"
      "add.s64 %q, %q, %a; ld.shared.u32 %v, [%q]; barrier.sync 3;"
      "barrier.cta.sync.aligned 2, 64; ld.shared.u32 %w, [%q]; bar.sync 4;"
      "sub.u32 %a32, %tid, 32; mul.wide.u32 %a, %a32, 8; add.s64 %q, %out, %a;"
      "st.global.v2.u32 [%q], {%v, %w};",
      {}, 64, ".shared .align 4 .b8 buf[128];\n");
  ASSERT_EQ(r.out.size(), 64u);
  const std::vector<uint64_t>& o = r.out;
  for (uint64_t l = 0; l < 32; ++l) EXPECT_EQ(o[l], (l * 9) << 32 | l * 7) << l;
}

TEST(LibraryInstruction, BarRedRefusesMismatchedTypes) {
  SnippetResult r = runSnippet(".reg .b32 %d; .reg .pred %p;",
                               "setp.eq.u32 %p, %tid, 0; bar.red.popc.pred %p, 0, %p;");
  EXPECT_EQ(r.loadCode, CUDA_ERROR_INVALID_PTX) << r.loadMessage;
  r = runSnippet(".reg .b32 %d; .reg .pred %p;", "bar.red.xor.pred %p, 0, %p;");
  EXPECT_NE(r.loadCode, CUDA_SUCCESS);
}

// elect.sync picks the lowest lane of the member mask that is still running.
TEST(LibraryInstruction, ElectSyncPicksLowestMemberLane) {
  auto r = runLibrarySnippet(
      ".reg .b32 %d, %v; .reg .pred %p, %gone; .reg .b64 %a, %q;",
      "setp.lt.u32 %gone, %tid, 3; @%gone exit;"  // lanes 0-2 have exited
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
      "elect.sync %d|%p, 0xffffffff; selp.u32 %v, 1, 0, %p; shl.b32 %v, %v, 8; or.b32 %d, %d, %v;"
      "st.global.u32 [%q], %d;"
      "setp.ge.u32 %p, %tid, 16; @%p bra DONE;"  // lanes 3-15, mask of lanes 8-15
      "setp.lt.u32 %p, %tid, 8; @%p bra DONE;"
      "elect.sync %d|%p, 0xff00; selp.u32 %v, 1, 0, %p; shl.b32 %v, %v, 8; or.b32 %d, %d, %v;"
      "st.global.u32 [%q+4], %d;"
      "DONE: ret;",
      {}, 32);
  for (uint32_t l = 3; l < 32; ++l) {
    EXPECT_EQ(static_cast<uint32_t>(r.out[l]), l == 3 ? 0x103u : 3u) << l;
    if (l >= 8 && l < 16) {
      EXPECT_EQ(r.out[l] >> 32, l == 8 ? 0x108u : 8u) << l;
    }
  }
}

TEST(LibraryInstruction, Lop3TruthTables) {
  // a = 0xF0F0F0F0, b = 0xCCCCCCCC, c = 0xAAAAAAAA: lop3 with immLut = f(a, b, c) gives immLut
  // in every byte.
  auto r = runLibrarySnippet(
      ".reg .b32 %a, %b, %c, %d;",
      "mov.b32 %a, 0xF0F0F0F0; mov.b32 %b, 0xCCCCCCCC; mov.b32 %c, 0xAAAAAAAA;"
      "lop3.b32 %d, %a, %b, %c, 0x96; st.global.u32 [%out], %d;"    // a ^ b ^ c
      "lop3.b32 %d, %a, %b, %c, 0xE8; st.global.u32 [%out+8], %d;"  // majority
      "lop3.b32 %d, %a, %b, %c, 0x00; st.global.u32 [%out+16], %d;"
      "lop3.b32 %d, %a, %b, %c, 0xFF; st.global.u32 [%out+24], %d;"
      "mov.b32 %a, 0x12345678; mov.b32 %b, 0xFFFF0000; mov.b32 %c, 0x0F0F0F0F;"
      "lop3.b32 %d, %a, %b, %c, 0xCA; st.global.u32 [%out+32], %d;");  // a ? b : c, bitwise
  EXPECT_EQ(r.out[0], 0x96969696u);
  EXPECT_EQ(r.out[1], 0xE8E8E8E8u);
  EXPECT_EQ(r.out[2], 0u);
  EXPECT_EQ(r.out[3], 0xFFFFFFFFu);
  EXPECT_EQ(r.out[4], 0x12340000u | (0xEDCBA987u & 0x0F0F0F0Fu));
}

TEST(LibraryInstruction, Dp4aAndDp2aSignednessAndWrap) {
  auto r =
      runLibrarySnippet(".reg .b32 %a, %b, %c, %d;",
                        "mov.b32 %a, 0x80FF0102; mov.b32 %b, 0x7F020304; mov.b32 %c, 10;"
                        "dp4a.u32.u32 %d, %a, %b, %c; st.global.u32 [%out], %d;"
                        "dp4a.s32.s32 %d, %a, %b, %c; st.global.u32 [%out+8], %d;"
                        "dp4a.s32.u32 %d, %a, %b, %c; st.global.u32 [%out+16], %d;"
                        "mov.b32 %a, 0xFFFFFFFF; mov.b32 %b, 0xFFFFFFFF; mov.b32 %c, 0xFFFFFFFF;"
                        "dp4a.u32.u32 %d, %a, %b, %c; st.global.u32 [%out+24], %d;"  // wraps
                        "mov.b32 %a, 0x8000FFFF; mov.b32 %b, 0x02FF7F01; mov.b32 %c, 0;"
                        "dp2a.lo.u32.u32 %d, %a, %b, %c; st.global.u32 [%out+32], %d;"
                        "dp2a.hi.s32.s32 %d, %a, %b, %c; st.global.u32 [%out+40], %d;"
                        "dp2a.lo.s32.u32 %d, %a, %b, %c; st.global.u32 [%out+48], %d;");
  // bytes of a (low first): 02 01 FF 80; of b: 04 03 02 7F.
  EXPECT_EQ(r.out[0], 10u + 2 * 4 + 1 * 3 + 255 * 2 + 128 * 127);
  EXPECT_EQ(static_cast<int32_t>(r.out[1]), 10 + 2 * 4 + 1 * 3 + (-1) * 2 + (-128) * 127);
  EXPECT_EQ(static_cast<int32_t>(r.out[2]), 10 + 2 * 4 + 1 * 3 + (-1) * 2 + (-128) * 127);
  EXPECT_EQ(r.out[3], static_cast<uint32_t>(0xFFFFFFFFu + 4u * 255u * 255u));
  // halves of a: FFFF, 8000; bytes of b: 01 7F FF 02.
  EXPECT_EQ(r.out[4], 0xFFFFu * 1 + 0x8000u * 0x7F);
  EXPECT_EQ(static_cast<int32_t>(r.out[5]), (-1) * (-1) + (-32768) * 2);
  EXPECT_EQ(static_cast<int32_t>(r.out[6]), (-1) * 1 + (-32768) * 127);
}

TEST(LibraryInstruction, FnsFindsNthSetBit) {
  auto r =
      runLibrarySnippet(".reg .b32 %m, %d;",
                        "mov.b32 %m, 0x80000451;"  // bits 0, 4, 6, 10, 31
                        "fns.b32 %d, %m, 0, 1; st.global.u32 [%out], %d;"
                        "fns.b32 %d, %m, 0, 3; st.global.u32 [%out+8], %d;"
                        "fns.b32 %d, %m, 5, 1; st.global.u32 [%out+16], %d;"
                        "fns.b32 %d, %m, 10, -2; st.global.u32 [%out+24], %d;"
                        "fns.b32 %d, %m, 4, 0; st.global.u32 [%out+32], %d;"
                        "fns.b32 %d, %m, 5, 0; st.global.u32 [%out+40], %d;"
                        "fns.b32 %d, %m, 0, 6; st.global.u32 [%out+48], %d;"  // only five set bits
                        "fns.b32 %d, %m, 3, -2; st.global.u32 [%out+56], %d;"
                        "fns.b32 %d, %m, 31, -5; st.global.u32 [%out+64], %d;");
  EXPECT_EQ(r.out[0], 0u);
  EXPECT_EQ(r.out[1], 6u);
  EXPECT_EQ(r.out[2], 6u);
  EXPECT_EQ(r.out[3], 6u);
  EXPECT_EQ(r.out[4], 4u);
  EXPECT_EQ(r.out[5], 0xFFFFFFFFu);
  EXPECT_EQ(r.out[6], 0xFFFFFFFFu);
  EXPECT_EQ(r.out[7], 0xFFFFFFFFu);
  EXPECT_EQ(r.out[8], 0u);
}

TEST(LibraryInstruction, GridDependencyControlAndSetmaxnregAreNoOps) {
  auto r =
      runLibrarySnippet(".reg .b32 %v;",
                        "griddepcontrol.wait; griddepcontrol.launch_dependents;"
                        "setmaxnreg.inc.sync.aligned.u32 232; setmaxnreg.dec.sync.aligned.u32 40;"
                        "mov.b32 %v, 7; st.global.u32 [%out], %v;");
  EXPECT_EQ(r.out[0], 7u);
}

// Cooperative groups find a cooperative launch's grid workspace in %envreg1/2 and trap on a null
// one; an ordinary launch has none (cooperative launches: tests/programs/cooperative_launch*).
TEST(LibraryInstruction, GridWorkspaceRegistersAreNull) {
  auto r = runLibrarySnippet(".reg .b32 %lo, %hi;",
                             "mov.u32 %lo, %envreg1; mov.u32 %hi, %envreg2;"
                             "st.global.v2.u32 [%out], {%lo, %hi};",
                             {}, 1);
  EXPECT_EQ(r.out[0], 0u);
  SnippetResult other = runSnippet(".reg .b32 %v;", "mov.u32 %v, %envreg3;");
  EXPECT_EQ(other.loadCode, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(other.loadMessage.find("%envreg3"), std::string::npos) << other.loadMessage;
}

TEST(LibraryInstruction, ScopeAndCacheQualifiersAreAccepted) {
  auto r = runLibrarySnippet(
      ".reg .b32 %v; .reg .b64 %w;",
      "ld.relaxed.cluster.global.u32 %v, [%in]; st.release.cluster.global.u32 [%out], %v;"
      "ld.acquire.gpu.global.L1::no_allocate.u64 %w, [%in+8]; st.relaxed.sys.global.u64 "
      "[%out+8], %w;"
      "ld.global.nc.L1::no_allocate.L2::256B.u32 %v, [%in+16]; st.global.cs.u32 [%out+16], %v;"
      "fence.acq_rel.cluster; fence.sc.gpu; membar.sys; fence.proxy.async;",
      {5, 6, 7});
  EXPECT_EQ(r.out[0], 5u);
  EXPECT_EQ(r.out[1], 6u);
  EXPECT_EQ(r.out[2], 7u);
}

// cuda::barrier on sm_90: an mbarrier in shared memory for two warps. Thread 0 initializes it;
// every thread writes its slot, arrives and polls try_wait with its token, then reads another
// warp's slot. The second round uses the phase parity, arrive with a count and arrive_drop.
TEST(LibraryInstruction, MbarrierPhasesTokensAndParity) {
  SnippetResult r = runLibrarySnippet(
      ".reg .b32 %v, %w, %slot, %bar, %count; .reg .b64 %token, %a, %q; .reg .pred %p, %first, "
      "%low;",
      "mov.u32 %bar, mbar; setp.eq.u32 %first, %tid, 0; mov.u32 %count, 64;"
      "@%first mbarrier.init.shared.b64 [%bar], %count; bar.sync 0;"
      "shl.b32 %slot, %tid, 2; mov.u32 %w, buf; add.u32 %slot, %slot, %w;"
      "mul.lo.u32 %v, %tid, 5; st.shared.u32 [%slot], %v;"
      "mbarrier.arrive.release.cta.shared::cta.b64 %token, [%bar];"
      "WAIT1: mbarrier.try_wait.shared.b64 %p, [%bar], %token; @!%p bra WAIT1;"
      "mbarrier.test_wait.shared.b64 %p, [%bar], %token; selp.u32 %w, 1, 0, %p;"
      "xor.b32 %v, %tid, 32; shl.b32 %v, %v, 2; mov.u32 %count, buf; add.u32 %v, %v, %count;"
      "ld.shared.u32 %v, [%v];"  // the other warp's slot
      "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a; st.global.v2.u32 [%q], {%v, %w};"
      // Round two (phase 1): the first warp arrives for two threads each and drops out of later
      // phases; the second warp does not arrive at all, so the phase completes with 32 * 2.
      "setp.lt.u32 %p, %tid, 32; @!%p bra SECOND;"
      "mov.u32 %count, 2; mbarrier.arrive_drop.shared.b64 %token, [%bar], %count;"
      "add.s64 %q, %in, %a;"  // round two's results go to the input buffer
      "mbarrier.pending_count.b64 %v, %token; st.global.u32 [%q], %v;"
      "SECOND: mov.u32 %v, 1;"
      "WAIT2: mbarrier.try_wait.parity.shared.b64 %p, [%bar], %v; @!%p bra WAIT2;"
      // Phase 2 expects 64 - 64 = 0 arrivals: only phase parity 0 (phase 2) is now pending.
      "mov.u32 %v, 0; mbarrier.test_wait.parity.shared.b64 %p, [%bar], %v; selp.u32 %w, 1, 0, %p;"
      "setp.lt.u32 %low, %tid, 32; @%low st.global.u32 [%q+4], %w; bar.sync 0; @%first "
      "mbarrier.inval.shared.b64 [%bar];",
      {}, 64, ".shared .align 8 .b8 mbar[8];\n.shared .align 4 .b8 buf[256];\n");
  ASSERT_EQ(r.out.size(), 64u);
  const std::vector<uint64_t>& o = r.out;
  const std::vector<uint64_t>& second = r.in;
  for (uint64_t t = 0; t < 64; ++t) {
    EXPECT_EQ(o[t], (uint64_t{1} << 32) | ((t ^ 32) * 5)) << t;
    if (t < 32) {
      // pending after this thread's arrival: 64 - 2 * (arrivals so far including this one).
      EXPECT_EQ(static_cast<uint32_t>(second[t]), 64 - 2 * (t + 1)) << t;
      EXPECT_EQ(second[t] >> 32, 0u) << t;  // phase 2 (parity 0) is incomplete
    }
  }
}

// Hopper bulk copies (cuda::memcpy_async with a barrier on sm_90, CUTLASS's TMA loads) and the
// mbarrier transaction count. Phase 0: arrive.expect_tx, then the copy. Phase 1: the copy first
// (the tx-count goes negative; the phase stays incomplete), then arrive.expect_tx. Phase 2:
// expect_tx, an arrival that leaves the phase waiting on bytes, then complete_tx. Phase 3: a
// shared-to-shared copy. Then every thread adds one to its slot and thread 0 copies the buffer to
// global memory through a bulk group. Every thread waits on each phase, and a bar.sync keeps any
// from falling two phases (one parity) behind.
TEST(LibraryInstruction, BulkCopiesCompleteMbarrierTransactions) {
  std::vector<uint64_t> input(64);
  for (uint64_t i = 0; i < 64; ++i) input[i] = 7000 + 3 * i;
  SnippetResult r = runLibrarySnippet(
      ".reg .b32 %bar, %b, %b2, %w, %slot; .reg .b64 %token, %v; .reg .pred %p, %first;",
      "mov.u32 %bar, mbar; mov.u32 %b, buf; mov.u32 %b2, buf2; setp.eq.u32 %first, %tid, 0;"
      "@%first mbarrier.init.shared::cta.b64 [%bar], 1; bar.sync 0;"
      "@%first mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %token, [%bar], 256;"
      "@%first cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%b], [%in], "
      "256, [%bar];"
      "W0: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W0; bar.sync 0;"
      "@%first cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
      "[%b+256], [%in+256], 256, [%bar], %token;"
      "@%first mbarrier.test_wait.parity.shared::cta.b64 %p, [%bar], 1;"
      "selp.u32 %w, 1, 0, %p; @%first st.shared.u32 [flags], %w;"
      "@%first mbarrier.arrive.expect_tx.shared::cta.b64 %token, [%bar], 256;"
      "W1: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 1; @!%p bra W1; bar.sync 0;"
      "@%first mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%bar], 32;"
      "@%first mbarrier.arrive.shared::cta.b64 %token, [%bar];"
      "@%first mbarrier.test_wait.parity.shared::cta.b64 %p, [%bar], 0;"
      "selp.u32 %w, 1, 0, %p; @%first st.shared.u32 [flags+4], %w;"
      "@%first mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%bar], 32;"
      "W2: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W2; bar.sync 0;"
      "@%first mbarrier.arrive.expect_tx.shared::cta.b64 %token, [%bar], 512;"
      "@%first cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%b2], [%b], "
      "512, [%bar];"
      "W3: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 1; @!%p bra W3;"
      "shl.b32 %slot, %tid, 3; add.u32 %slot, %slot, %b2; ld.shared.u64 %v, [%slot];"
      "add.u64 %v, %v, 1; st.shared.u64 [%slot], %v; fence.proxy.async.shared::cta; bar.sync 0;"
      "@%first cp.async.bulk.global.shared::cta.bulk_group [%out], [%b2], 512;"
      "@%first cp.async.bulk.commit_group; @%first cp.async.bulk.wait_group.read 0;"
      "@%first cp.async.bulk.wait_group 0; @%first cp.async.bulk.prefetch.L2.global [%in], 512;"
      "@%first ld.shared.v2.u32 {%w, %slot}, [flags];"
      "@%first st.global.v2.u32 [%in], {%w, %slot};",
      input, 64,
      ".shared .align 8 .b8 mbar[8];\n.shared .align 16 .b8 buf[512];\n"
      ".shared .align 16 .b8 buf2[512];\n.shared .align 8 .b8 flags[8];\n");
  ASSERT_EQ(r.out.size(), 64u);
  for (uint64_t t = 0; t < 64; ++t) EXPECT_EQ(r.out[t], 7000 + 3 * t + 1) << t;
  EXPECT_EQ(r.in[0], 0u) << "phase 1 completed before its expect_tx";
}

// cp.reduce.async.bulk: element-wise add/min into global memory through a bulk group, and add
// into shared memory completing an mbarrier transaction.
TEST(LibraryInstruction, BulkReductionsCombineElementWise) {
  std::vector<uint64_t> input(64);
  for (uint64_t i = 0; i < 32; ++i)
    input[i] = ((i * 0x9e3779b97f4a7c15ull) >> 7) ^ (i % 3 ? 0 : 0x8000000080000000ull);
  const std::vector<uint64_t> before = input;
  SnippetResult r = runLibrarySnippet(
      ".reg .b32 %bar, %b, %b2; .reg .b64 %token; .reg .pred %p;",
      "mov.u32 %bar, mbar; mov.u32 %b, buf; mov.u32 %b2, buf2;"
      "mbarrier.init.shared::cta.b64 [%bar], 1;"
      "mbarrier.arrive.expect_tx.shared::cta.b64 %token, [%bar], 128;"
      "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%b], [%in], 64, [%bar];"
      "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%b2], [%in+192], 64, "
      "[%bar];"
      "W0: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 0; @!%p bra W0;"
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%in+64], [%b], 64;"
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.min.s32 [%in+128], "
      "[%b], 64, %token;"
      "cp.async.bulk.commit_group; cp.async.bulk.wait_group 0;"
      "mbarrier.arrive.expect_tx.shared::cta.b64 %token, [%bar], 64;"
      "cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u64 "
      "[%b2], [%b], 64, [%bar];"
      "W1: mbarrier.try_wait.parity.shared::cta.b64 %p, [%bar], 1; @!%p bra W1;"
      "cp.async.bulk.global.shared::cta.bulk_group [%out], [%b2], 64;",
      input, 1,
      ".shared .align 8 .b8 mbar[8];\n.shared .align 16 .b8 buf[64];\n"
      ".shared .align 16 .b8 buf2[64];\n");
  auto lo = [](uint64_t v) { return static_cast<uint32_t>(v); };
  auto hi = [](uint64_t v) { return static_cast<uint32_t>(v >> 32); };
  for (size_t i = 0; i < 8; ++i) {
    const uint64_t s = before[i];
    const uint64_t added = before[8 + i];
    EXPECT_EQ(lo(r.in[8 + i]), lo(added) + lo(s)) << i;
    EXPECT_EQ(hi(r.in[8 + i]), hi(added) + hi(s)) << i;
    const uint64_t m = before[16 + i];
    EXPECT_EQ(lo(r.in[16 + i]), static_cast<uint32_t>(std::min<int32_t>(lo(m), lo(s)))) << i;
    EXPECT_EQ(hi(r.in[16 + i]), static_cast<uint32_t>(std::min<int32_t>(hi(m), hi(s)))) << i;
    EXPECT_EQ(r.out[i], before[24 + i] + s) << i;
  }
}

TEST(LibraryInstruction, BulkCopyFaultsOnMisalignedSize) {
  SnippetResult r = runSnippet(
      ".reg .b32 %bar, %b;",
      "mov.u32 %bar, mbar; mov.u32 %b, buf; mbarrier.init.shared::cta.b64 [%bar], 1;"
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%b], [%in], 24, [%bar];",
      {}, 1, "sm_90", ".shared .align 8 .b8 mbar[8];\n.shared .align 16 .b8 buf[64];\n");
  EXPECT_EQ(r.loadCode, CUDA_SUCCESS) << r.loadMessage;
  EXPECT_EQ(r.launch.status.code, CUDA_ERROR_MISALIGNED_ADDRESS) << r.launch.status.message;
}

// cp.async.bulk.prefetch.tensor is a hint (into an L2 the emu has not): its tile and im2col forms
// load and do nothing, whatever the map register holds; their operands are checked as a copy's.
TEST(LibraryInstruction, TensorPrefetchesAreHints) {
  SnippetResult r = runPassingSnippet(
      ".reg .b64 %m; .reg .b32 %a; .reg .b16 %h;",
      "mov.b64 %m, 0; mov.u32 %a, 0; mov.u16 %h, 0;"
      "cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%m, {%a, %a}];"
      "cp.async.bulk.prefetch.tensor.1d.L2.global [%m, {%a}];"
      "cp.async.bulk.prefetch.tensor.4d.L2.global.im2col.L2::cache_hint [%m, {%a, %a, %a, %a}], "
      "{%h, %h}, %m;"
      "st.global.u64 [%out], 7;");
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out[0], 7u);
  const std::pair<const char*, CUresult> cases[] = {
      {"cp.async.bulk.prefetch.tensor.4d.L2.global.im2col [%m, {%a, %a, %a, %a}], {%h};",
       CUDA_ERROR_INVALID_PTX},
      {"cp.async.bulk.prefetch.tensor.2d.L2.global [%m, {%a}];", CUDA_ERROR_INVALID_PTX},
      {"cp.async.bulk.prefetch.tensor.2d.L2.global.tile::gather4 [%m, {%a, %a}];",
       CUDA_ERROR_NOT_SUPPORTED}};
  for (const auto& [body, code] : cases) {
    SnippetResult bad = runSnippet(".reg .b64 %m; .reg .b32 %a; .reg .b16 %h;", body);
    EXPECT_EQ(bad.loadCode, code) << body << ": " << bad.loadMessage;
  }
}

TEST(LibraryInstruction, BulkFormsTheEmuDoesNotRunAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"cp.reduce.async.bulk.global.shared::cta.bulk_group.min.noftz.f16 [%o], [%a], 16;",
       "16-bit floats"},
      {"cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group "
       "[%o, {%a, %a, %a, %a, %a}], [%a];",
       "scatter"},
      {"cp.async.bulk.tensor.3d.shared::cluster.global.im2col_no_offs.mbarrier::complete_tx::bytes "
       "[%a], [%o, {%a, %a, %a}], [%a];",
       "im2col_no_offs"},
      {"multimem.ld_reduce.relaxed.sys.global.add.u32 %a, [%o];", "multimem"}};
  for (const auto& [body, reason] : cases) {
    SnippetResult r = runSnippet(".reg .b64 %o; .reg .b32 %a; .reg .b16 %h;", body);
    EXPECT_EQ(r.loadCode, CUDA_ERROR_NOT_SUPPORTED) << body << ": " << r.loadMessage;
    EXPECT_NE(r.loadMessage.find(reason), std::string::npos) << r.loadMessage;
  }
}

uint64_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// f32 pairs to fp8 pairs: round to nearest even (ties at 1.0625 and 1.1875, subnormal ties),
// saturation of large values and infinities to the largest finite, NaN, signed zero, .relu.
TEST(LibraryInstruction, CvtToFp8RoundsAndSaturates) {
  const float inputs[] = {1.0f,     448.0f,   500.0f,   INFINITY, -INFINITY,   NAN,      -0.0f,
                          0x1p-9f,  0x1p-10f, 0x3p-10f, 1.0625f,  1.1875f,     464.0f,   -2.0f,
                          57344.0f, 1e6f,     0x1p-16f, 0x1p-17f, -0x1.8p-15f, 0x1.4p+0f};
  std::vector<uint64_t> in;
  for (float f : inputs) in.push_back(floatBits(f));
  std::string body;
  // Slot i: e4m3x2 of (input i, 1.0) in bits 0-15, e5m2x2 of (1.0, input i) in bits 16-31,
  // e4m3x2 with .relu of (input i, input i) in bits 32-47.
  for (size_t i = 0; i < std::size(inputs); ++i) {
    const std::string at = std::to_string(i * 8);
    body += "ld.global.f32 %f, [%in+" + at + "];" +
            "cvt.rn.satfinite.e4m3x2.f32 %h, %f, %one; cvt.u32.u16 %x, %h;" +
            "cvt.rn.satfinite.e5m2x2.f32 %h, %one, %f; cvt.u32.u16 %y, %h; shl.b32 %y, %y, 16;" +
            "or.b32 %x, %x, %y; st.global.u32 [%out+" + at + "], %x;" +
            "cvt.rn.satfinite.relu.e4m3x2.f32 %h, %f, %f; st.global.u16 [%out+" +
            std::to_string(i * 8 + 4) + "], %h;";
  }
  auto r = runLibrarySnippet(".reg .f32 %f, %one; .reg .b16 %h; .reg .b32 %x, %y;",
                             "mov.f32 %one, 0f3F800000;" + body, in);
  // {e4m3 of input, e5m2 of input, e4m3 .relu of input}
  const uint8_t expected[][3] = {
      {0x38, 0x3c, 0x38}, {0x7e, 0x5f, 0x7e}, {0x7e, 0x60, 0x7e}, {0x7e, 0x7b, 0x7e},
      {0xfe, 0xfb, 0x00}, {0x7f, 0x7f, 0x7f}, {0x80, 0x80, 0x00}, {0x01, 0x18, 0x01},
      {0x00, 0x14, 0x00}, {0x02, 0x1a, 0x02}, {0x38, 0x3c, 0x38}, {0x3a, 0x3d, 0x3a},
      {0x7e, 0x5f, 0x7e}, {0xc0, 0xc0, 0x00}, {0x7e, 0x7b, 0x7e}, {0x7e, 0x7b, 0x7e},
      {0x00, 0x01, 0x00}, {0x00, 0x00, 0x00}, {0x80, 0x83, 0x00}, {0x3a, 0x3d, 0x3a}};
  for (size_t i = 0; i < std::size(inputs); ++i) {
    const uint64_t v = r.out[i];
    EXPECT_EQ((v >> 8) & 0xff, expected[i][0]) << "e4m3 of " << inputs[i];
    EXPECT_EQ(v & 0xff, 0x38u) << i;  // 1.0
    EXPECT_EQ((v >> 16) & 0xff, expected[i][1]) << "e5m2 of " << inputs[i];
    EXPECT_EQ((v >> 24) & 0xff, 0x3cu) << i;  // 1.0
    EXPECT_EQ((v >> 32) & 0xff, expected[i][2]) << "e4m3 relu of " << inputs[i];
  }
}

TEST(LibraryInstruction, CvtBetweenFp8AndHalfPairs) {
  auto r = runLibrarySnippet(
      ".reg .b16 %h; .reg .b32 %x;",
      "mov.b16 %h, 0x7F01; cvt.rn.f16x2.e4m3x2 %x, %h; st.global.u32 [%out], %x;"
      "mov.b16 %h, 0xC0B8; cvt.rn.f16x2.e4m3x2 %x, %h; st.global.u32 [%out+8], %x;"
      "mov.b16 %h, 0x7C83; cvt.rn.f16x2.e5m2x2 %x, %h; st.global.u32 [%out+16], %x;"
      "mov.b16 %h, 0xC0B8; cvt.rn.relu.f16x2.e4m3x2 %x, %h; st.global.u32 [%out+24], %x;"
      "mov.b32 %x, 0x3C00C000; cvt.rn.satfinite.e4m3x2.f16x2 %h, %x; st.global.u16 [%out+32], "
      "%h;"
      "mov.b32 %x, 0x7C00FC00; cvt.rn.satfinite.e5m2x2.f16x2 %h, %x; st.global.u16 [%out+40], "
      "%h;");
  EXPECT_EQ(r.out[0], 0x7FFF1800u);  // NaN, 2^-9
  EXPECT_EQ(r.out[1], 0xC000BC00u);  // -2, -1
  EXPECT_EQ(r.out[2], 0x7C008300u);  // +inf, -3 * 2^-16 (an f16 subnormal)
  EXPECT_EQ(r.out[3], 0u);           // .relu: both negative
  EXPECT_EQ(r.out[4], 0x38C0u);      // 1, -2
  EXPECT_EQ(r.out[5], 0x7BFBu);      // +-inf saturate
}

// A warp spinning on a shared flag that another warp sets (libcu++'s pre-sm_90 barrier, spin
// locks) lets that warp run: with nanosleep in the loop, and without.
TEST(LibraryInstruction, SpinningWarpLetsTheWriterRun) {
  for (const char* backoff : {"nanosleep.u32 100;", ""}) {
    SnippetResult r = runLibrarySnippet(
        ".reg .b32 %v, %f; .reg .pred %p, %waiter;",
        std::string("setp.lt.u32 %waiter, %tid, 32; @!%waiter bra WRITE;"
                    "SPIN: ld.volatile.shared.u32 %f, [flag]; setp.eq.u32 %p, %f, 0;") +
            backoff +
            "@%p bra SPIN; ld.shared.u32 %v, [flag+4]; st.global.u32 [%out], %v; ret;"
            "WRITE: setp.eq.u32 %p, %tid, 32; @!%p ret; mov.u32 %v, 77;"
            "st.shared.u32 [flag+4], %v; membar.cta; mov.u32 %v, 1; st.volatile.shared.u32 "
            "[flag], %v;",
        {}, 64, ".shared .align 4 .b8 flag[8];\n");
    ASSERT_EQ(r.out.size(), 64u);
    EXPECT_EQ(r.out[0], 77u) << backoff;
  }
}

// cuda::memcpy_async with a barrier on sm_80+: cp.async, then cp.async.mbarrier.arrive. With
// .noinc it is one arrival of the barrier's count; without, the count is raised first, so no net
// arrival.
TEST(LibraryInstruction, CpAsyncMbarrierArrive) {
  std::vector<uint64_t> input(64);
  for (uint64_t i = 0; i < 64; ++i) input[i] = 1000 + i;
  SnippetResult r = runLibrarySnippet(
      ".reg .b32 %bar, %dst, %v, %count; .reg .b64 %a, %src, %token; .reg .pred %p, %first;",
      "mov.u32 %bar, mbar; setp.eq.u32 %first, %tid, 0; mov.u32 %count, 32;"
      "@%first mbarrier.init.shared.b64 [%bar], %count; bar.sync 0;"
      "mul.wide.u32 %a, %tid, 8; add.s64 %src, %in, %a; shl.b32 %dst, %tid, 2; mov.u32 %v, buf;"
      "add.u32 %dst, %dst, %v; cp.async.ca.shared.global [%dst], [%src], 4;"
      "cp.async.mbarrier.arrive.shared.b64 [%bar];"  // no net arrival
      "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%bar];"
      "mov.u32 %v, 0; WAIT: mbarrier.try_wait.parity.shared.b64 %p, [%bar], %v; @!%p bra WAIT;"
      "xor.b32 %v, %tid, 31; shl.b32 %v, %v, 2; mov.u32 %count, buf; add.u32 %v, %v, %count;"
      "ld.shared.u32 %v, [%v]; add.s64 %a, %out, %a; st.global.u32 [%a], %v;"
      // The phase completed exactly once: phase 1 (parity 1) is still pending.
      "mov.u32 %v, 1; mbarrier.test_wait.parity.shared.b64 %p, [%bar], %v; selp.u32 %v, 1, 0, %p;"
      "st.global.u32 [%a+4], %v;",
      std::move(input), 32, ".shared .align 8 .b8 mbar[8];\n.shared .align 4 .b8 buf[128];\n");
  ASSERT_EQ(r.out.size(), 64u);
  const std::vector<uint64_t>& o = r.out;
  for (uint64_t t = 0; t < 32; ++t) EXPECT_EQ(o[t], 1000 + (t ^ 31)) << t;  // high word 0
}

// The ISA gives cp.async.mbarrier.arrive no .shared::cluster form: it is invalid PTX, refused at
// load with the reason.
TEST(LibraryInstruction, CpAsyncMbarrierArriveOnAClusterBarrierIsInvalid) {
  SnippetResult r = runSnippet(".reg .b32 %bar;",
                               "mov.u32 %bar, mbar; cp.async.mbarrier.arrive.shared::cluster.b64 "
                               "[%bar];",
                               {}, 32, "sm_90", ".shared .align 8 .b8 mbar[8];\n");
  EXPECT_EQ(r.loadCode, CUDA_ERROR_INVALID_PTX) << r.loadMessage;
  EXPECT_NE(r.loadMessage.find("takes a .shared::cta barrier"), std::string::npos) << r.loadMessage;
}

// A kernel that launches a kernel (dynamic parallelism: nvcc -rdc with cudadevrt emits calls to
// cudaGetParameterBufferV2 and cudaLaunchDeviceV2) is refused at load, naming what it needs.
TEST(LibraryInstruction, DeviceSideLaunchIsRefusedAtLoad) {
  const char* text = R"(.version 8.0
.target sm_75
.address_size 64
.extern .func (.param .b64 func_retval0) cudaGetParameterBufferV2
(.param .b64 f, .param .align 4 .b8 grid[12], .param .align 4 .b8 block[12], .param .b32 shared);
.extern .func (.param .b32 func_retval0) cudaLaunchDeviceV2(.param .b64 buffer, .param .b64 stream);
.visible .entry child() { ret; }
.visible .entry parent()
{
  .reg .b64 %rd<3>; .reg .b32 %r<2>;
  mov.u64 %rd1, child;
  { .param .b64 p0; st.param.b64 [p0], %rd1;
    .param .align 4 .b8 p1[12]; st.param.b32 [p1], 1; st.param.b32 [p1+4], 1; st.param.b32 [p1+8], 1;
    .param .align 4 .b8 p2[12]; st.param.b32 [p2], 1; st.param.b32 [p2+4], 1; st.param.b32 [p2+8], 1;
    .param .b32 p3; st.param.b32 [p3], 0; .param .b64 rv;
    call.uni (rv), cudaGetParameterBufferV2, (p0, p1, p2, p3); ld.param.b64 %rd2, [rv]; }
  { .param .b64 q0; st.param.b64 [q0], %rd2; .param .b64 q1; st.param.b64 [q1], 0;
    .param .b32 rv2; call.uni (rv2), cudaLaunchDeviceV2, (q0, q1); ld.param.b32 %r1, [rv2]; }
  ret;
}
)";
  auto module = Module::load(text);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code, CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_NE(module.status().message.find("dynamic parallelism"), std::string::npos)
      << module.status().message;
  EXPECT_NE(module.status().message.find("cudaGetParameterBufferV2"), std::string::npos)
      << module.status().message;
}

// sm_90's packed halfword forms (__vadd2, __vmins2, ...): each half wraps on its own.
TEST(LibraryInstruction, PackedHalfwordIntegers) {
  auto r =
      runLibrarySnippet(".reg .b32 %a, %b, %d;",
                        "mov.b32 %a, 0xFFFF0001; mov.b32 %b, 0x00010002; add.u16x2 %d, %a, %b;"
                        "st.global.u32 [%out], %d;"
                        "mov.b32 %a, 0x80000005; mov.b32 %b, 0x00010007; sub.s16x2 %d, %a, %b;"
                        "st.global.u32 [%out+8], %d;"
                        "mov.b32 %b, 0x7FFFFFFF; min.s16x2 %d, %a, %b; st.global.u32 [%out+16], %d;"
                        "min.u16x2 %d, %a, %b; st.global.u32 [%out+24], %d;"
                        "max.s16x2 %d, %a, %b; st.global.u32 [%out+32], %d;"
                        "max.u16x2 %d, %a, %b; st.global.u32 [%out+40], %d;"
                        "add.s16x2 %d, %a, %b; st.global.u32 [%out+48], %d;");
  EXPECT_EQ(r.out[0], 0x00000003u);  // the high half wraps without carrying into nothing
  EXPECT_EQ(r.out[1], 0x7FFFFFFEu);
  EXPECT_EQ(r.out[2], 0x8000FFFFu);
  EXPECT_EQ(r.out[3], 0x7FFF0005u);
  EXPECT_EQ(r.out[4], 0x7FFF0005u);
  EXPECT_EQ(r.out[5], 0x8000FFFFu);
  EXPECT_EQ(r.out[6], 0xFFFF0004u);  // 0x8000 + 0x7FFF, 5 + (-1)
}

// vabsdiff4 (__vabsdiffu4, __vsads2 on sm_75): byte-wise absolute differences, signed or
// unsigned, saturated per byte, or summed into c with .add (and saturated to 32 bits).
TEST(LibraryInstruction, Vabsdiff4) {
  auto r = runLibrarySnippet(
      ".reg .b32 %a, %b, %c, %d;",
      "mov.b32 %a, 0x00FF1080; mov.b32 %b, 0xFF001001; mov.b32 %c, 0x12345678;"
      "vabsdiff4.u32.u32.u32 %d, %a, %b, %c; st.global.u32 [%out], %d;"
      "vabsdiff4.s32.s32.s32 %d, %a, %b, %c; st.global.u32 [%out+8], %d;"
      "vabsdiff4.s32.s32.s32.sat %d, %a, %b, %c; st.global.u32 [%out+16], %d;"
      "mov.b32 %c, 10; vabsdiff4.u32.u32.u32.add %d, %a, %b, %c; st.global.u32 [%out+24], %d;"
      "mov.b32 %c, 0xFFFFFF00; vabsdiff4.u32.u32.u32.sat.add %d, %a, %b, %c;"
      "st.global.u32 [%out+32], %d;"
      "mov.b32 %c, -1000; vabsdiff4.s32.s32.s32.add %d, %a, %b, %c; st.global.u32 [%out+40], %d;");
  EXPECT_EQ(r.out[0], 0xFFFF007Fu);
  EXPECT_EQ(r.out[1], 0x01010081u);
  EXPECT_EQ(r.out[2], 0x0101007Fu);
  EXPECT_EQ(r.out[3], 10u + 127 + 255 + 255);
  EXPECT_EQ(r.out[4], 0xFFFFFFFFu);
  EXPECT_EQ(static_cast<int32_t>(r.out[5]), 129 + 1 + 1 - 1000);
}

// set (cuSPARSE's half-precision kernels): a comparison written as all ones or 1.0; with an x2
// source, each half on its own; with a boolean operation, combined with a predicate first.
TEST(LibraryInstruction, SetWritesComparisonsAsNumbers) {
  auto r = runLibrarySnippet(
      ".reg .b32 %a, %b, %d; .reg .f32 %x, %y; .reg .pred %p, %q, %lo, %hi;",
      "mov.b32 %a, -1; mov.b32 %b, 2;"
      "set.lt.u32.s32 %d, %a, %b; st.global.u32 [%out], %d;"      // -1 < 2
      "set.lt.u32.u32 %d, %a, %b; st.global.u32 [%out+8], %d;"    // 0xFFFFFFFF < 2: no
      "mov.f32 %x, 0f7FC00000; mov.f32 %y, 0f3F800000;"           // NaN, 1.0
      "set.ltu.f32.f32 %d, %x, %y; st.global.u32 [%out+16], %d;"  // unordered: 1.0
      "set.lt.f32.f32 %d, %x, %y; st.global.u32 [%out+24], %d;"   // ordered: 0.0
      "mov.b32 %a, 0x3C004000; mov.b32 %b, 0x40004000;"           // (hi, lo): (1, 2), (2, 2)
      "set.eq.u32.f16x2 %d, %a, %b; st.global.u32 [%out+32], %d;"
      "set.ne.f16x2.f16x2 %d, %a, %b; st.global.u32 [%out+40], %d;"
      "setp.eq.u32 %p, %tid, 0; setp.ne.u32 %q, %tid, 0;"
      "set.eq.and.s32.s32 %d, %tid, 0, %q; st.global.u32 [%out+48], %d;"
      "set.eq.or.f32.s32 %d, %tid, 5, %p; st.global.u32 [%out+56], %d;"
      // setp on pairs with a boolean operation: each half combined with the predicate.
      "setp.eq.and.f16x2 %lo|%hi, %a, %b, %p; selp.u32 %d, 1, 0, %lo; st.global.u32 [%out+64], %d;"
      "selp.u32 %d, 1, 0, %hi; st.global.u32 [%out+72], %d;");
  EXPECT_EQ(r.out[0], 0xFFFFFFFFu);
  EXPECT_EQ(r.out[1], 0u);
  EXPECT_EQ(r.out[2], 0x3F800000u);
  EXPECT_EQ(r.out[3], 0u);
  EXPECT_EQ(r.out[4], 0x0000FFFFu);
  EXPECT_EQ(r.out[5], 0x3C000000u);
  EXPECT_EQ(r.out[6], 0u);
  EXPECT_EQ(r.out[7], 0x3F800000u);
  EXPECT_EQ(r.out[8], 1u);
  EXPECT_EQ(r.out[9], 0u);
}

TEST(LibraryInstruction, SetRefusesDestinationsTheIsaLacks) {
  SnippetResult r = runSnippet(".reg .b64 %d;", "set.eq.u64.s32 %d, %tid, 0;");
  EXPECT_EQ(r.loadCode, CUDA_ERROR_INVALID_PTX) << r.loadMessage;
}

// min/max .NaN (cuBLASLt's epilogues): a NaN operand gives NaN, where plain min/max give the
// other operand.
TEST(LibraryInstruction, MinMaxNanPropagates) {
  auto r = runLibrarySnippet(
      ".reg .f32 %x, %y, %z; .reg .b32 %a, %b, %d;",
      "mov.f32 %x, 0f7FC00000; mov.f32 %y, 0fC0000000;"  // NaN, -2
      "min.f32 %z, %x, %y; st.global.f32 [%out], %z;"
      "min.NaN.f32 %z, %x, %y; st.global.f32 [%out+8], %z;"
      "max.NaN.f32 %z, %y, %x; st.global.f32 [%out+16], %z;"
      "max.NaN.f32 %z, %y, 0f40000000; st.global.f32 [%out+24], %z;"
      "mov.b32 %a, 0x7E003C00; mov.b32 %b, 0x40004000;"  // (NaN, 1), (2, 2) as f16x2
      "max.NaN.f16x2 %d, %a, %b; st.global.u32 [%out+32], %d;"
      "max.f16x2 %d, %a, %b; st.global.u32 [%out+40], %d;");
  EXPECT_EQ(r.out[0], 0xC0000000u);
  EXPECT_EQ(r.out[1], 0x7FFFFFFFu);  // canonical NaN
  EXPECT_EQ(r.out[2], 0x7FFFFFFFu);
  EXPECT_EQ(r.out[3], 0x40000000u);
  EXPECT_EQ(r.out[4] & 0xFFFF, 0x4000u);
  const uint32_t high = static_cast<uint32_t>(r.out[4] >> 16);
  EXPECT_EQ(high & 0x7C00, 0x7C00u);  // a NaN
  EXPECT_NE(high & 0x03FF, 0u);
  EXPECT_EQ(r.out[5], 0x40004000u);
}

// cvt.pack.sat (cuBLASLt's int8 epilogues): two s32 saturated to the narrow type, a above b in
// d's low bits, c's low bits above them.
TEST(LibraryInstruction, CvtPackSaturatesAndPacks) {
  auto r =
      runLibrarySnippet(".reg .b32 %a, %b, %c, %d;",
                        "mov.b32 %a, 300; mov.b32 %b, -200; mov.b32 %c, 0xABCD;"
                        "cvt.pack.sat.s8.s32.b32 %d, %a, %b, %c; st.global.u32 [%out], %d;"
                        "cvt.pack.sat.u8.s32.b32 %d, %a, %b, %c; st.global.u32 [%out+8], %d;"
                        "mov.b32 %a, 70000; mov.b32 %b, -5;"
                        "cvt.pack.sat.u16.s32 %d, %a, %b; st.global.u32 [%out+16], %d;"
                        "cvt.pack.sat.s16.s32 %d, %a, %b; st.global.u32 [%out+24], %d;"
                        "mov.b32 %a, 20; mov.b32 %b, 3; mov.b32 %c, 1;"
                        "cvt.pack.sat.u4.s32.b32 %d, %a, %b, %c; st.global.u32 [%out+32], %d;"
                        "mov.b32 %a, -9; mov.b32 %b, 1;"
                        "cvt.pack.sat.s2.s32.b32 %d, %a, %b, %c; st.global.u32 [%out+40], %d;");
  EXPECT_EQ(r.out[0], 0xABCD7F80u);
  EXPECT_EQ(r.out[1], 0xABCDFF00u);
  EXPECT_EQ(r.out[2], 0xFFFF0000u);
  EXPECT_EQ(r.out[3], 0x7FFFFFFBu);
  EXPECT_EQ(r.out[4], 0x1F3u);
  EXPECT_EQ(r.out[5], 0x19u);  // -9 -> -2 (0b10), 1 (0b01), c = 1 above: 0b1_10_01
}

}  // namespace
}  // namespace gpupool::ptx::testing
