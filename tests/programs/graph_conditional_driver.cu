// Conditional graph nodes through the driver API: cuGraphConditionalHandleCreate and
// cuGraphAddNode(CU_GRAPH_NODE_TYPE_CONDITIONAL) with bodies filled node by node. A while node
// runs a countdown the device ends; a switch node picks one of four bodies; an executable graph's
// body kernel changes through cuGraphExecKernelNodeSetParams and through cuGraphExecUpdate; and
// cuGraphDebugDotPrint shows the bodies.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "driver_check.h"
#include "graph_node_params.h"

namespace {

__global__ void countdownStep(int* counter, int* steps, CUgraphConditionalHandle loop) {
  *steps += 1;
  *counter -= 1;
  cudaGraphSetConditional(loop, *counter > 0 ? 1u : 0u);
}

__global__ void chooseFrom(const unsigned* value, CUgraphConditionalHandle h) {
  cudaGraphSetConditional(h, *value);
}

__global__ void store(int* out, int value) { *out = value; }

CUfunction functionOf(const void* kernel) {
  cudaFunction_t f;
  CHECK_CUDA(cudaGetFuncBySymbol(&f, kernel));
  return reinterpret_cast<CUfunction>(f);
}

CUgraphNode addConditional(CUgraph graph, const CUgraphNode* deps, size_t count,
                           CUgraphConditionalHandle handle, CUgraphConditionalNodeType type,
                           unsigned size, CUgraph** bodies) {
  CUgraphNodeParams p = {};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = size;
  CUgraphNode node;
  CHECK_CU(cuGraphAddNode(&node, graph, deps, nullptr, count, &p));
  *bodies = p.conditional.phGraph_out;
  return node;
}

int readInt(CUdeviceptr at) {
  int value;
  CHECK_CU(cuMemcpyDtoH(&value, at, sizeof value));
  return value;
}

void writeInt(CUdeviceptr at, int value) { CHECK_CU(cuMemcpyHtoD(at, &value, sizeof value)); }

}  // namespace

int main() {
  CHECK_CUDA(cudaFree(nullptr));
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr counter, steps, choice, out;
  CHECK_CU(cuMemAlloc(&counter, sizeof(int)));
  CHECK_CU(cuMemAlloc(&steps, sizeof(int)));
  CHECK_CU(cuMemAlloc(&choice, sizeof(unsigned)));
  CHECK_CU(cuMemAlloc(&out, sizeof(int)));

  // 1. while: counter steps down to 0 however long it starts.
  CUgraph loopGraph;
  CHECK_CU(cuGraphCreate(&loopGraph, 0));
  CUgraphConditionalHandle loop;
  CHECK_CU(cuGraphConditionalHandleCreate(&loop, loopGraph, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
  expectError(cuGraphConditionalHandleCreate(nullptr, loopGraph, ctx, 0, 0),
              CUDA_ERROR_INVALID_VALUE, "cuGraphConditionalHandleCreate without an output");
  CUgraph* loopBody;
  CUgraphNode whileNode =
      addConditional(loopGraph, nullptr, 0, loop, CU_GRAPH_COND_TYPE_WHILE, 1, &loopBody);
  void* stepArgs[] = {&counter, &steps, &loop};
  CUDA_KERNEL_NODE_PARAMS step =
      kernelNodeParams(functionOf(reinterpret_cast<const void*>(countdownStep)), stepArgs, 1, 1);
  CUgraphNode stepNode;
  CHECK_CU(cuGraphAddKernelNode(&stepNode, loopBody[0], nullptr, 0, &step));
  CUgraphNodeType type;
  CHECK_CU(cuGraphNodeGetType(whileNode, &type));
  CHECK(type == CU_GRAPH_NODE_TYPE_CONDITIONAL, "node type %d", static_cast<int>(type));
  CUgraphExec loopExec;
  CHECK_CU(cuGraphInstantiateWithFlags(&loopExec, loopGraph, 0));
  for (int n : {6, 250}) {
    writeInt(counter, n);
    writeInt(steps, 0);
    CHECK_CU(cuGraphLaunch(loopExec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK(readInt(steps) == n && readInt(counter) == 0, "while over %d: %d steps, counter %d", n,
          readInt(steps), readInt(counter));
  }
  std::printf("while node: 6 and 250 iterations, ended by the device\n");

  // 2. switch with four bodies, each storing its own value.
  CUgraph switchGraph;
  CHECK_CU(cuGraphCreate(&switchGraph, 0));
  CUgraphConditionalHandle which;
  CHECK_CU(cuGraphConditionalHandleCreate(&which, switchGraph, ctx, 0, 0));
  void* chooseArgs[] = {&choice, &which};
  CUDA_KERNEL_NODE_PARAMS choose =
      kernelNodeParams(functionOf(reinterpret_cast<const void*>(chooseFrom)), chooseArgs, 1, 1);
  CUgraphNode chooseNode;
  CHECK_CU(cuGraphAddKernelNode(&chooseNode, switchGraph, nullptr, 0, &choose));
  CUgraph* cases;
  addConditional(switchGraph, &chooseNode, 1, which, CU_GRAPH_COND_TYPE_SWITCH, 4, &cases);
  CUfunction storeFn = functionOf(reinterpret_cast<const void*>(store));
  int values[4] = {40, 41, 42, 43};
  void* storeArgs[4][2];
  CUgraphNode storeNodes[4];
  for (int i = 0; i < 4; ++i) {
    storeArgs[i][0] = &out;
    storeArgs[i][1] = &values[i];
    CUDA_KERNEL_NODE_PARAMS k = kernelNodeParams(storeFn, storeArgs[i], 1, 1);
    CHECK_CU(cuGraphAddKernelNode(&storeNodes[i], cases[i], nullptr, 0, &k));
  }
  CUgraphExec switchExec;
  CHECK_CU(cuGraphInstantiateWithFlags(&switchExec, switchGraph, 0));
  for (unsigned v : {3u, 0u, 2u, 9u}) {
    CHECK_CU(cuMemcpyHtoD(choice, &v, sizeof v));
    writeInt(out, -1);
    CHECK_CU(cuGraphLaunch(switchExec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    int expected = v < 4 ? values[v] : -1;
    CHECK(readInt(out) == expected, "switch on %u stored %d, expected %d", v, readInt(out),
          expected);
  }
  std::printf("switch node: cases 3, 0, 2 and none (9)\n");

  // 3. A body kernel's parameters change in the executable graph only.
  int changed = 77;
  void* changedArgs[] = {&out, &changed};
  CUDA_KERNEL_NODE_PARAMS k = kernelNodeParams(storeFn, changedArgs, 1, 1);
  CHECK_CU(cuGraphExecKernelNodeSetParams(switchExec, storeNodes[1], &k));
  unsigned one = 1;
  CHECK_CU(cuMemcpyHtoD(choice, &one, sizeof one));
  CHECK_CU(cuGraphLaunch(switchExec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK(readInt(out) == 77, "the exec's changed body kernel stored %d", readInt(out));
  // And through cuGraphExecUpdate from the graph, whose case 1 still stores 41.
  CUgraphExecUpdateResultInfo info;
  CHECK_CU(cuGraphExecUpdate(switchExec, switchGraph, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update result %d",
        static_cast<int>(info.result));
  CHECK_CU(cuGraphLaunch(switchExec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK(readInt(out) == 41, "after cuGraphExecUpdate case 1 stored %d", readInt(out));
  std::printf("body kernels change through the exec setters and cuGraphExecUpdate\n");

  // 4. The dot file shows the conditional node and its body.
  std::string path = "/tmp/graph_conditional_driver_" + std::to_string(getpid()) + ".dot";
  CHECK_CU(cuGraphDebugDotPrint(loopGraph, path.c_str(), 0));
  std::ifstream dot(path);
  std::stringstream text;
  text << dot.rdbuf();
  std::remove(path.c_str());
  std::string lower = text.str();
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK(lower.find("conditional") != std::string::npos, "no conditional node in the dot file");

  CHECK_CU(cuGraphExecDestroy(loopExec));
  CHECK_CU(cuGraphExecDestroy(switchExec));
  CHECK_CU(cuGraphDestroy(loopGraph));
  CHECK_CU(cuGraphDestroy(switchGraph));
  CHECK_CU(cuMemFree(counter));
  CHECK_CU(cuMemFree(steps));
  CHECK_CU(cuMemFree(choice));
  CHECK_CU(cuMemFree(out));
  CHECK_CU(cuStreamDestroy(stream));
  return pass();
}
