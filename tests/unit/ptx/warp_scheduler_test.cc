// The warp scheduler's shortcuts (block_runner.h): a group that stays together without its lanes'
// pcs being written, a split whose halves rejoin without a scan, and block barriers counted as
// lanes arrive. Each test runs a kernel whose results (values, and activemask where a warp must
// have reconverged) differ if a shortcut moves a lane to the wrong place or releases a barrier
// too early or never.
#include <gtest/gtest.h>

#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

SnippetResult run(const std::string& decls, const std::string& body, uint32_t threads,
                  const std::string& moduleScope = "") {
  return runPassingSnippet(decls, body, {}, threads, moduleScope);
}

// if (lane < 16) { if (lane < 8) x = 1 else x = 2 } else x = 3: the inner halves rejoin before
// the outer else runs, and the whole warp after it.
TEST(WarpScheduler, NestedBranchesRejoinAtEachJoin) {
  SnippetResult r = run(".reg .b32 %x, %m, %j, %k; .reg .pred %p; .reg .b64 %a, %q;",
                        "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
                        "setp.ge.u32 %p, %tid, 16; @%p bra OUTER_ELSE;"
                        "setp.ge.u32 %p, %tid, 8; @%p bra INNER_ELSE;"
                        "mov.u32 %x, 1; activemask.b32 %m; bra INNER_JOIN;"
                        "INNER_ELSE: mov.u32 %x, 2; activemask.b32 %m;"
                        "INNER_JOIN: activemask.b32 %j; bra OUTER_JOIN;"
                        "OUTER_ELSE: mov.u32 %x, 3; activemask.b32 %m; mov.u32 %j, 0;"
                        "OUTER_JOIN: activemask.b32 %k;"
                        "st.global.v2.u32 [%q], {%x, %m}; st.global.v2.u32 [%q+256], {%j, %k};",
                        32);
  for (uint64_t l = 0; l < 32; ++l) {
    const uint64_t x = l < 8 ? 1 : l < 16 ? 2 : 3;
    const uint64_t inner = l < 8 ? 0xff : l < 16 ? 0xff00 : 0xffff0000;
    EXPECT_EQ(r.out[l], inner << 32 | x) << l;
    EXPECT_EQ(r.out[32 + l], uint64_t{0xffffffff} << 32 | (l < 16 ? 0xffff : 0)) << l;
  }
}

// An if without an else, three times in a row on different lanes, with work after each join
// that reads what the branch wrote: the lanes that skipped a branch wait for the others.
TEST(WarpScheduler, SkippedBranchesRejoinTheLanesThatTookThem) {
  SnippetResult r = run(".reg .b32 %x, %t, %k, %all; .reg .pred %p; .reg .b64 %a, %q;",
                        "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
                        "mov.u32 %x, 0; mov.u32 %all, 0xffffffff;"
                        "and.b32 %t, %tid, 1; setp.ne.u32 %p, %t, 0; @%p bra J1;"
                        "add.u32 %x, %x, 1;"
                        "J1: activemask.b32 %k; and.b32 %all, %all, %k;"
                        "and.b32 %t, %tid, 6; setp.ne.u32 %p, %t, 2; @%p bra J2;"
                        "add.u32 %x, %x, 10;"
                        "J2: activemask.b32 %k; and.b32 %all, %all, %k;"
                        "setp.lt.u32 %p, %tid, 31; @%p bra J3;"
                        "add.u32 %x, %x, 100;"
                        "J3: activemask.b32 %k; and.b32 %all, %all, %k;"
                        "st.global.v2.u32 [%q], {%x, %all};",
                        32);
  for (uint64_t l = 0; l < 32; ++l) {
    const uint64_t x = (l % 2 == 0 ? 1 : 0) + ((l & 6) == 2 ? 10 : 0) + (l == 31 ? 100 : 0);
    EXPECT_EQ(r.out[l], uint64_t{0xffffffff} << 32 | x) << l;
  }
}

// A loop whose trip count differs by lane: at the backward branch the lanes that loop again run
// first, and those that left wait at the exit for them.
TEST(WarpScheduler, DivergentLoopLanesWaitForTheLastTrip) {
  SnippetResult r = run(".reg .b32 %i, %n, %s, %k; .reg .pred %p; .reg .b64 %a, %q;",
                        "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
                        "and.b32 %n, %tid, 7; add.u32 %n, %n, 1; mov.u32 %i, 0; mov.u32 %s, 0;"
                        "LOOP: add.u32 %i, %i, 1; add.u32 %s, %s, %i;"
                        "setp.lt.u32 %p, %i, %n; @%p bra LOOP;"
                        "activemask.b32 %k; st.global.v2.u32 [%q], {%s, %k};",
                        32);
  for (uint64_t l = 0; l < 32; ++l) {
    const uint64_t n = (l & 7) + 1;
    EXPECT_EQ(r.out[l], uint64_t{0xffffffff} << 32 | n * (n + 1) / 2) << l;
  }
}

// Even and odd lanes of both warps wait at two different barrier.sync instructions for barrier
// 0, then at a barrier named by a register with a count of every thread; each thread then reads
// what its neighbour (in the other warp half or the other warp) wrote before each barrier.
TEST(WarpScheduler, BarrierWaitsFromTwoSitesAndRegisterOperands) {
  SnippetResult r =
      run(".reg .b32 %t, %n, %v, %w, %id, %count, %at, %from; .reg .pred %p; .reg .b64 %a, %q;",
          "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
          "mov.u32 %t, buf; shl.b32 %at, %tid, 2; add.u32 %at, %at, %t;"
          "add.u32 %n, %tid, 1; rem.u32 %n, %n, 64; shl.b32 %from, %n, 2; add.u32 %from, %from, %t;"
          "mul.lo.u32 %v, %tid, 3; st.shared.u32 [%at], %v;"
          "and.b32 %t, %tid, 1; setp.ne.u32 %p, %t, 0; @%p bra ODD;"
          "barrier.sync 0; bra JOINED;"
          "ODD: barrier.sync 0;"
          "JOINED: ld.shared.u32 %v, [%from]; mov.u32 %id, 1; mov.u32 %count, 64;"
          "bar.sync %id, %count;"
          "mul.lo.u32 %w, %tid, 5; st.shared.u32 [%at], %w; bar.sync %id, %count;"
          "ld.shared.u32 %w, [%from]; st.global.v2.u32 [%q], {%v, %w};",
          64, ".shared .align 4 .b8 buf[256];\n");
  for (uint64_t t = 0; t < 64; ++t) {
    const uint64_t n = (t + 1) % 64;
    EXPECT_EQ(r.out[t], (n * 5) << 32 | n * 3) << t;
  }
}

// Threads that exited no longer count: a barrier with no count releases the 40 that remain, in
// a warp half of whose lanes have gone.
TEST(WarpScheduler, BarrierReleasesWhenTheOthersHaveExited) {
  SnippetResult r = run(".reg .b32 %t, %v, %at, %from; .reg .pred %p; .reg .b64 %a, %q;",
                        "setp.ge.u32 %p, %tid, 40; @%p exit;"
                        "mul.wide.u32 %a, %tid, 8; add.s64 %q, %out, %a;"
                        "mov.u32 %t, buf; shl.b32 %at, %tid, 2; add.u32 %at, %at, %t;"
                        "sub.u32 %from, 39, %tid; shl.b32 %from, %from, 2; add.u32 %from, "
                        "%from, %t;"
                        "add.u32 %v, %tid, 1000; st.shared.u32 [%at], %v; bar.sync 0;"
                        "ld.shared.u32 %v, [%from]; st.global.u32 [%q], %v;",
                        64, ".shared .align 4 .b8 buf[256];\n");
  for (uint64_t t = 0; t < 40; ++t) EXPECT_EQ(r.out[t], 1000 + 39 - t) << t;
  for (uint64_t t = 40; t < 64; ++t) EXPECT_EQ(r.out[t], 0u) << t;
}

}  // namespace
}  // namespace gpupool::ptx::testing
