// Thread-block clusters on the emu (cluster.h): the cluster special registers, distributed shared
// memory (mapa, getctarank, ld/st/atom on .shared::cluster and generic addresses), barrier.cluster
// across CTAs that run at once on separate host threads, threads that exit holding no phase, a
// cluster whose CTAs all wait reported as a deadlock, and the launch checks.
#include <cuda.h>
#include <gtest/gtest.h>

#include <array>
#include <bit>

#include "host_device_memory.h"
#include "ptx_snippet.h"
#include "tensor_map.h"

namespace gpupool::ptx::testing {
namespace {

// Thread 0 of each CTA writes eight of its cluster registers to out[8 * linear CTA index].
constexpr const char* kShapeKernel = R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry shape(.param .u64 out)
{
  .reg .b32 %r<10>; .reg .b64 %o, %p; .reg .pred %first;
  mov.u32 %r1, %tid.x; setp.ne.u32 %first, %r1, 0; @%first bra DONE;
  ld.param.u64 %o, [out];
  mov.u32 %r2, %ctaid.y; mov.u32 %r3, %nctaid.x; mov.u32 %r4, %ctaid.x;
  mad.lo.u32 %r2, %r2, %r3, %r4; mul.wide.u32 %p, %r2, 32; add.u64 %o, %o, %p;
  mov.u32 %r1, %cluster_ctarank; st.global.u32 [%o], %r1;
  mov.u32 %r1, %cluster_nctarank; st.global.u32 [%o+4], %r1;
  mov.u32 %r1, %clusterid.x; st.global.u32 [%o+8], %r1;
  mov.u32 %r1, %clusterid.y; st.global.u32 [%o+12], %r1;
  mov.u32 %r1, %nclusterid.x; st.global.u32 [%o+16], %r1;
  mov.u32 %r1, %cluster_ctaid.x; st.global.u32 [%o+20], %r1;
  mov.u32 %r1, %cluster_ctaid.y; st.global.u32 [%o+24], %r1;
  mov.u32 %r1, %is_explicit_cluster; st.global.u32 [%o+28], %r1;
DONE:
  ret;
}
)";

// 64 threads per CTA, a 1D cluster of n. Each thread stores rank * 100 + tid in its slot, and after
// the cluster barrier reads the slot of the same thread in rank (rank + 1) % n through mapa,
// .shared::cluster and generic alike, with getctarank of that address; then adds 1 to bin
// tid % 4 of rank tid % n with an atomic on the other CTA's memory; after a second barrier, the
// first four threads write their own CTA's bins.
constexpr const char* kRingKernel = R"(.version 7.8
.target sm_90
.address_size 64
.shared .align 4 .b8 slots[256];
.shared .align 4 .b8 bins[16];
.visible .entry ring(.param .u64 seen, .param .u64 ranks, .param .u64 generic, .param .u64 hist)
{
  .reg .b32 %tid, %rank, %n, %next, %v, %a, %peer, %r, %g, %bin;
  .reg .b64 %o, %p, %q, %ga, %gp; .reg .pred %low;
  mov.u32 %tid, %tid.x; mov.u32 %rank, %cluster_ctarank; mov.u32 %n, %cluster_nctarank;
  mad.lo.u32 %v, %rank, 100, %tid;
  mov.u32 %a, slots; mad.lo.u32 %a, %tid, 4, %a;
  st.shared::cta.u32 [%a], %v;
  barrier.cluster.arrive.release.aligned;
  barrier.cluster.wait.acquire.aligned;
  add.u32 %next, %rank, 1; rem.u32 %next, %next, %n;
  mapa.shared::cluster.u32 %peer, %a, %next;
  ld.shared::cluster.u32 %v, [%peer];
  getctarank.shared::cluster.u32 %r, %peer;
  cvt.u64.u32 %ga, %a; cvta.shared.u64 %ga, %ga;
  mapa.u64 %gp, %ga, %next;
  ld.u32 %g, [%gp];
  mov.u32 %bin, %ctaid.x; mad.lo.u32 %bin, %bin, 64, %tid; mul.wide.u32 %p, %bin, 4;
  ld.param.u64 %o, [seen]; add.u64 %q, %o, %p; st.global.u32 [%q], %v;
  ld.param.u64 %o, [ranks]; add.u64 %q, %o, %p; st.global.u32 [%q], %r;
  ld.param.u64 %o, [generic]; add.u64 %q, %o, %p; st.global.u32 [%q], %g;
  rem.u32 %next, %tid, %n; rem.u32 %bin, %tid, 4;
  mov.u32 %a, bins; mad.lo.u32 %a, %bin, 4, %a;
  mapa.shared::cluster.u32 %peer, %a, %next;
  atom.shared::cluster.add.u32 %v, [%peer], 1;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  setp.lt.u32 %low, %tid, 4; @!%low bra DONE;
  mov.u32 %a, bins; mad.lo.u32 %a, %tid, 4, %a; ld.shared.u32 %v, [%a];
  mov.u32 %bin, %ctaid.x; mad.lo.u32 %bin, %bin, 4, %tid; mul.wide.u32 %p, %bin, 4;
  ld.param.u64 %o, [hist]; add.u64 %q, %o, %p; st.global.u32 [%q], %v;
DONE:
  ret;
}
)";

LaunchServices services(unsigned workers) {
  LaunchServices s;
  s.workerThreads = workers;
  s.stepBudget = 10'000'000;
  return s;
}

LaunchConfig clusterConfig(uint32_t gridX, uint32_t gridY, uint32_t block, uint32_t cx,
                           uint32_t cy = 1) {
  LaunchConfig c;
  c.grid[0] = gridX;
  c.grid[1] = gridY;
  c.block[0] = block;
  c.cluster[0] = cx;
  c.cluster[1] = cy;
  c.explicitCluster = cx * cy > 1;
  return c;
}

// Runs the one kernel of `text`, whose only parameter is an output buffer of `words` 32-bit words
// (zeroed), on two interpreter threads; the words, or none when the kernel did not load or run.
std::vector<uint32_t> runWithOutput(const char* text, const LaunchConfig& config, size_t words) {
  std::unique_ptr<Module> module = loadOrFail(text);
  if (!module) return {};
  HostDeviceMemory memory;
  const uint64_t out = memory.allocate(words * 4);
  ParamBlock params(module->kernels().at(0));
  params.set(0, out);
  LaunchResult r =
      launch(*module, module->kernels().at(0), config, params.data(), memory, services(2));
  EXPECT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  if (r.status.code != CUDA_SUCCESS) return {};
  return memory.download<uint32_t>(out, words);
}

TEST(Cluster, SpecialRegistersDescribeTheCtasCluster) {
  std::unique_ptr<Module> module = loadOrFail(kShapeKernel);
  ASSERT_TRUE(module);
  HostDeviceMemory memory;
  const uint64_t out = memory.allocate(8 * 4 * 8);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, out);
  // A 4x2 grid of 2x2 clusters.
  LaunchResult r =
      launch(*module, k, clusterConfig(4, 2, 32, 2, 2), params.data(), memory, services(2));
  ASSERT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  const auto words = memory.download<uint32_t>(out, 64);
  for (uint32_t y = 0; y < 2; ++y)
    for (uint32_t x = 0; x < 4; ++x) {
      const uint32_t* w = &words[8 * (y * 4 + x)];
      EXPECT_EQ(w[0], x % 2 + 2 * (y % 2)) << x << "," << y;  // rank
      EXPECT_EQ(w[1], 4u);
      EXPECT_EQ(w[2], x / 2);
      EXPECT_EQ(w[3], y / 2);
      EXPECT_EQ(w[4], 2u);
      EXPECT_EQ(w[5], x % 2);
      EXPECT_EQ(w[6], y % 2);
      EXPECT_EQ(w[7], 1u);
    }
  // Without a cluster every CTA is a cluster of one, not an explicit one.
  r = launch(*module, k, clusterConfig(4, 2, 32, 1), params.data(), memory, services(2));
  ASSERT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  const auto alone = memory.download<uint32_t>(out, 64);
  for (uint32_t b = 0; b < 8; ++b) {
    EXPECT_EQ(alone[8 * b], 0u);
    EXPECT_EQ(alone[8 * b + 1], 1u);
    EXPECT_EQ(alone[8 * b + 2], b % 4);
    EXPECT_EQ(alone[8 * b + 4], 4u);
    EXPECT_EQ(alone[8 * b + 7], 0u);
  }
}

void runRing(uint32_t ctas, uint32_t clusters, unsigned workers) {
  SCOPED_TRACE("clusters of " + std::to_string(ctas) + ", " + std::to_string(workers) +
               " worker threads");
  std::unique_ptr<Module> module = loadOrFail(kRingKernel);
  ASSERT_TRUE(module);
  HostDeviceMemory memory;
  const uint32_t blocks = ctas * clusters;
  const uint64_t seen = memory.allocate(blocks * 64 * 4), ranks = memory.allocate(blocks * 64 * 4),
                 generic = memory.allocate(blocks * 64 * 4), hist = memory.allocate(blocks * 16);
  const KernelInfo& k = module->kernels().at(0);
  ParamBlock params(k);
  params.set(0, seen).set(1, ranks).set(2, generic).set(3, hist);
  LaunchResult r = launch(*module, k, clusterConfig(blocks, 1, 64, ctas), params.data(), memory,
                          services(workers));
  ASSERT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  const auto s = memory.download<uint32_t>(seen, blocks * 64);
  const auto rk = memory.download<uint32_t>(ranks, blocks * 64);
  const auto g = memory.download<uint32_t>(generic, blocks * 64);
  const auto h = memory.download<uint32_t>(hist, blocks * 4);
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t next = (b % ctas + 1) % ctas;
    for (uint32_t t = 0; t < 64; ++t) {
      ASSERT_EQ(s[b * 64 + t], next * 100 + t) << "block " << b << " thread " << t;
      ASSERT_EQ(rk[b * 64 + t], next) << "block " << b << " thread " << t;
      ASSERT_EQ(g[b * 64 + t], next * 100 + t) << "block " << b << " thread " << t;
    }
    for (uint32_t bin = 0; bin < 4; ++bin) {
      uint32_t expected = 0;  // every CTA of the cluster adds for its threads t % ctas == rank
      for (uint32_t t = 0; t < 64; ++t) expected += t % ctas == b % ctas && t % 4 == bin ? ctas : 0;
      EXPECT_EQ(h[b * 4 + bin], expected) << "block " << b << " bin " << bin;
    }
  }
}

TEST(Cluster, CtasReadAndUpdateEachOthersSharedMemory) {
  runRing(2, 3, 1);  // one host thread asked for: a cluster still gets one per CTA
  runRing(4, 4, 2);
  runRing(8, 2, 16);
}

TEST(Cluster, SixteenCtasRunAtOnce) { runRing(16, 1, 2); }

// isspacep on generic addresses: another CTA's shared memory is .shared::cluster but not
// .shared::cta (nor .shared, which means ::cta); the CTA's own is both, however it was reached.
TEST(Cluster, IsspacepTellsTheCtasSharedMemoryFromItsPeers) {
  constexpr const char* kernel = R"(.version 7.8
.target sm_90
.address_size 64
.shared .align 4 .b8 word[4];
.visible .entry where(.param .u64 out)
{
  .reg .b32 %rank, %peer, %v; .reg .b64 %o, %own, %other, %self, %p; .reg .pred %q;
  mov.u32 %rank, %cluster_ctarank; xor.b32 %peer, %rank, 1;
  mov.u64 %own, word; cvta.shared.u64 %own, %own;
  mapa.u64 %other, %own, %peer; mapa.u64 %self, %own, %rank;
  ld.param.u64 %o, [out]; mul.wide.u32 %p, %rank, 32; add.u64 %o, %o, %p;
  isspacep.shared::cta %q, %own; selp.u32 %v, 1, 0, %q; st.global.u32 [%o], %v;
  isspacep.shared::cta %q, %other; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+4], %v;
  isspacep.shared::cta %q, %self; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+8], %v;
  isspacep.shared %q, %other; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+12], %v;
  isspacep.shared::cluster %q, %own; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+16], %v;
  isspacep.shared::cluster %q, %other; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+20], %v;
  isspacep.global %q, %other; selp.u32 %v, 1, 0, %q; st.global.u32 [%o+24], %v;
  barrier.cluster.arrive; barrier.cluster.wait;
  ret;
}
)";
  const std::vector<uint32_t> w = runWithOutput(kernel, clusterConfig(2, 1, 1, 2), 16);
  ASSERT_EQ(w.size(), 16u);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const std::array<uint32_t, 7> expected = {1, 0, 1, 0, 1, 1, 0};
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(w[rank * 8 + i], expected[i]) << "rank " << rank << " answer " << i;
  }
}

// Rank 1 exits at once; rank 0 passes the barrier twice: exited threads hold no phase.
TEST(Cluster, ExitedThreadsHoldNoPhase) {
  constexpr const char* kernel = R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry leave(.param .u64 out)
{
  .reg .b32 %rank, %tid; .reg .b64 %o; .reg .pred %gone;
  mov.u32 %rank, %cluster_ctarank; setp.ne.u32 %gone, %rank, 0; @%gone bra DONE;
  barrier.cluster.arrive; barrier.cluster.wait;
  barrier.cluster.arrive; barrier.cluster.wait;
  mov.u32 %tid, %tid.x; ld.param.u64 %o, [out]; red.global.add.u32 [%o], 1;
DONE:
  ret;
}
)";
  const std::vector<uint32_t> w = runWithOutput(kernel, clusterConfig(4, 1, 40, 2), 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], 80u);  // two rank-0 CTAs of 40 threads
}

// Warp 1 of rank 1 waits at a named barrier for warp 0, which waits at the cluster barrier for
// warp 1's arrival: no CTA can go on, and the launch fails naming the cluster barrier.
TEST(Cluster, AClusterThatCannotArriveIsADeadlock) {
  constexpr const char* kernel = R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry stuck()
{
  .reg .b32 %rank, %tid; .reg .pred %p;
  barrier.cluster.arrive; barrier.cluster.wait;
  mov.u32 %rank, %cluster_ctarank; mov.u32 %tid, %tid.x;
  setp.eq.u32 %p, %rank, 1; @!%p bra BOTH;
  setp.ge.u32 %p, %tid, 32; @!%p bra BOTH;
  bar.sync 1, 64;
BOTH:
  barrier.cluster.arrive; barrier.cluster.wait;
  ret;
}
)";
  std::unique_ptr<Module> module = loadOrFail(kernel);
  ASSERT_TRUE(module);
  HostDeviceMemory memory;
  LaunchResult r = launch(*module, module->kernels().at(0), clusterConfig(2, 1, 64, 2), nullptr,
                          memory, services(2));
  EXPECT_EQ(r.status.code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(r.status.message.find("deadlock"), std::string::npos) << r.status.message;
  EXPECT_NE(r.status.message.find("cluster barrier"), std::string::npos) << r.status.message;
}

// Without a cluster, barrier.cluster is the CTA's own threads; a wait without an arrival fails.
TEST(Cluster, BarrierWithoutAClusterIsTheCtasAndWaitNeedsAnArrival) {
  SnippetResult r = runSnippet(".reg .b32 %a;",
                               "  barrier.cluster.arrive; barrier.cluster.wait;\n"
                               "  mov.u32 %a, %cluster_nctarank; st.u32 [%out], %a;\n",
                               {}, 64);
  ASSERT_EQ(r.launch.status.code, CUDA_SUCCESS) << r.launch.status.message;
  EXPECT_EQ(static_cast<uint32_t>(r.out[0]), 1u);
  r = runSnippet("", "  barrier.cluster.wait;\n", {}, 32);
  EXPECT_EQ(r.launch.status.code, CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_NE(r.launch.status.message.find("without barrier.cluster.arrive"), std::string::npos)
      << r.launch.status.message;
}

TEST(Cluster, BadShapesAndRanksAreRefused) {
  std::unique_ptr<Module> module = loadOrFail(kRingKernel);
  ASSERT_TRUE(module);
  HostDeviceMemory memory;
  const uint64_t buffer = memory.allocate(64 * 64 * 4);
  ParamBlock params(module->kernels().at(0));
  params.set(0, buffer).set(1, buffer).set(2, buffer).set(3, buffer);
  LaunchResult r = launch(*module, module->kernels().at(0), clusterConfig(6, 1, 64, 4),
                          params.data(), memory, services(2));
  EXPECT_EQ(r.status.code, CUDA_ERROR_INVALID_VALUE);
  EXPECT_NE(r.status.message.find("whole number of clusters"), std::string::npos);
  r = launch(*module, module->kernels().at(0), clusterConfig(32, 1, 64, 32), params.data(), memory,
             services(2));
  EXPECT_EQ(r.status.code, CUDA_ERROR_INVALID_VALUE);
  // mapa to a rank outside the cluster.
  SnippetResult bad = runSnippet(".reg .b32 %a, %b;",
                                 "  mov.u32 %a, 0; mapa.shared::cluster.u32 %b, %a, 1;\n", {}, 1);
  EXPECT_EQ(bad.launch.status.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(bad.launch.status.message.find("outside the cluster"), std::string::npos)
      << bad.launch.status.message;
}

TEST(Cluster, KernelDirectivesAreRead) {
  std::unique_ptr<Module> module = loadOrFail(R"(.version 7.8
.target sm_90
.address_size 64
.visible .entry fixed() .reqnctapercluster 2, 1, 1 { ret; }
.visible .entry bounded() .explicitcluster .maxclusterrank 4 { ret; }
.visible .entry plain() { ret; }
)");
  ASSERT_TRUE(module);
  const KernelInfo* fixed = module->findKernel("fixed");
  const KernelInfo* bounded = module->findKernel("bounded");
  const KernelInfo* plain = module->findKernel("plain");
  ASSERT_TRUE(fixed && bounded && plain);
  EXPECT_EQ(fixed->requiredCluster[0], 2u);
  EXPECT_EQ(fixed->requiredCluster[1], 1u);
  EXPECT_TRUE(fixed->explicitCluster);
  EXPECT_EQ(bounded->requiredCluster[0], 0u);
  EXPECT_TRUE(bounded->explicitCluster);
  EXPECT_EQ(bounded->maxClusterRank, 4u);
  EXPECT_FALSE(plain->explicitCluster);
}

// The end of the multicast kernels: each CTA copies the 16 words at %s in its shared memory to
// out + 64 * %ctaid.x, then waits for the cluster before leaving (so no copy outlives a CTA).
#define COPY_OUT_AND_LEAVE                                                 \
  "  mov.u32 %i, %ctaid.x; mul.wide.u32 %p, %i, 64; add.u64 %o, %o, %p;\n" \
  "  mov.u32 %i, 0;\n"                                                     \
  "L: ld.shared.u32 %v, [%s]; st.global.u32 [%o], %v;\n"                   \
  "  add.u32 %s, %s, 4; add.u64 %o, %o, 4; add.u32 %i, %i, 1;\n"           \
  "  setp.lt.u32 %done, %i, 16; @%done bra L;\n"                           \
  "  barrier.cluster.arrive; barrier.cluster.wait;\n"                      \
  "  ret;\n"                                                               \
  "}\n"

// cp.async.bulk .multicast::cluster: rank 0 copies 64 bytes from global memory into the shared
// buffer of every CTA in the mask, and completes the transaction on each one's mbarrier; a CTA
// outside the mask keeps its buffer (zeros).
TEST(Cluster, MulticastBulkCopyReachesEveryCtaInTheMask) {
  const std::string kernel = R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 16 .b8 buf[64];
.shared .align 8 .b8 mbar[8];
.visible .entry multicast(.param .u64 src, .param .u64 out, .param .u32 mask)
{
  .reg .b32 %rank, %m, %bit, %s, %b, %v, %i; .reg .b16 %m16; .reg .b64 %src, %o, %t, %p;
  .reg .pred %in, %leader, %done;
  ld.param.u64 %src, [src]; ld.param.u64 %o, [out]; ld.param.u32 %m, [mask];
  cvt.u16.u32 %m16, %m;
  mov.u32 %rank, %cluster_ctarank;
  shr.u32 %bit, %m, %rank; and.b32 %bit, %bit, 1; setp.eq.u32 %in, %bit, 1;
  mov.u32 %s, buf; mov.u32 %b, mbar;
  mbarrier.init.shared::cta.b64 [%b], 1;
  @%in mbarrier.arrive.expect_tx.shared::cta.b64 %t, [%b], 64;
  barrier.cluster.arrive; barrier.cluster.wait;
  setp.eq.u32 %leader, %rank, 0;
  @%leader cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%s], [%src], 64, [%b], %m16;
  @!%in bra OUT;
W: mbarrier.try_wait.parity.shared::cta.b64 %done, [%b], 0; @!%done bra W;
OUT:
)" COPY_OUT_AND_LEAVE;
  std::unique_ptr<Module> module = loadOrFail(kernel);
  ASSERT_TRUE(module);
  HostDeviceMemory memory;
  std::vector<uint32_t> words(16);
  for (uint32_t i = 0; i < 16; ++i) words[i] = 0xc0de0000u + i;
  const uint64_t src = memory.upload(words);
  const uint64_t out = memory.allocate(8 * 64);
  ParamBlock params(module->kernels().at(0));
  const uint32_t mask = 0b1011;  // ranks 0, 1 and 3 of each cluster of four
  params.set(0, src).set(1, out).set(2, mask);
  LaunchResult r = launch(*module, module->kernels().at(0), clusterConfig(8, 1, 1, 4),
                          params.data(), memory, services(2));
  ASSERT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  const auto got = memory.download<uint32_t>(out, 8 * 16);
  for (uint32_t b = 0; b < 8; ++b)
    for (uint32_t i = 0; i < 16; ++i)
      EXPECT_EQ(got[b * 16 + i], (mask >> (b % 4)) & 1 ? words[i] : 0u)
          << "block " << b << " word " << i;
  // A rank outside the cluster in the mask: an illegal address.
  params.set(2, uint32_t{0b10001});
  r = launch(*module, module->kernels().at(0), clusterConfig(8, 1, 1, 4), params.data(), memory,
             services(2));
  EXPECT_EQ(r.status.code, CUDA_ERROR_ILLEGAL_ADDRESS) << r.status.message;
}

// A tensor load that rank 0 multicasts into both CTAs of each cluster of two (4 blocks, mask 3),
// completing both mbarriers: `setup` sets the registers `load` (the cp.async.bulk.tensor
// instruction) names besides %s (the box), %map, %b (the mbarrier) and %m (the mask). Returns the
// 16 words each block's box then held, block by block.
std::vector<uint32_t> multicastTensorLoad(const std::string& setup, const std::string& load,
                                          const std::array<uint8_t, kTensorMapBytes>& map,
                                          HostDeviceMemory& memory) {
  const std::string kernel = R"(.version 8.0
.target sm_90
.address_size 64
.shared .align 128 .b8 box[64];
.shared .align 8 .b8 mbar[8];
.visible .entry tensorMulticast(.param .align 64 .b8 map[128], .param .u64 out)
{
  .reg .b32 %rank, %s, %b, %v, %i, %x, %w, %n; .reg .b16 %m, %off; .reg .b64 %map, %o, %t, %p;
  .reg .pred %leader, %done;
  mov.b64 %map, map; cvta.param.u64 %map, %map; ld.param.u64 %o, [out];
  mov.u32 %rank, %cluster_ctarank; mov.u32 %s, box; mov.u32 %b, mbar; mov.u16 %m, 3;
  )" + setup + R"(
  mbarrier.init.shared::cta.b64 [%b], 1;
  mbarrier.arrive.expect_tx.shared::cta.b64 %t, [%b], 64;
  barrier.cluster.arrive; barrier.cluster.wait;
  setp.eq.u32 %leader, %rank, 0;
  @%leader )" + load + R"(
W: mbarrier.try_wait.parity.shared::cta.b64 %done, [%b], 0; @!%done bra W;
)" COPY_OUT_AND_LEAVE;
  std::unique_ptr<Module> module = loadOrFail(kernel);
  if (!module) return {};
  const uint64_t out = memory.allocate(4 * 64);
  ParamBlock params(module->kernels().at(0));
  params.set(0, map).set(1, out);
  LaunchResult r = launch(*module, module->kernels().at(0), clusterConfig(4, 1, 1, 2),
                          params.data(), memory, services(2));
  EXPECT_EQ(r.status.code, CUDA_SUCCESS) << r.status.message;
  return memory.download<uint32_t>(out, 4 * 16);
}

// .tile: a box of 16 floats starting at element 4 of a 1D tensor of 24.
TEST(Cluster, MulticastTensorLoadReachesEveryCtaInTheMask) {
  HostDeviceMemory memory;
  std::vector<float> tensor(24);
  for (uint32_t i = 0; i < 24; ++i) tensor[i] = 0.5f * static_cast<float>(i);
  TensorMapLayout layout;
  layout.rank = 1;
  layout.dataType = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  layout.globalAddress = memory.upload(tensor);
  layout.globalDim[0] = 24;
  layout.boxDim[0] = 16;
  layout.elementStrides[0] = 1;
  std::array<uint8_t, kTensorMapBytes> map{};
  ASSERT_TRUE(encodeTiledTensorMap(layout, map.data()).ok());
  const auto got = multicastTensorLoad(
      "mov.u32 %x, 4;",
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%s], [%map, {%x}], [%b], %m;",
      map, memory);
  ASSERT_EQ(got.size(), 64u);
  for (uint32_t b = 0; b < 4; ++b)
    for (uint32_t i = 0; i < 16; ++i)
      EXPECT_EQ(std::bit_cast<float>(got[b * 16 + i]), i + 4 < 24 ? tensor[i + 4] : 0.0f)
          << "block " << b << " " << i;
}

// .im2col: an NWC tensor [1, 4, 4] (u32), the box W in [-1, 4), four pixels of four channels from
// w = -1 (one filled, then pixels 0 to 2).
TEST(Cluster, MulticastIm2colLoadReachesEveryCtaInTheMask) {
  HostDeviceMemory memory;
  std::vector<uint32_t> tensor(16);
  for (uint32_t i = 0; i < 16; ++i) tensor[i] = 100 * (i / 4 + 1) + i % 4;
  TensorMapLayout layout;
  layout.mode = kTensorMapIm2col;
  layout.rank = 3;
  layout.dataType = CU_TENSOR_MAP_DATA_TYPE_UINT32;
  layout.globalAddress = memory.upload(tensor);
  layout.globalDim[0] = 4;
  layout.globalDim[1] = 4;
  layout.globalDim[2] = 1;
  layout.globalStrides[0] = 16;
  layout.globalStrides[1] = 64;
  for (uint32_t i = 0; i < 3; ++i) layout.elementStrides[i] = 1;
  layout.pixelBoxLower[0] = -1;
  layout.channelsPerPixel = 4;
  layout.pixelsPerColumn = 4;
  std::array<uint8_t, kTensorMapBytes> map{};
  ASSERT_TRUE(encodeIm2colTensorMap(layout, map.data()).ok());
  const auto got = multicastTensorLoad(
      "mov.u32 %x, 0; mov.u32 %w, -1; mov.u32 %n, 0; mov.u16 %off, 0;",
      "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%s], [%map, {%x, %w, %n}], [%b], {%off}, %m;",
      map, memory);
  ASSERT_EQ(got.size(), 64u);
  for (uint32_t b = 0; b < 4; ++b)
    for (uint32_t i = 0; i < 16; ++i)
      EXPECT_EQ(got[b * 16 + i], i < 4 ? 0u : tensor[i - 4]) << "block " << b << " " << i;
}

}  // namespace
}  // namespace gpupool::ptx::testing
