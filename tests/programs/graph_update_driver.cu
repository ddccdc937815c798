// Changing executable graphs through the driver API, each change checked by what the next launch
// computes: cuGraphExecMemsetNodeSetParams, cuGraphExecMemcpyNodeSetParams, cuGraphNodeSetEnabled
// (a disabled kernel node runs as an empty one), cuGraphExecChildGraphNodeSetParams, the event
// setters, the generic cuGraphAddNode / cuGraphNodeSetParams / cuGraphExecNodeSetParams, and
// cuGraphExecUpdate (v2 and the legacy form): a graph of the same shape replaces the
// parameters; a different node count, other edges or another node kind are refused with the
// driver's result code and error node, and the executable graph keeps running what it had.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "driver_check.h"
#include "graph_node_params.h"

namespace {

constexpr int kCount = 1024;
constexpr size_t kBytes = kCount * sizeof(int);
constexpr unsigned kThreads = 128;
constexpr unsigned kBlocks = (kCount + kThreads - 1) / kThreads;

// y = y * k + x
__global__ void axpy(int* y, const int* x, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * k + x[i];
}

CUDA_KERNEL_NODE_PARAMS axpyParams(CUfunction f, void** args) {
  return kernelNodeParams(f, args, kBlocks, kThreads);
}

CUDA_MEMSET_NODE_PARAMS fill(CUdeviceptr dst, unsigned value) {
  return fill32NodeParams(dst, value, kCount);
}

CUDA_MEMCPY3D copyOf(CUdeviceptr from, CUdeviceptr to) {
  CUDA_MEMCPY3D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = from;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = to;
  p.WidthInBytes = kBytes;
  p.Height = 1;
  p.Depth = 1;
  return p;
}

struct Chain {
  CUgraph graph;
  CUgraphNode fill, kernel, copy;
};

// fill(a, value) -> a = a * k + in -> copy a to `out`; `args` must hold a, in, k, n.
Chain chain(CUfunction f, CUdeviceptr a, unsigned value, void** args, CUdeviceptr out,
            CUcontext ctx) {
  Chain c;
  CHECK_CU(cuGraphCreate(&c.graph, 0));
  CUDA_MEMSET_NODE_PARAMS fillParams = fill(a, value);
  CHECK_CU(cuGraphAddMemsetNode(&c.fill, c.graph, nullptr, 0, &fillParams, ctx));
  CUDA_KERNEL_NODE_PARAMS kernelParams = axpyParams(f, args);
  CHECK_CU(cuGraphAddKernelNode(&c.kernel, c.graph, &c.fill, 1, &kernelParams));
  CUDA_MEMCPY3D copyParams = copyOf(a, out);
  CHECK_CU(cuGraphAddMemcpyNode(&c.copy, c.graph, &c.kernel, 1, &copyParams, ctx));
  return c;
}

// Launches `exec`, waits, and checks out[i] == base + in[i] (or == base alone when !withInput).
void launchAndCheck(CUgraphExec exec, CUstream stream, CUdeviceptr out,
                    const std::vector<int>& input, int base, bool withInput, const char* what) {
  CHECK_CU(cuGraphLaunch(exec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  std::vector<int> result(kCount);
  CHECK_CU(cuMemcpyDtoH(result.data(), out, kBytes));
  for (int i = 0; i < kCount; ++i) {
    int expected = base + (withInput ? input[i] : 0);
    CHECK(result[i] == expected, "%s: out[%d] = %d, expected %d", what, i, result[i], expected);
  }
  std::printf("%s ok\n", what);
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));
  cudaFunction_t rf;
  CHECK_CUDA(cudaGetFuncBySymbol(&rf, reinterpret_cast<const void*>(axpy)));
  CUfunction f = reinterpret_cast<CUfunction>(rf);
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CUdeviceptr in, a, c, d;
  for (CUdeviceptr* p : {&in, &a, &c, &d}) CHECK_CU(cuMemAlloc(p, kBytes));
  std::vector<int> input(kCount);
  for (int i = 0; i < kCount; ++i) input[i] = 3 * i - 500;
  CHECK_CU(cuMemcpyHtoD(in, input.data(), kBytes));
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  int three = 3, n = kCount;
  void* args3[] = {&a, &in, &three, &n};
  Chain g1 = chain(f, a, 2, args3, c, ctx);
  CUgraphExec exec;
  CHECK_CU(cuGraphInstantiateWithFlags(&exec, g1.graph, 0));
  launchAndCheck(exec, stream, c, input, 6, true, "instantiated graph");

  // Memset: a = 7, so c = 21 + in; the graph itself keeps its own parameters.
  CUDA_MEMSET_NODE_PARAMS seven = fill(a, 7);
  CHECK_CU(cuGraphExecMemsetNodeSetParams(exec, g1.fill, &seven, ctx));
  launchAndCheck(exec, stream, c, input, 21, true, "cuGraphExecMemsetNodeSetParams");
  CUDA_MEMSET_NODE_PARAMS kept;
  CHECK_CU(cuGraphMemsetNodeGetParams(g1.fill, &kept));
  CHECK(kept.value == 2, "the graph's memset node changed to %u", kept.value);
  expectError(cuGraphExecMemsetNodeSetParams(exec, g1.kernel, &seven, ctx),
              CUDA_ERROR_INVALID_VALUE, "cuGraphExecMemsetNodeSetParams on a kernel node");
  CUDA_MEMSET_NODE_PARAMS twoD = fill(a, 1);
  twoD.width = kCount / 2;
  twoD.height = 2;
  twoD.pitch = kBytes / 2;
  expectError(cuGraphExecMemsetNodeSetParams(exec, g1.fill, &twoD, ctx), CUDA_ERROR_INVALID_VALUE,
              "cuGraphExecMemsetNodeSetParams with a 2D memset");

  // Memcpy: the result now goes to d; c keeps what it holds.
  CHECK_CU(cuMemsetD32(c, 12345, kCount));
  CUDA_MEMCPY3D toD = copyOf(a, d);
  CHECK_CU(cuGraphExecMemcpyNodeSetParams(exec, g1.copy, &toD, ctx));
  launchAndCheck(exec, stream, d, input, 21, true, "cuGraphExecMemcpyNodeSetParams");
  std::vector<int> untouched(kCount);
  CHECK_CU(cuMemcpyDtoH(untouched.data(), c, kBytes));
  CHECK(untouched[0] == 12345 && untouched[kCount - 1] == 12345, "the old copy target changed: %d",
        untouched[0]);

  // A disabled kernel node runs as an empty node: d = 7.
  CHECK_CU(cuGraphNodeSetEnabled(exec, g1.kernel, 0));
  unsigned enabled = 1;
  CHECK_CU(cuGraphNodeGetEnabled(exec, g1.kernel, &enabled));
  CHECK(enabled == 0, "the kernel node still reads enabled");
  launchAndCheck(exec, stream, d, input, 7, false, "disabled kernel node");
  CHECK_CU(cuGraphNodeSetEnabled(exec, g1.kernel, 1));
  launchAndCheck(exec, stream, d, input, 21, true, "re-enabled kernel node");

  // cuGraphExecUpdate: a graph of the same shape, a = 1 and k = 5, copying to c: c = 5 + in.
  int five = 5;
  void* args5[] = {&a, &in, &five, &n};
  Chain g2 = chain(f, a, 1, args5, c, ctx);
  CUgraphExecUpdateResultInfo info;
  std::memset(&info, 0xff, sizeof info);
  CHECK_CU(cuGraphExecUpdate(exec, g2.graph, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS && info.errorNode == nullptr &&
            info.errorFromNode == nullptr,
        "update result %d", static_cast<int>(info.result));
  launchAndCheck(exec, stream, c, input, 5, true, "cuGraphExecUpdate");
  // The update's graph's nodes do not name the exec's (observed on driver 580.159.04, H200); the
  // original graph's still do.
  int six = 6;
  void* args6[] = {&a, &in, &six, &n};
  CUDA_KERNEL_NODE_PARAMS k6 = axpyParams(f, args6);
  expectError(cuGraphExecKernelNodeSetParams(exec, g2.kernel, &k6), CUDA_ERROR_INVALID_VALUE,
              "cuGraphExecKernelNodeSetParams with a node of the update's graph");
  CHECK_CU(cuGraphExecKernelNodeSetParams(exec, g1.kernel, &k6));
  launchAndCheck(exec, stream, c, input, 6, true, "kernel setter after the update");

  // One node more: the topology changed, and nothing else did.
  Chain g3 = chain(f, a, 1, args3, c, ctx);
  CUgraphNode extra;
  CHECK_CU(cuGraphAddEmptyNode(&extra, g3.graph, &g3.copy, 1));
  expectError(cuGraphExecUpdate(exec, g3.graph, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
              "cuGraphExecUpdate with one node more");
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "result %d",
        static_cast<int>(info.result));
  launchAndCheck(exec, stream, c, input, 6, true, "after a refused update (topology)");

  // The same graph with its kernel node made cooperative: "a cooperative node cannot be updated to
  // a non-cooperative node, and vice-versa" (cuda.h), and the exec runs as before.
  Chain cooperative = chain(f, a, 1, args3, c, ctx);
  CUkernelNodeAttrValue together{};
  together.cooperative = 1;
  CHECK_CU(cuGraphKernelNodeSetAttribute(cooperative.kernel, CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                                         &together));
  expectError(cuGraphExecUpdate(exec, cooperative.graph, &info),
              CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "cuGraphExecUpdate to a cooperative node");
  CHECK(info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS, "a refused update reads as a success");
  launchAndCheck(exec, stream, c, input, 6, true, "after a refused update (cooperative)");

  // The same nodes, other edges: fill -> copy instead of kernel -> copy. The new graph has two exit
  // nodes where the exec has one, which is reported first, naming an exit node of the new graph:
  // kernel4, not copy4 with its changed dependency (observed on driver 580.159.04, H200).
  CUgraph g4;
  CHECK_CU(cuGraphCreate(&g4, 0));
  CUgraphNode fill4, kernel4, copy4;
  CUDA_MEMSET_NODE_PARAMS fillParams = fill(a, 1);
  CHECK_CU(cuGraphAddMemsetNode(&fill4, g4, nullptr, 0, &fillParams, ctx));
  CUDA_KERNEL_NODE_PARAMS k3 = axpyParams(f, args3);
  CHECK_CU(cuGraphAddKernelNode(&kernel4, g4, &fill4, 1, &k3));
  CUDA_MEMCPY3D toC = copyOf(a, c);
  CHECK_CU(cuGraphAddMemcpyNode(&copy4, g4, &fill4, 1, &toC, ctx));
  expectError(cuGraphExecUpdate(exec, g4, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
              "cuGraphExecUpdate with other edges");
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED && info.errorNode == kernel4,
        "result %d, error node %p", static_cast<int>(info.result),
        static_cast<void*>(info.errorNode));

  // The same edges, another kind of node in the middle.
  CUgraph g5;
  CHECK_CU(cuGraphCreate(&g5, 0));
  CUgraphNode fill5, empty5, copy5;
  CHECK_CU(cuGraphAddMemsetNode(&fill5, g5, nullptr, 0, &fillParams, ctx));
  CHECK_CU(cuGraphAddEmptyNode(&empty5, g5, &fill5, 1));
  CHECK_CU(cuGraphAddMemcpyNode(&copy5, g5, &empty5, 1, &toC, ctx));
  // The pre-12.0 entry point, which cuda.h now renames to _v2: found by its exported name.
  using LegacyUpdate = CUresult (*)(CUgraphExec, CUgraph, CUgraphNode*, CUgraphExecUpdateResult*);
  auto legacyUpdate = reinterpret_cast<LegacyUpdate>(dlsym(RTLD_DEFAULT, "cuGraphExecUpdate"));
  CHECK(legacyUpdate != nullptr, "libcuda.so.1 exports no cuGraphExecUpdate");
  CUgraphNode errorNode = nullptr;
  CUgraphExecUpdateResult legacyResult = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  expectError(legacyUpdate(exec, g5, &errorNode, &legacyResult),
              CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "cuGraphExecUpdate (legacy) with a new kind");
  CHECK(legacyResult == CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED && errorNode == empty5,
        "legacy result %d", static_cast<int>(legacyResult));
  launchAndCheck(exec, stream, c, input, 6, true, "after refused updates (edges, kind)");

  // Child graph nodes: the child's memset replaced in the executable graph only.
  CUgraph child, parent;
  CHECK_CU(cuGraphCreate(&child, 0));
  CUgraphNode childFill;
  CHECK_CU(cuGraphAddMemsetNode(&childFill, child, nullptr, 0, &fillParams, ctx));
  CHECK_CU(cuGraphCreate(&parent, 0));
  CUgraphNode childNode, record;
  CHECK_CU(cuGraphAddChildGraphNode(&childNode, parent, nullptr, 0, child));
  CUevent first, second;
  CHECK_CU(cuEventCreate(&first, 0));
  CHECK_CU(cuEventCreate(&second, 0));
  CHECK_CU(cuGraphAddEventRecordNode(&record, parent, &childNode, 1, first));
  CUgraphExec parentExec;
  CHECK_CU(cuGraphInstantiateWithFlags(&parentExec, parent, 0));
  launchAndCheck(parentExec, stream, a, input, 1, false, "child graph");
  CUgraph nine;
  CHECK_CU(cuGraphCreate(&nine, 0));
  CUgraphNode nineFill;
  CUDA_MEMSET_NODE_PARAMS fill9 = fill(a, 9);
  CHECK_CU(cuGraphAddMemsetNode(&nineFill, nine, nullptr, 0, &fill9, ctx));
  CHECK_CU(cuGraphExecChildGraphNodeSetParams(parentExec, childNode, nine));
  launchAndCheck(parentExec, stream, a, input, 9, false, "cuGraphExecChildGraphNodeSetParams");
  CUgraphNode second9;
  CHECK_CU(cuGraphAddEmptyNode(&second9, nine, &nineFill, 1));
  expectError(cuGraphExecChildGraphNodeSetParams(parentExec, childNode, nine),
              CUDA_ERROR_INVALID_VALUE, "cuGraphExecChildGraphNodeSetParams, another shape");
  // The record node now records `second`: recorded, so it times against a later event.
  CHECK_CU(cuGraphExecEventRecordNodeSetEvent(parentExec, record, second));
  expectError(cuGraphExecEventWaitNodeSetEvent(parentExec, record, second),
              CUDA_ERROR_INVALID_VALUE, "cuGraphExecEventWaitNodeSetEvent on a record node");
  launchAndCheck(parentExec, stream, a, input, 9, false, "event record setter");
  CHECK_CU(cuEventRecord(first, stream));
  CHECK_CU(cuEventSynchronize(first));
  float ms = -1;
  CHECK_CU(cuEventElapsedTime(&ms, second, first));
  CHECK(ms >= 0, "elapsed %f ms", ms);
  expectError(cuGraphNodeSetEnabled(parentExec, record, 0), CUDA_ERROR_INVALID_VALUE,
              "cuGraphNodeSetEnabled on an event record node");

  // The generic forms: cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams.
  CUgraph generic;
  CHECK_CU(cuGraphCreate(&generic, 0));
  CUgraphNodeParams memsetNode;
  std::memset(&memsetNode, 0, sizeof memsetNode);
  memsetNode.type = CU_GRAPH_NODE_TYPE_MEMSET;
  memsetNode.memset.dst = a;
  memsetNode.memset.value = 2;
  memsetNode.memset.elementSize = 4;
  memsetNode.memset.width = kCount;
  memsetNode.memset.height = 1;
  memsetNode.memset.ctx = ctx;
  CUgraphNode genericFill, genericKernel;
  CHECK_CU(cuGraphAddNode(&genericFill, generic, nullptr, nullptr, 0, &memsetNode));
  auto kernelNode = [&](void** args) {
    CUgraphNodeParams p;
    std::memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel.func = f;
    p.kernel.gridDimX = kBlocks;
    p.kernel.gridDimY = p.kernel.gridDimZ = 1;
    p.kernel.blockDimX = kThreads;
    p.kernel.blockDimY = p.kernel.blockDimZ = 1;
    p.kernel.kernelParams = args;
    return p;
  };
  CUgraphNodeParams byThree = kernelNode(args3);
  CHECK_CU(cuGraphAddNode(&genericKernel, generic, &genericFill, nullptr, 1, &byThree));
  CUgraphExec genericExec;
  CHECK_CU(cuGraphInstantiateWithFlags(&genericExec, generic, 0));
  launchAndCheck(genericExec, stream, a, input, 6, true, "cuGraphAddNode");
  int four = 4;
  void* args4[] = {&a, &in, &four, &n};
  CUgraphNodeParams byFour = kernelNode(args4);
  CHECK_CU(cuGraphNodeSetParams(genericKernel, &byFour));  // the graph only
  CUgraphNodeParams byFive = kernelNode(args5);
  CHECK_CU(cuGraphExecNodeSetParams(genericExec, genericKernel, &byFive));
  launchAndCheck(genericExec, stream, a, input, 10, true, "cuGraphExecNodeSetParams");
  expectError(cuGraphExecNodeSetParams(genericExec, genericKernel, &memsetNode),
              CUDA_ERROR_INVALID_VALUE, "cuGraphExecNodeSetParams with another node kind");
  CHECK_CU(cuGraphExecDestroy(genericExec));
  CHECK_CU(cuGraphInstantiateWithFlags(&genericExec, generic, 0));
  launchAndCheck(genericExec, stream, a, input, 8, true, "cuGraphNodeSetParams");
  CHECK_CU(cuGraphExecDestroy(genericExec));
  CHECK_CU(cuGraphDestroy(generic));

  CHECK_CU(cuGraphExecDestroy(parentExec));
  CHECK_CU(cuGraphExecDestroy(exec));
  for (CUgraph g : {g1.graph, g2.graph, g3.graph, g4, g5, child, parent, nine}) {
    CHECK_CU(cuGraphDestroy(g));
  }
  CHECK_CU(cuEventDestroy(first));
  CHECK_CU(cuEventDestroy(second));
  CHECK_CU(cuStreamDestroy(stream));
  for (CUdeviceptr p : {in, a, c, d}) CHECK_CU(cuMemFree(p));
  return pass();
}
