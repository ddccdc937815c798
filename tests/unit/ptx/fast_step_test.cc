// The fast steps (server/backends/emu/ptx/fast_steps.h) against the generic path: one kernel runs
// every specialized form on edge-case inputs, in full warps, under guards that leave some lanes
// out, and after a divergent branch; its results with the fast steps must equal, bit for bit,
// its results with LaunchServices::genericPathOnly. The test also checks that those forms did
// get fast steps, so it cannot pass by comparing the generic path with itself.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "host_device_memory.h"
#include "ir.h"
#include "ptx_snippet.h"

namespace gpupool::ptx::testing {
namespace {

constexpr uint32_t kThreads = 96;  // three warps; the last one full, guards make partial masks

// Each form writes one register; the harness stores it to the thread's next output slot.
struct Form {
  const char* text;  // the instruction, with %d as its destination
  const char* dest;  // the destination register's type: "b32", "b64", "f32" or "pred"
};

// Sources: %a, %b, %c (b64, from the input), %a32/%b32/%c32 (their low words), %u32 (64 in
// every lane), %v32 (a power of two that differs between lanes), %s32 (a shift
// amount from 0 to 100), %fa/%fb/%fc (f32, the low words of a/b/c).
const std::vector<Form>& forms() {
  static const std::vector<Form> all = {
      {"add.u32 %d, %a32, %b32", "b32"},
      {"add.s32 %d, %a32, 7", "b32"},
      {"sub.u32 %d, %a32, %b32", "b32"},
      {"sub.s32 %d, %a32, -5", "b32"},
      {"mul.lo.u32 %d, %a32, %b32", "b32"},
      {"mul.lo.s32 %d, %a32, -3", "b32"},
      {"and.b32 %d, %a32, %b32", "b32"},
      {"or.b32 %d, %a32, 0xf0f0", "b32"},
      {"xor.b32 %d, %a32, %b32", "b32"},
      {"shl.b32 %d, %a32, %s32", "b32"},
      {"shl.b32 %d, %a32, 5", "b32"},
      {"shr.u32 %d, %a32, %s32", "b32"},
      {"shr.s32 %d, %a32, %s32", "b32"},
      {"shr.s32 %d, %a32, 33", "b32"},
      {"shr.b32 %d, %a32, 3", "b32"},
      {"min.s32 %d, %a32, %b32", "b32"},
      {"min.u32 %d, %a32, %b32", "b32"},
      {"max.s32 %d, %a32, -100", "b32"},
      {"max.u32 %d, %a32, %b32", "b32"},
      {"mad.lo.s32 %d, %a32, %b32, %c32", "b32"},
      {"mad.lo.u32 %d, %a32, 3, %c32", "b32"},
      {"mad.lo.s32 %d, %a32, %b32, 9", "b32"},
      {"div.u32 %d, %a32, %b32", "b32"},
      {"div.s32 %d, %a32, %b32", "b32"},
      {"rem.u32 %d, %a32, 7", "b32"},
      {"rem.s32 %d, %a32, %b32", "b32"},
      {"div.u32 %d, %a32, 16", "b32"},
      {"rem.u32 %d, %a32, 32", "b32"},
      {"rem.u32 %d, %a32, 1", "b32"},
      {"div.u32 %d, %a32, %u32", "b32"},
      {"rem.u32 %d, %a32, %u32", "b32"},
      {"rem.u32 %d, %a32, %v32", "b32"},
      {"div.u32 %d, %a32, %v32", "b32"},
      {"rem.s32 %d, %a32, %u32", "b32"},
      {"mov.u32 %d, %tid.x", "b32"},
      {"mov.u32 %d, %ntid.x", "b32"},
      {"mov.u32 %d, %ctaid.x", "b32"},
      {"mov.u32 %d, %laneid", "b32"},
      {"mov.u32 %d, %warpid", "b32"},
      {"mov.b32 %d, %a32", "b32"},
      {"mov.u32 %d, 0x12345678", "b32"},
      {"add.u64 %d, %a, %b", "b64"},
      {"add.s64 %d, %a, -1", "b64"},
      {"sub.s64 %d, %a, %b", "b64"},
      {"mul.lo.u64 %d, %a, %b", "b64"},
      {"mul.lo.s64 %d, %a, 1000", "b64"},
      {"and.b64 %d, %a, %b", "b64"},
      {"or.b64 %d, %a, %c", "b64"},
      {"xor.b64 %d, %a, 0x7fff0000ffff", "b64"},
      {"shl.b64 %d, %a, %s32", "b64"},
      {"shr.u64 %d, %a, %s32", "b64"},
      {"shr.s64 %d, %a, %s32", "b64"},
      {"shr.s64 %d, %a, 64", "b64"},
      {"min.s64 %d, %a, %b", "b64"},
      {"max.u64 %d, %a, %b", "b64"},
      {"max.s64 %d, %a, 5", "b64"},
      {"mad.lo.u64 %d, %a, %b, %c", "b64"},
      {"mad.lo.s64 %d, %a, 7, %c", "b64"},
      {"mul.wide.u32 %d, %a32, %b32", "b64"},
      {"mul.wide.s32 %d, %a32, %b32", "b64"},
      {"mul.wide.s32 %d, %a32, -3", "b64"},
      {"mul.wide.u32 %d, %a32, 4", "b64"},
      {"div.u64 %d, %a, %b", "b64"},
      {"div.s64 %d, %a, -1", "b64"},
      {"rem.s64 %d, %a, %b", "b64"},
      {"rem.u64 %d, %a, 4096", "b64"},
      {"div.u64 %d, %a, 0x8000000000000000", "b64"},
      {"cvta.to.global.u64 %d, %a", "b64"},
      {"cvta.shared.u64 %d, %a", "b64"},
      {"cvta.to.shared.u64 %d, %a", "b64"},
      {"cvta.local.u64 %d, %a", "b64"},
      {"cvta.to.local.u64 %d, %a", "b64"},
      {"mov.b64 %d, %a", "b64"},
      {"add.f32 %d, %fa, %fb", "f32"},
      {"add.rn.f32 %d, %fa, 0f3F800000", "f32"},
      {"sub.f32 %d, %fa, %fb", "f32"},
      {"sub.rn.f32 %d, 0f40000000, %fb", "f32"},
      {"mul.f32 %d, %fa, %fb", "f32"},
      {"mul.rn.f32 %d, %fa, 0f7F7FFFFF", "f32"},
      {"fma.rn.f32 %d, %fa, %fb, %fc", "f32"},
      {"fma.rn.f32 %d, %fa, 0f3F000000, %fc", "f32"},
      {"fma.rn.f32 %d, %fa, %fb, 0f80000000", "f32"},
      {"mad.rn.f32 %d, %fa, %fb, %fc", "f32"},
      {"mov.f32 %d, %fb", "f32"},
      {"mov.f32 %d, 0f7FC00000", "f32"},
      {"setp.eq.u32 %d, %a32, %b32", "pred"},
      {"setp.ne.s32 %d, %a32, 0", "pred"},
      {"setp.lt.s32 %d, %a32, %b32", "pred"},
      {"setp.lo.u32 %d, %a32, %b32", "pred"},
      {"setp.le.u64 %d, %a, %b", "pred"},
      {"setp.gt.s64 %d, %a, %b", "pred"},
      {"setp.ge.u32 %d, %a32, 100", "pred"},
      {"setp.hi.u32 %d, %a32, %b32", "pred"},
      {"setp.hs.u64 %d, %a, %c", "pred"},
      {"setp.ls.u32 %d, %a32, %b32", "pred"},
      {"setp.ge.s64 %d, %a, -7", "pred"},
      {"setp.lt.f32 %d, %fa, %fb", "pred"},
      {"setp.eq.f32 %d, %fa, %fb", "pred"},
      {"setp.ge.f32 %d, %fa, 0f00000000", "pred"},
      {"setp.ne.f32 %d, %fa, %fb", "pred"},
      {"setp.gt.f32 %d, %fa, %fc", "pred"},
      {"setp.le.f32 %d, %fa, %fa", "pred"},
  };
  return all;
}

// Edge cases first, then a mix: thread t takes values from these (its own a, b, c).
std::vector<uint64_t> inputs() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<uint64_t> special = {
      0,
      1,
      ~0ull,
      0x80000000ull,
      0x7fffffffull,
      0x8000000000000000ull,
      0x7fffffffffffffffull,
      0xffffffff00000000ull,
      std::bit_cast<uint32_t>(nan),
      std::bit_cast<uint32_t>(inf),
      std::bit_cast<uint32_t>(-inf),
      std::bit_cast<uint32_t>(-0.0f),
      std::bit_cast<uint32_t>(1e-45f),  // the smallest denormal
      std::bit_cast<uint32_t>(3.0e38f),
      std::bit_cast<uint32_t>(-2.5f),
      std::bit_cast<uint32_t>(0.1f),
      31,
      32,
      63,
      64,
      100,
  };
  std::vector<uint64_t> values;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (uint32_t i = 0; i < kThreads * 3; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values.push_back(i < special.size() * 2 ? special[(i * 7) % special.size()] : state);
  }
  return values;
}

// The kernel: each thread reads its a, b, c; runs every form (into a slot of its own), then the
// same forms under a guard true for two lanes in three, then again inside a branch taken by the
// lanes whose a is odd; then loads and stores of every width through shared, global and generic
// addresses. Slots hold 8 bytes; results narrower than that are stored zero-extended.
std::string kernelText(size_t* slotsPerThread) {
  std::ostringstream body;
  size_t slot = 0;
  auto store = [&](const std::string& reg, const char* type) {
    const std::string at = "[%q+" + std::to_string(8 * slot++) + "]";
    if (std::string(type) == "pred") {
      body << "selp.u32 %t32, 1, 0, " << reg << ";\nst.global.u32 " << at << ", %t32;\n";
    } else if (std::string(type) == "b64") {
      body << "st.global.u64 " << at << ", " << reg << ";\n";
    } else {
      body << "st.global.b32 " << at << ", " << reg << ";\n";
    }
  };
  auto destOf = [](const Form& f) {
    const std::string type = f.dest;
    return type == "b32" ? "%d32" : type == "b64" ? "%d64" : type == "f32" ? "%df" : "%dp";
  };
  auto runAll = [&](const std::string& guard) {
    for (const Form& f : forms()) {
      std::string text = f.text;
      const std::string d = destOf(f);
      text.replace(text.find("%d"), 2, d);
      // A guarded form leaves the lanes it skips with the destination's marker.
      if (!guard.empty()) {
        const std::string type = f.dest;
        if (type == "pred")
          body << "setp.ne.u32 %dp, %tid, %tid;\n";
        else if (type == "b64")
          body << "mov.b64 %d64, 0x5555;\n";
        else if (type == "f32")
          body << "mov.b32 %df, 0x5555;\n";
        else
          body << "mov.b32 %d32, 0x5555;\n";
      }
      body << guard << text << ";\n";
      store(d, f.dest);
    }
  };
  body << "mul.wide.u32 %t64, %tid, 24;\nadd.s64 %p, %in, %t64;\n"
          "ld.global.u64 %a, [%p];\nld.global.u64 %b, [%p+8];\nld.global.u64 %c, [%p+16];\n"
          "cvt.u32.u64 %a32, %a;\ncvt.u32.u64 %b32, %b;\ncvt.u32.u64 %c32, %c;\n"
          "rem.u32 %s32, %b32, 101;\n"
          "mov.u32 %u32, 64;\nand.b32 %t32, %tid, 7;\nmov.u32 %v32, 1;\nshl.b32 %v32, %v32, %t32;\n"
          "mov.b32 %fa, %a32;\nmov.b32 %fb, %b32;\nmov.b32 %fc, %c32;\n"
          "mul.wide.u32 %t64, %tid, SLOTBYTES;\nadd.s64 %q, %out, %t64;\n";
  runAll("");
  body << "rem.u32 %t32, %tid, 3;\nsetp.ne.u32 %g, %t32, 0;\n";
  runAll("@%g ");
  body << "and.b32 %t32, %a32, 1;\nsetp.eq.u32 %g, %t32, 0;\n@%g bra SKIP;\n";
  runAll("");
  body << "SKIP:\n";
  // Memory: each thread stores its a at its shared slot, then every width is loaded from its
  // neighbour's, signed and unsigned, through shared, generic and global addresses.
  body << "mov.u32 %t32, sbuf;\nshl.b32 %sa, %tid, 3;\nadd.u32 %sa, %sa, %t32;\n"
          "st.shared.u64 [%sa], %a;\nst.shared.v2.u32 [%sa+"
       << 8 * kThreads
       << "], {%b32, %c32};\nbar.sync 0;\n"
          "add.u32 %t32, %tid, 1;\nrem.u32 %t32, %t32, "
       << kThreads << ";\nshl.b32 %t32, %t32, 3;\nmov.u32 %sn, sbuf;\nadd.u32 %sn, %sn, %t32;\n";
  const char* loads[][2] = {{"u8", "b32"},  {"s8", "b32"},  {"u16", "b32"}, {"s16", "b32"},
                            {"u32", "b32"}, {"s32", "b32"}, {"u64", "b64"}, {"b64", "b64"}};
  for (const auto& load : loads) {
    const std::string type = load[0];
    const bool wide = std::string(load[1]) == "b64";
    const std::string reg = wide ? "%d64" : "%d32";
    for (int offset : {0, 1, 2, 4}) {
      const unsigned bytes = type == "u8" || type == "s8" ? 1
                             : type[1] == '1'             ? 2
                             : type[1] == '3'             ? 4
                                                          : 8;
      if (offset % bytes) continue;
      body << "ld.shared." << type << " " << reg << ", [%sn+" << offset << "];\n";
      store(reg, load[1]);
    }
  }
  body << "ld.shared.v2.u32 {%d32, %t32}, [%sn+" << 8 * kThreads << "];\n";
  store("%d32", "b32");
  store("%t32", "b32");
  body << "cvta.shared.u64 %gp, sbuf;\ncvt.u64.u32 %t64, %t32;\n"
          "ld.s16 %d32, [%gp+2];\n";
  store("%d32", "b32");
  // Global: stores of every width into the thread's scratch area, then loads back, v4 included.
  body << "add.s64 %sc, %q, " << 8 * 1000
       << ";\n"
          "st.global.u64 [%sc], %a;\nst.global.u8 [%sc+1], %b32;\nst.global.u16 [%sc+4], %c32;\n"
          "st.global.v4.u32 [%sc+16], {%a32, %b32, %c32, %tid};\nst.global.v2.u64 [%sc+32], {%b, "
          "%c};\n"
          "st.u32 [%sc+48], %c32;\n"
          "ld.global.u64 %d64, [%sc];\n";
  store("%d64", "b64");
  body << "ld.global.v4.u32 {%d32, %t32, %sa, %sn}, [%sc+16];\n";
  store("%d32", "b32");
  store("%t32", "b32");
  store("%sa", "b32");
  store("%sn", "b32");
  body << "ld.global.v2.u64 {%d64, %t64}, [%sc+32];\n";
  store("%d64", "b64");
  store("%t64", "b64");
  body << "ld.s32 %d32, [%sc+48];\n";
  store("%d32", "b32");
  body << "ld.global.s8 %d32, [%sc+1];\n";
  store("%d32", "b32");
  *slotsPerThread = 1000 + 8;  // results, then the scratch area
  EXPECT_LT(slot, 1000u);

  std::string text = ".version 9.0\n.target sm_90\n.address_size 64\n.shared .align 8 .b8 sbuf[" +
                     std::to_string(8 * kThreads * 2) +
                     "];\n"
                     ".visible .entry fast(.param .u64 out, .param .u64 in)\n{\n"
                     ".reg .b64 %out, %in, %a, %b, %c, %p, %q, %t64, %d64, %gp, %sc;\n"
                     ".reg .b32 %tid, %a32, %b32, %c32, %s32, %u32, %v32, %t32, %d32, %sa, %sn;\n"
                     ".reg .f32 %fa, %fb, %fc, %df;\n.reg .pred %dp, %g;\n"
                     "ld.param.u64 %out, [out];\nld.param.u64 %in, [in];\nmov.u32 %tid, %tid.x;\n" +
                     body.str() + "ret;\n}\n";
  const std::string marker = "SLOTBYTES";
  text.replace(text.find(marker), marker.size(), std::to_string(8 * *slotsPerThread));
  return text;
}

std::vector<uint64_t> runKernel(const Module& module, size_t slotsPerThread, bool genericOnly) {
  HostDeviceMemory memory;
  uint64_t in = memory.upload(inputs());
  uint64_t out = memory.allocate(8 * slotsPerThread * kThreads);
  const KernelInfo& k = module.kernels().at(0);
  ParamBlock params(k);
  params.set(0, out).set(1, in);
  LaunchConfig config;
  config.block[0] = kThreads;
  LaunchServices services;
  services.workerThreads = 1;
  services.genericPathOnly = genericOnly;
  LaunchResult result = launch(module, k, config, params.data(), memory, services);
  EXPECT_EQ(result.status.code, CUDA_SUCCESS) << result.status.message;
  return memory.download<uint64_t>(out, slotsPerThread * kThreads);
}

TEST(FastSteps, AgreeWithTheGenericPathBitForBit) {
  size_t slots = 0;
  auto module = loadOrFail(kernelText(&slots));
  ASSERT_TRUE(module);

  // Every listed form and every shared or global load and store must have a fast step (moves of a
  // symbol or a special register are not such forms); otherwise this test would not test it.
  const ModuleImage& image = module->image();
  ASSERT_EQ(image.fastSteps.size(), image.code.size());
  std::set<std::string> slow;
  for (size_t pc = 0; pc < image.code.size(); ++pc) {
    const std::string& text = image.instructionText[pc];
    const bool listed = std::any_of(forms().begin(), forms().end(), [&](const Form& f) {
      return text.rfind(std::string(f.text).substr(0, std::string(f.text).find(' ')), 0) == 0;
    });
    const bool memory = text.rfind("ld.shared", 0) == 0 || text.rfind("st.shared", 0) == 0 ||
                        text.rfind("ld.global", 0) == 0 || text.rfind("st.global", 0) == 0;
    const bool symbolic = text.find("sbuf") != std::string::npos;
    if ((listed || memory) && !symbolic && !image.fastSteps[pc]) slow.insert(text);
  }
  EXPECT_TRUE(slow.empty()) << "no fast step for: " << *slow.begin();

  std::vector<uint64_t> fast = runKernel(*module, slots, false);
  std::vector<uint64_t> generic = runKernel(*module, slots, true);
  ASSERT_EQ(fast.size(), generic.size());
  size_t differences = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    if (fast[i] == generic[i]) continue;
    if (++differences <= 10)
      ADD_FAILURE() << "thread " << i / slots << " slot " << i % slots << ": fast 0x" << std::hex
                    << fast[i] << ", generic 0x" << generic[i];
  }
  EXPECT_EQ(differences, 0u);
  // And the kernel computed something: the results are not all alike.
  std::set<uint64_t> distinct(generic.begin(), generic.end());
  EXPECT_GT(distinct.size(), 1000u);
}

// A form with a flag, an unusual rounding or a NaN-aware comparison keeps the generic path.
TEST(FastSteps, UnusualFormsKeepTheGenericPath) {
  auto module = loadOrFail(
      snippetModule(".reg .b32 %x, %y; .reg .f32 %f, %g; .reg .pred %p;",
                    "add.sat.s32 %x, %tid, 1; add.rz.f32 %f, %g, %g; add.ftz.f32 %f, %g, %g;"
                    "mul.hi.u32 %y, %x, %x; setp.ltu.f32 %p, %f, %g; add.cc.u32 %x, %x, 1;"
                    "setp.eq.and.u32 %p, %x, 1, %p;"));
  ASSERT_TRUE(module);
  const ModuleImage& image = module->image();
  for (size_t pc = 0; pc < image.code.size(); ++pc) {
    const std::string& text = image.instructionText[pc];
    if (text.find(".sat") != std::string::npos || text.find(".rz") != std::string::npos ||
        text.find(".ftz") != std::string::npos || text.find(".hi") != std::string::npos ||
        text.find(".ltu") != std::string::npos || text.find(".cc") != std::string::npos ||
        text.find(".and") != std::string::npos) {
      EXPECT_FALSE(image.fastSteps[pc]) << text;
    }
  }
}

}  // namespace
}  // namespace gpupool::ptx::testing

namespace gpupool::ptx::testing {
namespace {

// A warp's loads and stores go at once where every lane's address is good; where one is not, the
// launch fails naming that lane, as lane by lane.
TEST(FastSteps, AWholeWarpAccessStillNamesTheLaneThatFaults) {
  const std::string shared =
      "mov.u32 %t, sbuf; shl.b32 %o, %tid, 2; setp.eq.u32 %p, %tid, 7; @%p add.u32 %o, %o, 4096;"
      "add.u32 %t, %t, %o; ld.shared.u32 %v, [%t];";
  SnippetResult s = runSnippet(".reg .b32 %t, %o, %v; .reg .pred %p;", shared, {}, 32, "sm_90",
                               ".shared .align 4 .b8 sbuf[128];");
  EXPECT_EQ(s.launch.status.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(s.launch.status.message.find("lane 7 "), std::string::npos) << s.launch.status.message;

  // Global: lane 5 one element past the 64 input slots.
  const std::string global =
      "mul.wide.u32 %a, %tid, 8; setp.eq.u32 %p, %tid, 5; @%p add.s64 %a, %a, 480;"
      "add.s64 %a, %in, %a; st.global.u64 [%a], %a;";
  SnippetResult g = runSnippet(".reg .b64 %a; .reg .pred %p;", global, {}, 32);
  EXPECT_EQ(g.launch.status.code, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_NE(g.launch.status.message.find("lane 5 "), std::string::npos) << g.launch.status.message;

  // And with every address good, the same accesses succeed.
  SnippetResult ok =
      runSnippet(".reg .b64 %a;",
                 "mul.wide.u32 %a, %tid, 8; add.s64 %a, %in, %a;"
                 "st.global.u64 [%a], %a; ld.global.u64 %a, [%a];"
                 "mul.wide.u32 %a, %tid, 8; add.s64 %a, %out, %a; st.global.u64 [%a], %a;",
                 {}, 32);
  EXPECT_EQ(ok.launch.status.code, CUDA_SUCCESS) << ok.launch.status.message;
  for (int l = 0; l < 32; ++l) EXPECT_EQ(ok.in[l], ok.out[l] - ok.out[0] + ok.in[0]) << l;
}

}  // namespace
}  // namespace gpupool::ptx::testing
