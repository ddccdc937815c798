// A client for the pool tests, run on gpupool's libcuda.so.1 against a configured gpupoold.
//   pool_client init            prints "CUINIT <CUresult>" (the token check happens here)
//   pool_client spin MS ITERS BATCH
//                               prints READY after a warm-up kernel, waits for a line on stdin,
//                               then keeps BATCH kernels of ITERS loop steps queued for MS
//                               milliseconds, prints WINDOW_END, lets the queued kernels finish
//                               and prints "LAUNCHES <n>", the kernels completed inside the
//                               window, and "LAUNCHED <n>", all kernels it launched
//   pool_client try MIB         allocates MIB MiB; prints "ALLOC <CUresult>" and
//                               "MEMINFO <free> <total>"
//   pool_client hold MIB        allocates MIB MiB, prints "HELD <CUresult>" and READY, and keeps
//                               it until stdin closes
//   pool_client try-async MIB, hold-async MIB
//                               the same with cudaMallocAsync (the device's default pool)
//   pool_client recycle-async MIB
//                               allocates and frees MIB MiB from the pool four times, then prints
//                               "ALLOC <CUresult>" of a cudaMalloc of MIB MiB
//   pool_client graph-alloc MIB
//                               adds a memory alloc node of MIB MiB to a graph ("ALLOC
//                               <CUresult>"), tries a cudaMalloc of 32 MiB ("PLAIN <CUresult>"),
//                               destroys the graph and trims graph memory, and tries again
//                               ("TRIMMED <CUresult>")
//   pool_client vmm MIB         cuMemCreate of MIB MiB (a multiple of 2), printing "CREATE
//                               <CUresult>"; maps it and releases its handle, then prints
//                               "WHILE_MAPPED <CUresult>" of a second cuMemCreate of MIB MiB, and
//                               after cuMemUnmap "AFTER_UNMAP <CUresult>" of a third
//   pool_client array MIB       cuArray3DCreate of a MIB MiB array (1024 x MIB x 256 bytes),
//                               printing "CREATE <CUresult>"; while it lives "SECOND
//                               <CUresult>" of a cudaMalloc of MIB MiB, and after cuArrayDestroy
//                               "AFTER_DESTROY <CUresult>" of another
//   pool_client graph NODES LAUNCHES
//                               captures a graph of NODES kernels, instantiates it and prints
//                               READY; on a line from stdin launches it LAUNCHES times, waits for
//                               the stream and prints DONE; on a second line checks the kernels'
//                               count and prints "COUNT <n>"
//   pool_client managed MIB PAGES
//                               cudaMallocManaged of MIB MiB, a warm-up kernel, READY; on a line
//                               from stdin the host writes one int on each of PAGES pages spread
//                               over the buffer, a kernel adds 1 to each, cudaDeviceSynchronize,
//                               and it prints DONE; then "CHECK <1 if the host read them back>"
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

__global__ void spin(int iterations, unsigned* sink) {
  unsigned x = threadIdx.x;
  for (int i = 0; i < iterations; ++i) x = x * 1103515245u + 12345u;
  if (x == 0xdeadbeefu) *sink = x;  // keeps the loop from being optimized away
}

__global__ void bump(unsigned* counter) { atomicAdd(counter, 1u); }

__global__ void bumpPages(int* data, size_t pages, size_t stride) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < pages) data[i * stride] += 1;
}

static int fail(const char* what, cudaError_t e) {
  std::printf("ERROR %s %s\n", what, cudaGetErrorString(e));
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (mode == "init") {
    std::printf("CUINIT %d\n", static_cast<int>(cuInit(0)));
    return 0;
  }
  if (mode == "graph" && argc == 4) {
    int nodes = std::atoi(argv[2]), launches = std::atoi(argv[3]);
    unsigned* counter = nullptr;
    cudaStream_t stream;
    if (cudaError_t e = cudaMalloc(&counter, sizeof(unsigned)); e != cudaSuccess)
      return fail("malloc", e);
    if (cudaError_t e = cudaMemset(counter, 0, sizeof(unsigned)); e != cudaSuccess)
      return fail("memset", e);
    if (cudaError_t e = cudaStreamCreate(&stream); e != cudaSuccess) return fail("stream", e);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    if (cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
        e != cudaSuccess)
      return fail("capture", e);
    for (int i = 0; i < nodes; ++i) bump<<<1, 1, 0, stream>>>(counter);
    if (cudaError_t e = cudaStreamEndCapture(stream, &graph); e != cudaSuccess)
      return fail("end capture", e);
    if (cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess)
      return fail("instantiate", e);
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return fail("sync", e);
    std::printf("READY\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
    for (int i = 0; i < launches; ++i) {
      if (cudaError_t e = cudaGraphLaunch(exec, stream); e != cudaSuccess) return fail("launch", e);
    }
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return fail("sync", e);
    std::printf("DONE\n");
    std::fflush(stdout);
    std::getline(std::cin, line);
    unsigned count = 0;
    if (cudaError_t e = cudaMemcpy(&count, counter, sizeof count, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return fail("read", e);
    std::printf("COUNT %u\n", count);
    return 0;
  }
  if (mode == "managed" && argc == 4) {
    size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    size_t pages = std::strtoull(argv[3], nullptr, 10);
    size_t stride = bytes / 4096 / (pages ? pages : 1) * (4096 / sizeof(int));
    int* data = nullptr;
    if (cudaError_t e = cudaMallocManaged(&data, bytes); e != cudaSuccess)
      return fail("managed", e);
    bumpPages<<<1, 1>>>(data, 0, 0);  // loads the module before the measured part
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("warm-up", e);
    std::printf("READY\n");
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
    for (size_t i = 0; i < pages; ++i) data[i * stride] = static_cast<int>(i);
    bumpPages<<<static_cast<unsigned>((pages + 255) / 256), 256>>>(data, pages, stride);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("sync", e);
    std::printf("DONE\n");
    std::fflush(stdout);
    bool ok = true;
    for (size_t i = 0; i < pages; ++i) ok = ok && data[i * stride] == static_cast<int>(i) + 1;
    std::printf("CHECK %d\n", ok ? 1 : 0);
    return 0;
  }
  if (mode == "spin" && argc == 5) {
    int ms = std::atoi(argv[2]), iterations = std::atoi(argv[3]), batch = std::atoi(argv[4]);
    unsigned* sink = nullptr;
    if (cudaError_t e = cudaMalloc(&sink, sizeof(unsigned)); e != cudaSuccess)
      return fail("malloc", e);
    spin<<<1, 32>>>(iterations, sink);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("warm-up", e);
    std::printf("READY\n");
    std::fflush(stdout);
    std::string go;
    std::getline(std::cin, go);
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    // A ring of BATCH kernels, each followed by an event: a kernel is counted when its event has
    // completed, and a new one is queued at once, so BATCH - 1 kernels wait at the server at all
    // times (the scheduler, not the client's round trips, decides the share) and every kernel
    // that finished inside the window counts, not whole batches.
    std::vector<cudaEvent_t> done(batch);
    for (auto& e : done) {
      if (cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming); r != cudaSuccess)
        return fail("event", r);
    }
    for (int i = 0; i < batch; ++i) {
      spin<<<1, 32>>>(iterations, sink);
      cudaEventRecord(done[i]);
    }
    long launches = 0;
    for (int slot = 0; std::chrono::steady_clock::now() < end; slot = (slot + 1) % batch) {
      if (cudaError_t e = cudaEventSynchronize(done[slot]); e != cudaSuccess)
        return fail("spin", e);
      if (std::chrono::steady_clock::now() >= end) break;
      ++launches;
      spin<<<1, 32>>>(iterations, sink);
      cudaEventRecord(done[slot]);
    }
    // The window's end, before the queued kernels drain: a test reading the meter now sees the
    // share the scheduler gave while both tenants had work, not the tail one of them runs alone.
    std::printf("WINDOW_END\n");
    std::fflush(stdout);
    // The kernels still queued finish too, so the server has metered every one on exit.
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("drain", e);
    std::printf("LAUNCHES %ld\n", launches);
    std::printf("LAUNCHED %ld\n", 1 + batch + launches);  // with the warm-up and the last ring

    return 0;
  }
  // try-async, hold-async: the same from the device's default memory pool (cudaMallocAsync).
  bool fromPool = mode == "try-async" || mode == "hold-async";
  bool holds = mode == "hold" || mode == "hold-async";
  if ((mode == "try" || holds || fromPool) && argc == 3) {
    size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    void* p = nullptr;
    cudaError_t e = fromPool ? cudaMallocAsync(&p, bytes, 0) : cudaMalloc(&p, bytes);
    std::printf("%s %d\n", holds ? "HELD" : "ALLOC", static_cast<int>(e));
    size_t freeBytes = 0, totalBytes = 0;
    cudaMemGetInfo(&freeBytes, &totalBytes);
    std::printf("MEMINFO %zu %zu\n", freeBytes, totalBytes);
    if (holds) {
      std::printf("READY\n");
      std::fflush(stdout);
      std::string line;
      while (std::getline(std::cin, line)) {
      }
    }
    return 0;
  }
  // graph-alloc N MiB: graph memory is pool memory, charged while a node holds it and while the
  // graph pool keeps it, until trimmed.
  if (mode == "graph-alloc" && argc == 3) {
    cudaGraph_t graph;
    if (cudaError_t e = cudaGraphCreate(&graph, 0); e != cudaSuccess) return fail("graph", e);
    cudaMemAllocNodeParams params;
    std::memset(&params, 0, sizeof params);
    params.poolProps.allocType = cudaMemAllocationTypePinned;
    params.poolProps.location.type = cudaMemLocationTypeDevice;
    params.poolProps.location.id = 0;
    params.bytesize = std::strtoull(argv[2], nullptr, 10) << 20;
    cudaGraphNode_t node;
    std::printf("ALLOC %d\n",
                static_cast<int>(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &params)));
    void* p = nullptr;
    cudaError_t plain = cudaMalloc(&p, 32 << 20);
    std::printf("PLAIN %d\n", static_cast<int>(plain));
    if (plain == cudaSuccess) cudaFree(p);
    if (cudaError_t e = cudaGraphDestroy(graph); e != cudaSuccess) return fail("destroy", e);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return fail("sync", e);
    if (cudaError_t e = cudaDeviceGraphMemTrim(0); e != cudaSuccess) return fail("trim", e);
    std::printf("TRIMMED %d\n", static_cast<int>(cudaMalloc(&p, 32 << 20)));
    return 0;
  }
  // recycle-async N MiB: allocates and frees N MiB from the default pool (in stream order) four
  // times, then tries a plain cudaMalloc of N MiB: a freed pool block is no longer charged.
  if (mode == "recycle-async" && argc == 3) {
    size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    for (int round = 0; round < 4; ++round) {
      void* p = nullptr;
      if (cudaError_t e = cudaMallocAsync(&p, bytes, 0); e != cudaSuccess) return fail("pool", e);
      if (cudaError_t e = cudaFreeAsync(p, 0); e != cudaSuccess) return fail("free", e);
      if (cudaError_t e = cudaStreamSynchronize(0); e != cudaSuccess) return fail("sync", e);
    }
    void* p = nullptr;
    std::printf("ALLOC %d\n", static_cast<int>(cudaMalloc(&p, bytes)));
    return 0;
  }
  // vmm MIB: physical memory is charged at cuMemCreate and given back only once it is released
  // and unmapped.
  if (mode == "vmm" && argc == 3) {
    size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
    if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return fail("init", e);
    CUdevice device = 0;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemGenericAllocationHandle first = 0, second = 0, third = 0;
    CUresult created = cuMemCreate(&first, bytes, &prop, 0);
    std::printf("CREATE %d\n", static_cast<int>(created));
    if (created != CUDA_SUCCESS) return 0;
    CUdeviceptr range = 0;
    if (cuMemAddressReserve(&range, bytes, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(range, bytes, 0, first, 0) != CUDA_SUCCESS ||
        cuMemRelease(first) != CUDA_SUCCESS) {
      std::printf("ERROR map\n");
      return 1;
    }
    CUresult whileMapped = cuMemCreate(&second, bytes, &prop, 0);
    std::printf("WHILE_MAPPED %d\n", static_cast<int>(whileMapped));
    if (whileMapped == CUDA_SUCCESS) cuMemRelease(second);
    if (cuMemUnmap(range, bytes) != CUDA_SUCCESS) {
      std::printf("ERROR unmap\n");
      return 1;
    }
    CUresult afterUnmap = cuMemCreate(&third, bytes, &prop, 0);
    std::printf("AFTER_UNMAP %d\n", static_cast<int>(afterUnmap));
    if (afterUnmap == CUDA_SUCCESS) cuMemRelease(third);
    cuMemAddressFree(range, bytes);
    return 0;
  }
  // array MIB: an array's memory is charged from creation to destruction.
  if (mode == "array" && argc == 3) {
    size_t mib = std::strtoull(argv[2], nullptr, 10);
    if (cudaError_t e = cudaFree(nullptr); e != cudaSuccess) return fail("init", e);
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = 1024;  // x 4 channels x 1 byte: 4 KiB rows
    desc.Height = mib;
    desc.Depth = 256;  // 1 MiB per row of slices
    desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    desc.NumChannels = 4;
    CUarray array = nullptr;
    CUresult created = cuArray3DCreate(&array, &desc);
    std::printf("CREATE %d\n", static_cast<int>(created));
    if (created != CUDA_SUCCESS) return 0;
    void* p = nullptr;
    cudaError_t second = cudaMalloc(&p, mib << 20);
    std::printf("SECOND %d\n", static_cast<int>(second));
    if (second == cudaSuccess) cudaFree(p);
    if (cuArrayDestroy(array) != CUDA_SUCCESS) {
      std::printf("ERROR destroy\n");
      return 1;
    }
    cudaError_t after = cudaMalloc(&p, mib << 20);
    std::printf("AFTER_DESTROY %d\n", static_cast<int>(after));
    if (after == cudaSuccess) cudaFree(p);
    return 0;
  }
  return 2;
}
