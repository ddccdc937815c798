#include "tools/bench_managed.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gpupool::tools {
namespace {

constexpr size_t kManagedPage = 4096;

// Adds 1 to the first word of each of the first `pages` pages at `base`.
constexpr char kTouchPagesPtx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry gpupool_bench_touch_pages(.param .u64 base, .param .u64 pages)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [base];\n"
    "  ld.param.u64 %rd2, [pages];\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "  cvt.u64.u32 %rd3, %r4;\n"
    "  setp.ge.u64 %p, %rd3, %rd2;\n"
    "  @%p bra DONE;\n"
    "  shl.b64 %rd4, %rd3, 12;\n"
    "  add.s64 %rd5, %rd1, %rd4;\n"
    "  ld.global.u32 %r5, [%rd5];\n"
    "  add.s32 %r5, %r5, 1;\n"
    "  st.global.u32 [%rd5], %r5;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

size_t managedRounds(bool quick) { return quick ? 2 : 5; }
// 256 MiB, as the issue asks; 32 MiB with --quick, which must stay short (GPU checks run it).
size_t managedBufferBytes(bool quick) { return size_t{quick ? 32u : 256u} << 20; }

void launchTouch(const BenchDriver& d, CUfunction kernel, CUdeviceptr base, uint64_t pages) {
  void* params[] = {&base, &pages};
  unsigned blocks = static_cast<unsigned>((pages + 255) / 256);
  check(d, d.cuLaunchKernel(kernel, blocks, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
        "cuLaunchKernel");
}

// The host's side of one round: a word written on each touched page, then checked after.
void writePages(uint8_t* host, size_t pages, uint32_t value) {
  for (size_t p = 0; p < pages; ++p) std::memcpy(host + p * kManagedPage, &value, sizeof value);
}
void checkPages(const uint8_t* host, size_t pages, uint32_t value) {
  for (size_t p = 0; p < pages; ++p) {
    uint32_t got = 0;
    std::memcpy(&got, host + p * kManagedPage, sizeof got);
    if (got != value)
      throw std::runtime_error("managed bench: page " + std::to_string(p) + " is " +
                               std::to_string(got) + ", expected " + std::to_string(value));
  }
}

}  // namespace

json measureManaged(const BenchDriver& d, const BenchContext&, bool quick) {
  const size_t bufferBytes = managedBufferBytes(quick);
  CUmodule module = nullptr;
  check(d, d.cuModuleLoadData(&module, kTouchPagesPtx), "cuModuleLoadData");
  CUfunction touch = nullptr;
  check(d, d.cuModuleGetFunction(&touch, module, "gpupool_bench_touch_pages"),
        "cuModuleGetFunction");
  CUdeviceptr managed = 0, device = 0;
  check(d, d.cuMemAllocManaged(&managed, bufferBytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  check(d, d.cuMemAlloc(&device, bufferBytes), "cuMemAlloc");
  std::vector<uint8_t> host(bufferBytes);
  auto* mirror = reinterpret_cast<uint8_t*>(managed);
  json points = json::array();
  uint32_t value = 1;
  for (int percent : kManagedTouchedPercents) {
    const size_t pages = bufferBytes / kManagedPage * percent / 100;
    progress("managed memory against explicit copies, " + std::to_string(percent) + "% touched");
    Stats viaManaged = measure(1, managedRounds(quick), [&] {
      writePages(mirror, pages, value);
      launchTouch(d, touch, managed, pages);
      check(d, d.cuCtxSynchronize(), "cuCtxSynchronize");
      checkPages(mirror, pages, value + 1);
      value += 2;
    });
    Stats viaCopies = measure(1, managedRounds(quick), [&] {
      writePages(host.data(), pages, value);
      check(d, d.cuMemcpyHtoD(device, host.data(), bufferBytes), "cuMemcpyHtoD");
      launchTouch(d, touch, device, pages);
      check(d, d.cuMemcpyDtoH(host.data(), device, bufferBytes), "cuMemcpyDtoH");
      checkPages(host.data(), pages, value + 1);
      value += 2;
    });
    points.push_back({{"touched_percent", percent},
                      {"managed_ms", viaManaged.median * 1e3},
                      {"explicit_copies_ms", viaCopies.median * 1e3}});
  }
  check(d, d.cuMemFree(managed), "cuMemFree");
  check(d, d.cuMemFree(device), "cuMemFree");
  return {{"buffer_bytes", bufferBytes}, {"points", points}};
}

void printManaged(const json& managed) {
  const std::string title = std::to_string(managed["buffer_bytes"].get<size_t>() >> 20) +
                            " MiB buffer, a round (ms, median)";
  std::printf("\n  %-34s %12s %14s %10s\n", title.c_str(), "managed", "copies", "ratio");
  for (const json& point : managed["points"]) {
    const double viaManaged = point["managed_ms"].get<double>();
    const double viaCopies = point["explicit_copies_ms"].get<double>();
    const std::string name =
        "kernel touching " + std::to_string(point["touched_percent"].get<int>()) + "% of pages";
    std::printf("  %-34s %12.1f %14.1f %10.2f\n", name.c_str(), viaManaged, viaCopies,
                viaCopies / viaManaged);
  }
}

}  // namespace gpupool::tools
