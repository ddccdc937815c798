// CUDA graphs built node by node through the driver API: kernel, memset, device-to-device memcpy,
// empty, event record and child graph nodes with their dependencies; reading the graph back
// (nodes, roots, edges, types, kernel and memset parameters); kernel parameters copied when set;
// changing dependencies and parameters; cloning (and finding a node in the clone); a DOT dump;
// instantiating the clone and launching it several times with new inputs in between.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "driver_check.h"
#include "graph_node_params.h"

namespace {

constexpr int kCount = 2048;
constexpr size_t kBytes = kCount * sizeof(int);
constexpr unsigned kThreads = 128;
constexpr unsigned kBlocks = (kCount + kThreads - 1) / kThreads;

// y = y * k + x
__global__ void axpy(int* y, const int* x, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * k + x[i];
}

CUfunction axpyFunction() {
  cudaFunction_t f;
  CHECK_CUDA(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(axpy)));
  return reinterpret_cast<CUfunction>(f);
}

// Kernel node parameters for axpy; `args` must outlive the call that reads them.
CUDA_KERNEL_NODE_PARAMS axpyParams(CUfunction f, void** args) {
  return kernelNodeParams(f, args, kBlocks, kThreads);
}

CUDA_MEMSET_NODE_PARAMS fill(CUdeviceptr dst, unsigned value) {
  return fill32NodeParams(dst, value, kCount);
}

size_t count(CUresult (*get)(CUgraph, CUgraphNode*, size_t*), CUgraph g) {
  size_t n = 0;
  CHECK_CU(get(g, nullptr, &n));
  return n;
}

size_t edgeCount(CUgraph g) {
  size_t n = 0;
  CHECK_CU(cuGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
  return n;
}

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));  // the primary context the driver calls use
  CUfunction f = axpyFunction();
  CUdeviceptr in, a, b, c;
  for (CUdeviceptr* p : {&in, &a, &b, &c}) CHECK_CU(cuMemAlloc(p, kBytes));
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent done;
  CHECK_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));

  // The child graph: b = 1; b = b * 10 + in  (b = 10 + in)
  CUgraph child;
  CHECK_CU(cuGraphCreate(&child, 0));
  CUgraphNode childFill, childKernel;
  CUDA_MEMSET_NODE_PARAMS fillB = fill(b, 1);
  CHECK_CU(cuGraphAddMemsetNode(&childFill, child, nullptr, 0, &fillB, nullptr));
  int ten = 10, n = kCount;
  void* childArgs[] = {&b, &in, &ten, &n};
  CUDA_KERNEL_NODE_PARAMS childParams = axpyParams(f, childArgs);
  CHECK_CU(cuGraphAddKernelNode(&childKernel, child, &childFill, 1, &childParams));

  // The graph: fillA (a = 2) -> scale (a = a * 3 + in) -> join; fillA -> child -> join;
  // join -> sum (a = a * 1 + b) -> copy (c = a) -> record(done).
  CUgraph graph;
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUgraphNode fillA, scale, childNode, join, sum, copy, record, spare;
  CUDA_MEMSET_NODE_PARAMS fillAParams = fill(a, 2);
  CHECK_CU(cuGraphAddMemsetNode(&fillA, graph, nullptr, 0, &fillAParams, nullptr));
  int three = 3;
  void* scaleArgs[] = {&a, &in, &three, &n};
  CUDA_KERNEL_NODE_PARAMS scaleParams = axpyParams(f, scaleArgs);
  CHECK_CU(cuGraphAddKernelNode(&scale, graph, &fillA, 1, &scaleParams));
  three = 99;  // parameters were copied when the node was added: this changes nothing
  CHECK_CU(cuGraphAddChildGraphNode(&childNode, graph, &fillA, 1, child));
  CUgraphNode joinDeps[] = {scale, childNode};
  CHECK_CU(cuGraphAddEmptyNode(&join, graph, joinDeps, 2));
  int one = 1;
  void* sumArgs[] = {&a, &b, &one, &n};
  CUDA_KERNEL_NODE_PARAMS sumParams = axpyParams(f, sumArgs);
  CHECK_CU(cuGraphAddKernelNode(&sum, graph, &join, 1, &sumParams));
  CUDA_MEMCPY3D copyParams;
  std::memset(&copyParams, 0, sizeof copyParams);
  copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copyParams.srcDevice = a;
  copyParams.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copyParams.dstDevice = c;
  copyParams.WidthInBytes = kBytes;
  copyParams.Height = 1;
  copyParams.Depth = 1;
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CHECK_CU(cuGraphAddMemcpyNode(&copy, graph, &sum, 1, &copyParams, ctx));
  CHECK_CU(cuGraphAddEventRecordNode(&record, graph, &copy, 1, done));
  CHECK_CU(cuGraphAddEmptyNode(&spare, graph, nullptr, 0));
  CHECK_CU(cuGraphDestroy(child));  // the child node holds its own copy

  // Reading it back.
  CHECK(count(cuGraphGetNodes, graph) == 8, "%zu nodes", count(cuGraphGetNodes, graph));
  CHECK(count(cuGraphGetRootNodes, graph) == 2, "%zu roots", count(cuGraphGetRootNodes, graph));
  CHECK_CU(cuGraphDestroyNode(spare));
  CHECK(count(cuGraphGetNodes, graph) == 7, "%zu nodes", count(cuGraphGetNodes, graph));
  CHECK(count(cuGraphGetRootNodes, graph) == 1, "%zu roots", count(cuGraphGetRootNodes, graph));
  CHECK(edgeCount(graph) == 7, "%zu edges", edgeCount(graph));
  std::vector<CUgraphNode> from(7), to(7);
  size_t edges = 7;
  CHECK_CU(cuGraphGetEdges(graph, from.data(), to.data(), nullptr, &edges));
  bool sawJoinToSum = false;
  for (size_t i = 0; i < edges; ++i) sawJoinToSum |= from[i] == join && to[i] == sum;
  CHECK(sawJoinToSum, "no join -> sum edge");
  CUgraphNodeType type;
  CHECK_CU(cuGraphNodeGetType(childNode, &type));
  CHECK(type == CU_GRAPH_NODE_TYPE_GRAPH, "child node type %d", type);
  CHECK_CU(cuGraphNodeGetType(copy, &type));
  CHECK(type == CU_GRAPH_NODE_TYPE_MEMCPY, "copy node type %d", type);
  CHECK_CU(cuGraphNodeGetType(record, &type));
  CHECK(type == CU_GRAPH_NODE_TYPE_EVENT_RECORD, "record node type %d", type);
  CUgraph embedded;
  CHECK_CU(cuGraphChildGraphNodeGetGraph(childNode, &embedded));
  CHECK(count(cuGraphGetNodes, embedded) == 2, "the child has %zu nodes",
        count(cuGraphGetNodes, embedded));
  CUDA_KERNEL_NODE_PARAMS got;
  CHECK_CU(cuGraphKernelNodeGetParams(scale, &got));
  CHECK(got.func == f && got.gridDimX == kBlocks && got.blockDimX == kThreads,
        "kernel node parameters read back wrong");
  CHECK(*static_cast<int*>(got.kernelParams[2]) == 3, "the node's k is %d, expected 3",
        *static_cast<int*>(got.kernelParams[2]));
  CUDA_MEMSET_NODE_PARAMS gotFill;
  CHECK_CU(cuGraphMemsetNodeGetParams(fillA, &gotFill));
  CHECK(gotFill.dst == a && gotFill.value == 2 && gotFill.width == kCount,
        "memset node parameters read back wrong");
  std::printf("graph structure read back ok\n");

  // Dependencies: removed and added back.
  CHECK_CU(cuGraphRemoveDependencies(graph, &join, &sum, nullptr, 1));
  CHECK(edgeCount(graph) == 6, "%zu edges after removing one", edgeCount(graph));
  CHECK(cuGraphRemoveDependencies(graph, &join, &sum, nullptr, 1) == CUDA_ERROR_INVALID_VALUE,
        "removing a missing edge succeeded");
  CHECK_CU(cuGraphAddDependencies(graph, &join, &sum, nullptr, 1));
  CHECK(edgeCount(graph) == 7, "%zu edges after adding it back", edgeCount(graph));

  // New parameters for the scale kernel: a = a * 4 + in. Then a = 8 + in + 10 + in, c = a.
  int four = 4;
  void* newScaleArgs[] = {&a, &in, &four, &n};
  CUDA_KERNEL_NODE_PARAMS newScale = axpyParams(f, newScaleArgs);
  CHECK_CU(cuGraphKernelNodeSetParams(scale, &newScale));

  // The clone is what runs; the original goes away first.
  CUgraph clone;
  CHECK_CU(cuGraphClone(&clone, graph));
  CUgraphNode scaleInClone;
  CHECK_CU(cuGraphNodeFindInClone(&scaleInClone, scale, clone));
  CHECK_CU(cuGraphNodeGetType(scaleInClone, &type));
  CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL && scaleInClone != scale, "node found in the clone");
  const std::string dot = scratchFileName("graph_driver", ".dot");
  CHECK_CU(cuGraphDebugDotPrint(clone, dot.c_str(), 0));
  FILE* file = std::fopen(dot.c_str(), "r");
  CHECK(file != nullptr, "no DOT file");
  char head[64] = {};
  size_t read = std::fread(head, 1, sizeof head - 1, file);
  std::fclose(file);
  std::remove(dot.c_str());
  CHECK(read > 0 && std::string(head).find("digraph") != std::string::npos, "DOT file: %s", head);
  CHECK_CU(cuGraphDestroy(graph));
  CHECK(count(cuGraphGetNodes, clone) == 7, "the clone has %zu nodes",
        count(cuGraphGetNodes, clone));

  CUgraphExec exec;
  CHECK_CU(cuGraphInstantiate(&exec, clone, 0));
  CHECK_CU(cuGraphUpload(exec, stream));
  std::vector<int> input(kCount), result(kCount);
  for (int launch = 0; launch < 4; ++launch) {
    for (int i = 0; i < kCount; ++i) input[i] = launch * 100 - i;
    CHECK_CU(cuMemcpyHtoD(in, input.data(), kBytes));
    CHECK_CU(cuGraphLaunch(exec, stream));
    CHECK_CU(cuEventSynchronize(done));
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH(result.data(), c, kBytes));
    for (int i = 0; i < kCount; ++i) {
      int expected = 18 + 2 * input[i];
      CHECK(result[i] == expected, "launch %d: c[%d] = %d, expected %d", launch, i, result[i],
            expected);
    }
  }
  std::printf("cloned graph launched 4 times ok\n");

  // The executable graph's own copy of the scale kernel gets k = 5: a = 10 + in + 10 + in.
  int five = 5;
  void* execScaleArgs[] = {&a, &in, &five, &n};
  CUDA_KERNEL_NODE_PARAMS execScale = axpyParams(f, execScaleArgs);
  CHECK_CU(cuGraphExecKernelNodeSetParams(exec, scaleInClone, &execScale));
  CHECK_CU(cuGraphLaunch(exec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemcpyDtoH(result.data(), c, kBytes));
  for (int i = 0; i < kCount; ++i) {
    int expected = 20 + 2 * input[i];
    CHECK(result[i] == expected, "after SetParams: c[%d] = %d, expected %d", i, result[i],
          expected);
  }
  std::printf("cuGraphExecKernelNodeSetParams ok\n");

  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(clone));
  CHECK_CU(cuEventDestroy(done));
  CHECK_CU(cuStreamDestroy(stream));
  for (CUdeviceptr p : {in, a, b, c}) CHECK_CU(cuMemFree(p));
  return pass();
}
