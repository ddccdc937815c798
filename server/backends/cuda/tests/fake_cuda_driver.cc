// A stand-in CUDA driver for the cuda backend tests: device memory is host memory, a "module" is
// any image that starts with "fake-module", and its one kernel `store(int* out, int value,
// long long pad)` writes `value` to *out. It checks what a real driver checks that matters here:
// every call that needs a context has one current, and memory is touched only with the context
// that allocated it current. It exports versioned names only (no cuGetProcAddress), so the
// backend's dlsym fallback is what resolves it, and it has no events, so those calls must come
// back as CUDA_ERROR_NOT_SUPPORTED. Graphs hold kernel, memset, copy, empty and memory operation
// nodes and run them at cuGraphLaunch in the order they were added (which the dependencies must
// respect).
//
// `store` of the value 0xA55E27 fails with CUDA_ERROR_ASSERT, as a kernel's device-side assert
// would (tests of the backend's fatal fault containment).
//
// Counters (fakeLive*) let tests see that a destroyed context released everything;
// fakeGraphLaunches, fakeGraphEdges and fakeGraphWaitsMet what reached the driver as a graph;
// fakeLastLaunchCluster and fakeLastLaunchCooperative the last cuLaunchKernelEx's attributes.
#include <cuda.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct FakeContext {
  CUdevice device;
};

std::mutex mutex;
std::set<FakeContext*> contexts;
std::map<CUdeviceptr, std::pair<size_t, FakeContext*>> allocations;
std::set<void*> streams;
std::set<void*> modules;
thread_local FakeContext* current = nullptr;
alignas(16) unsigned char moduleGlobal[64];  // the global "counter" of every fake module
// The __managed__ variables of every fake module, packed as NVIDIA's driver packs them: "values"
// (5000 bytes, pages 0-1) and "count" (4 bytes, page 1, after values), then "other" (page 2).
alignas(4096) unsigned char managedArea[3 * 4096];
constexpr size_t kManagedValuesBytes = 5000, kManagedOtherOffset = 8192 + 16;
int functionToken;                          // CUfunction of `store` is its address
constexpr int kFakeAssertValue = 0xA55E27;  // `store` of this value fails a device assert

// A graph's node: what it does, kept from its cuGraphAdd*Node call.
struct FakeGraphNode {
  enum class Kind { kEmpty, kStore, kMemset, kCopy, kMemOps } kind = Kind::kEmpty;
  CUdeviceptr out = 0;  // kStore: the kernel's arguments
  int value = 0;
  CUDA_MEMSET_NODE_PARAMS memset{};
  CUDA_MEMCPY3D copy{};
  std::vector<CUstreamBatchMemOpParams> memOps;  // writes, barriers and met waits
  bool cooperative = false;
};
struct FakeGraph {
  std::vector<FakeGraphNode*> nodes;  // owned, in the order added
  ~FakeGraph() {
    for (FakeGraphNode* node : nodes) delete node;
  }
};
std::set<FakeGraph*> graphs;  // graphs and executable graphs (copies of one)
int graphLaunches = 0;
int graphWaitsMet = 0;      // wait operations graph launches found met
int lastLaunchCluster = 1;  // blocks per cluster of the last cuLaunchKernelEx
bool lastLaunchCooperative = false;
int graphEdges = 0;  // dependencies given to cuGraphAdd*Node, over all graphs

bool hasContext() { return current != nullptr && contexts.count(current) != 0; }

// True when [p, p+n) lies in one allocation made while the current context was current.
bool owned(CUdeviceptr p, size_t n) {
  if (p >= reinterpret_cast<CUdeviceptr>(moduleGlobal) &&
      p + n <= reinterpret_cast<CUdeviceptr>(moduleGlobal) + sizeof moduleGlobal) {
    return true;
  }
  if (p >= reinterpret_cast<CUdeviceptr>(managedArea) &&
      p + n <= reinterpret_cast<CUdeviceptr>(managedArea) + sizeof managedArea) {
    return true;
  }
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return false;
  --it;
  return it->second.second == current && p + n <= it->first + it->second.first;
}

}  // namespace

FAKE_EXPORT int fakeLiveContexts() { return static_cast<int>(contexts.size()); }
FAKE_EXPORT int fakeLiveAllocations() { return static_cast<int>(allocations.size()); }
FAKE_EXPORT int fakeLiveStreams() { return static_cast<int>(streams.size()); }
FAKE_EXPORT int fakeLiveModules() { return static_cast<int>(modules.size()); }
FAKE_EXPORT int fakeLiveGraphs() { return static_cast<int>(graphs.size()); }
FAKE_EXPORT int fakeGraphLaunches() { return graphLaunches; }
FAKE_EXPORT int fakeGraphEdges() { return graphEdges; }
FAKE_EXPORT int fakeGraphWaitsMet() { return graphWaitsMet; }
FAKE_EXPORT int fakeLastLaunchCluster() { return lastLaunchCluster; }
FAKE_EXPORT int fakeLastLaunchCooperative() { return lastLaunchCooperative ? 1 : 0; }

// The ordinal of the device whose context made the allocation at `pointer`, or -1.
FAKE_EXPORT int fakeAllocationDevice(CUdeviceptr pointer) {
  auto it = allocations.find(pointer);
  return it == allocations.end() ? -1 : it->second.second->device - 100;
}

FAKE_EXPORT CUresult cuInit(unsigned) { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  *version = 12080;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_ERROR_INVALID_VALUE:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT:
      *name = "CUDA_ERROR_INVALID_CONTEXT";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND:
      *name = "CUDA_ERROR_NOT_FOUND";
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  *count = 2;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal > 1) return CUDA_ERROR_INVALID_DEVICE;
  *device = 100 + ordinal;  // handles differ from ordinals, as they may in a real driver
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  std::string text = "Fake Device " + std::to_string(device - 100);
  std::strncpy(name, text.c_str(), static_cast<size_t>(length));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {  // cuDeviceGetUuid_v2
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(device - 100 + i);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute,
                                          CUdevice device) {
  if (attribute > 50) return CUDA_ERROR_INVALID_VALUE;  // "unknown" to this fake
  *value = attribute * 10 + (device - 100);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {  // cuDeviceTotalMem_v2
  *bytes = (1ull << 30) + static_cast<size_t>(device - 100);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxCreate(CUcontext* context, CUctxCreateParams* params, unsigned,
                                 CUdevice device) {  // cuCtxCreate_v4
  if (params != nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(mutex);
  current = new FakeContext{device};
  contexts.insert(current);
  *context = reinterpret_cast<CUcontext>(current);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxDestroy(CUcontext context) {  // cuCtxDestroy_v2
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeContext*>(context);
  if (contexts.erase(fake) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  std::erase_if(allocations, [&](const auto& entry) { return entry.second.second == fake; });
  if (current == fake) current = nullptr;
  delete fake;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeContext*>(context);
  if (fake != nullptr && contexts.count(fake) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  current = fake;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize() {
  return hasContext() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {  // cuMemAlloc_v2
  std::lock_guard lock(mutex);
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  *pointer = reinterpret_cast<CUdeviceptr>(new unsigned char[bytes]());
  allocations[*pointer] = {bytes, current};
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemFree(CUdeviceptr pointer) {  // cuMemFree_v2
  std::lock_guard lock(mutex);
  auto it = allocations.find(pointer);
  if (!hasContext() || it == allocations.end() || it->second.second != current) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  delete[] reinterpret_cast<unsigned char*>(pointer);
  allocations.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  std::lock_guard lock(mutex);
  if (!hasContext() || !owned(dst, bytes)) return CUDA_ERROR_INVALID_CONTEXT;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes,
                                       CUstream stream) {
  if (stream != nullptr && streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return cuMemcpyHtoD(dst, src, bytes);
}
FAKE_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  std::lock_guard lock(mutex);
  if (!hasContext() || !owned(src, bytes)) return CUDA_ERROR_INVALID_CONTEXT;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  std::lock_guard lock(mutex);
  if (!hasContext() || !owned(src, bytes) || !owned(dst, bytes)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemcpy2D(const CUDA_MEMCPY2D* copy) {  // cuMemcpy2D_v2
  std::lock_guard lock(mutex);
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  size_t span = (copy->Height - 1) * copy->srcPitch + copy->WidthInBytes;
  if (copy->srcMemoryType == CU_MEMORYTYPE_DEVICE && !owned(copy->srcDevice, span)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  span = (copy->Height - 1) * copy->dstPitch + copy->WidthInBytes;
  if (copy->dstMemoryType == CU_MEMORYTYPE_DEVICE && !owned(copy->dstDevice, span)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  for (size_t row = 0; row < copy->Height; ++row) {
    const auto* src = static_cast<const unsigned char*>(
        copy->srcMemoryType == CU_MEMORYTYPE_HOST ? copy->srcHost
                                                  : reinterpret_cast<void*>(copy->srcDevice));
    auto* dst = static_cast<unsigned char*>(copy->dstMemoryType == CU_MEMORYTYPE_HOST
                                                ? copy->dstHost
                                                : reinterpret_cast<void*>(copy->dstDevice));
    std::memcpy(dst + row * copy->dstPitch, src + row * copy->srcPitch, copy->WidthInBytes);
  }
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemsetD32(CUdeviceptr dst, unsigned value, size_t count) {
  std::lock_guard lock(mutex);
  if (!hasContext() || !owned(dst, count * 4)) return CUDA_ERROR_INVALID_CONTEXT;
  for (size_t i = 0; i < count; ++i) std::memcpy(reinterpret_cast<char*>(dst) + 4 * i, &value, 4);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemsetD2D8(CUdeviceptr dst, size_t pitch, unsigned char value, size_t width,
                                  size_t height) {
  std::lock_guard lock(mutex);
  if (!hasContext() || !owned(dst, (height - 1) * pitch + width)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  for (size_t row = 0; row < height; ++row) {
    std::memset(reinterpret_cast<char*>(dst) + row * pitch, value, width);
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned, int) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  *stream = reinterpret_cast<CUstream>(new char);
  streams.insert(*stream);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamDestroy(CUstream stream) {  // cuStreamDestroy_v2
  if (streams.erase(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char*>(stream);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  if (stream != nullptr && streams.count(stream) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (std::strncmp(static_cast<const char*>(image), "fake-module", 11) != 0) {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *module = reinterpret_cast<CUmodule>(new char);
  modules.insert(*module);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  if (modules.erase(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  delete reinterpret_cast<char*>(module);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (modules.count(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (std::strcmp(name, "store") != 0) return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(&functionToken);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuModuleGetGlobal(CUdeviceptr* pointer, size_t* bytes, CUmodule module,
                                       const char* name) {  // cuModuleGetGlobal_v2
  if (modules.count(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
  const auto managed = reinterpret_cast<CUdeviceptr>(managedArea);
  if (std::strcmp(name, "values") == 0) {
    *pointer = managed;
    *bytes = kManagedValuesBytes;
    return CUDA_SUCCESS;
  }
  if (std::strcmp(name, "count") == 0) {
    *pointer = managed + kManagedValuesBytes;
    *bytes = 4;
    return CUDA_SUCCESS;
  }
  if (std::strcmp(name, "other") == 0) {
    *pointer = managed + kManagedOtherOffset;
    *bytes = 4;
    return CUDA_SUCCESS;
  }
  if (std::strcmp(name, "counter") != 0) return CUDA_ERROR_NOT_FOUND;
  *pointer = reinterpret_cast<CUdeviceptr>(moduleGlobal);
  *bytes = sizeof moduleGlobal;
  return CUDA_SUCCESS;
}
// Only IS_MANAGED, true for the managed variables.
FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                           CUdeviceptr p) {
  if (attribute != CU_POINTER_ATTRIBUTE_IS_MANAGED) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<unsigned*>(data) =
      p >= reinterpret_cast<CUdeviceptr>(managedArea) &&
      p < reinterpret_cast<CUdeviceptr>(managedArea) + sizeof managedArea;
  return CUDA_SUCCESS;
}
// As NVIDIA's driver answers for a module's managed variables (and this fake for everything).
FAKE_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr*, size_t*, CUdeviceptr) {  // _v2
  return CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuFuncGetParamInfo(CUfunction, size_t index, size_t* offset, size_t* size) {
  static const size_t layout[3][2] = {{0, 8}, {8, 4}, {16, 8}};  // int*, int, long long
  if (index >= 3) return CUDA_ERROR_INVALID_VALUE;
  *offset = layout[index][0];
  *size = layout[index][1];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction) {
  if (attribute >= 5) return CUDA_ERROR_INVALID_VALUE;
  *value = 100 + attribute;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, unsigned, CUstream, void** params,
                                    void** extra) {
  std::lock_guard lock(mutex);
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (function != reinterpret_cast<CUfunction>(&functionToken) || params == nullptr || extra) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUdeviceptr out;
  int value;
  std::memcpy(&out, params[0], sizeof out);
  std::memcpy(&value, params[1], sizeof value);
  if (!owned(out, sizeof value)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  // The value kFakeAssertValue fails a device-side assert (the fake's state stays usable: only the
  // backend's containment makes the fault the whole process's, as NVIDIA's driver does).
  if (value == kFakeAssertValue) return CUDA_ERROR_ASSERT;
  std::memcpy(reinterpret_cast<void*>(out), &value, sizeof value);
  return CUDA_SUCCESS;
}

// Clusters: the launch runs as cuLaunchKernel does, once its grid divides into its clusters.
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction function,
                                      void** params, void** extra) {
  unsigned cluster[3] = {1, 1, 1};
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      cluster[0] = a.value.clusterDim.x;
      cluster[1] = a.value.clusterDim.y;
      cluster[2] = a.value.clusterDim.z;
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      cooperative = a.value.cooperative != 0;
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (config->gridDimX % cluster[0] || config->gridDimY % cluster[1] ||
      config->gridDimZ % cluster[2]) {
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  {
    std::lock_guard lock(mutex);
    lastLaunchCluster = cluster[0] * cluster[1] * cluster[2];
    lastLaunchCooperative = cooperative;
  }
  return cuLaunchKernel(function, config->gridDimX, config->gridDimY, config->gridDimZ,
                        config->blockDimX, config->blockDimY, config->blockDimZ,
                        config->sharedMemBytes, config->hStream, params, extra);
}
// 16 blocks fit at once, in clusters of up to 8.
FAKE_EXPORT CUresult cuOccupancyMaxActiveClusters(int* clusters, CUfunction function,
                                                  const CUlaunchConfig* config) {
  if (function != reinterpret_cast<CUfunction>(&functionToken)) return CUDA_ERROR_INVALID_HANDLE;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& c = config->attrs[i].value.clusterDim;
      *clusters = static_cast<int>(16 / (c.x * c.y * c.z));
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;  // the kernel has no cluster size of its own
}
FAKE_EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int* size, CUfunction function,
                                                        const CUlaunchConfig*) {
  if (function != reinterpret_cast<CUfunction>(&functionToken)) return CUDA_ERROR_INVALID_HANDLE;
  *size = 8;
  return CUDA_SUCCESS;
}

namespace {

// Adds `node` to `graph` after `dependencies`, which must be nodes of that graph.
CUresult addGraphNode(CUgraphNode* added, CUgraph graph, const CUgraphNode* dependencies,
                      size_t count, FakeGraphNode* node) {
  auto* fake = reinterpret_cast<FakeGraph*>(graph);
  if (graphs.count(fake) == 0) {
    delete node;
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    auto* dependency = reinterpret_cast<FakeGraphNode*>(dependencies[i]);
    if (std::find(fake->nodes.begin(), fake->nodes.end(), dependency) == fake->nodes.end()) {
      delete node;
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  graphEdges += static_cast<int>(count);
  fake->nodes.push_back(node);
  *added = reinterpret_cast<CUgraphNode>(node);
  return CUDA_SUCCESS;
}

CUresult runGraphNode(const FakeGraphNode& node) {
  switch (node.kind) {
    case FakeGraphNode::Kind::kEmpty:
      return CUDA_SUCCESS;
    case FakeGraphNode::Kind::kStore:
      if (!owned(node.out, sizeof node.value)) return CUDA_ERROR_ILLEGAL_ADDRESS;
      std::memcpy(reinterpret_cast<void*>(node.out), &node.value, sizeof node.value);
      return CUDA_SUCCESS;
    case FakeGraphNode::Kind::kMemset: {
      const CUDA_MEMSET_NODE_PARAMS& m = node.memset;
      size_t row = m.width * m.elementSize;
      if (!owned(m.dst, (m.height - 1) * m.pitch + row)) return CUDA_ERROR_INVALID_CONTEXT;
      for (size_t y = 0; y < m.height; ++y) {
        auto* line = reinterpret_cast<unsigned char*>(m.dst + y * m.pitch);
        for (size_t x = 0; x < m.width; ++x) {
          std::memcpy(line + x * m.elementSize, &m.value, m.elementSize);
        }
      }
      return CUDA_SUCCESS;
    }
    case FakeGraphNode::Kind::kCopy: {
      const CUDA_MEMCPY3D& c = node.copy;
      if (c.Depth != 1 || !owned(c.srcDevice, (c.Height - 1) * c.srcPitch + c.WidthInBytes) ||
          !owned(c.dstDevice, (c.Height - 1) * c.dstPitch + c.WidthInBytes)) {
        return CUDA_ERROR_INVALID_CONTEXT;
      }
      for (size_t y = 0; y < c.Height; ++y) {
        std::memmove(reinterpret_cast<void*>(c.dstDevice + y * c.dstPitch),
                     reinterpret_cast<const void*>(c.srcDevice + y * c.srcPitch), c.WidthInBytes);
      }
      return CUDA_SUCCESS;
    }
    case FakeGraphNode::Kind::kMemOps:
      for (const CUstreamBatchMemOpParams& op : node.memOps) {
        if (op.operation == CU_STREAM_MEM_OP_BARRIER) continue;
        if (op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32) {
          // Run in order at its launch, the graph has nothing that could meet a wait later.
          if (!owned(op.waitValue.address, 4)) return CUDA_ERROR_ILLEGAL_ADDRESS;
          uint32_t word = 0;
          std::memcpy(&word, reinterpret_cast<const void*>(op.waitValue.address), 4);
          if (op.waitValue.flags != CU_STREAM_WAIT_VALUE_GEQ || word < op.waitValue.value) {
            return CUDA_ERROR_NOT_SUPPORTED;
          }
          ++graphWaitsMet;
          continue;
        }
        const bool wide = op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
        if (!owned(op.writeValue.address, wide ? 8 : 4)) return CUDA_ERROR_ILLEGAL_ADDRESS;
        if (wide) {
          std::memcpy(reinterpret_cast<void*>(op.writeValue.address), &op.writeValue.value64, 8);
        } else {
          std::memcpy(reinterpret_cast<void*>(op.writeValue.address), &op.writeValue.value, 4);
        }
      }
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

FAKE_EXPORT CUresult cuGraphCreate(CUgraph* graph, unsigned flags) {
  std::lock_guard lock(mutex);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* fake = new FakeGraph;
  graphs.insert(fake);
  *graph = reinterpret_cast<CUgraph>(fake);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeGraph*>(graph);
  if (graphs.erase(fake) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete fake;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph graph,
                                         const CUgraphNode* dependencies, size_t count) {
  std::lock_guard lock(mutex);
  return addGraphNode(node, graph, dependencies, count, new FakeGraphNode);
}
FAKE_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode* node, CUgraph graph,
                                          const CUgraphNode* dependencies, size_t count,
                                          const CUDA_KERNEL_NODE_PARAMS* params) {  // _v2
  std::lock_guard lock(mutex);
  if (params->func != reinterpret_cast<CUfunction>(&functionToken) ||
      params->kernelParams == nullptr || params->extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* added = new FakeGraphNode;
  added->kind = FakeGraphNode::Kind::kStore;
  std::memcpy(&added->out, params->kernelParams[0], sizeof added->out);
  std::memcpy(&added->value, params->kernelParams[1], sizeof added->value);
  return addGraphNode(node, graph, dependencies, count, added);
}
FAKE_EXPORT CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attribute,
                                                   const CUkernelNodeAttrValue* value) {
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeGraphNode*>(node);
  if (attribute != CU_KERNEL_NODE_ATTRIBUTE_COOPERATIVE ||
      fake->kind != FakeGraphNode::Kind::kStore)
    return CUDA_ERROR_INVALID_VALUE;
  fake->cooperative = value->cooperative != 0;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode* node, CUgraph graph,
                                          const CUgraphNode* dependencies, size_t count,
                                          const CUDA_MEMSET_NODE_PARAMS* params, CUcontext ctx) {
  std::lock_guard lock(mutex);
  if (reinterpret_cast<FakeContext*>(ctx) != current) return CUDA_ERROR_INVALID_CONTEXT;
  auto* added = new FakeGraphNode;
  added->kind = FakeGraphNode::Kind::kMemset;
  added->memset = *params;
  return addGraphNode(node, graph, dependencies, count, added);
}
FAKE_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode* node, CUgraph graph,
                                          const CUgraphNode* dependencies, size_t count,
                                          const CUDA_MEMCPY3D* params, CUcontext ctx) {
  std::lock_guard lock(mutex);
  if (reinterpret_cast<FakeContext*>(ctx) != current) return CUDA_ERROR_INVALID_CONTEXT;
  if (params->srcMemoryType != CU_MEMORYTYPE_DEVICE ||
      params->dstMemoryType != CU_MEMORYTYPE_DEVICE)
    return CUDA_ERROR_INVALID_VALUE;
  auto* added = new FakeGraphNode;
  added->kind = FakeGraphNode::Kind::kCopy;
  added->copy = *params;
  return addGraphNode(node, graph, dependencies, count, added);
}
// Writes, barriers and 32-bit GEQ waits; a launch fails a wait not met already (it would need
// another stream to meet it, which a graph run in order at its launch cannot have).
FAKE_EXPORT CUresult cuGraphAddBatchMemOpNode(CUgraphNode* node, CUgraph graph,
                                              const CUgraphNode* dependencies, size_t count,
                                              const CUDA_BATCH_MEM_OP_NODE_PARAMS* params) {
  std::lock_guard lock(mutex);
  if (reinterpret_cast<FakeContext*>(params->ctx) != current || params->count == 0 ||
      params->flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  auto* added = new FakeGraphNode;
  added->kind = FakeGraphNode::Kind::kMemOps;
  for (unsigned i = 0; i < params->count; ++i) {
    CUstreamBatchMemOpType kind = params->paramArray[i].operation;
    if (kind != CU_STREAM_MEM_OP_WRITE_VALUE_32 && kind != CU_STREAM_MEM_OP_WRITE_VALUE_64 &&
        kind != CU_STREAM_MEM_OP_WAIT_VALUE_32 && kind != CU_STREAM_MEM_OP_BARRIER) {
      delete added;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    added->memOps.push_back(params->paramArray[i]);
  }
  return addGraphNode(node, graph, dependencies, count, added);
}
FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                 unsigned long long flags) {
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeGraph*>(graph);
  if (graphs.count(fake) == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto* copy = new FakeGraph;
  for (FakeGraphNode* node : fake->nodes) copy->nodes.push_back(new FakeGraphNode(*node));
  graphs.insert(copy);
  *exec = reinterpret_cast<CUgraphExec>(copy);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  return cuGraphDestroy(reinterpret_cast<CUgraph>(exec));
}
FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  std::lock_guard lock(mutex);
  auto* fake = reinterpret_cast<FakeGraph*>(exec);
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (graphs.count(fake) == 0 || (stream != nullptr && streams.count(stream) == 0)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  ++graphLaunches;
  for (const FakeGraphNode* node : fake->nodes) {
    if (CUresult result = runGraphNode(*node); result != CUDA_SUCCESS) return result;
  }
  return CUDA_SUCCESS;
}
