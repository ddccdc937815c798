// Conditional graph nodes through the runtime API: kernels set the condition with
// cudaGraphSetConditional while the graph runs and the graph takes the branch they chose. A while
// node sums a countdown whose length is device data (so only the device can know when to stop);
// an if/else node and a switch node pick bodies by a value the host writes between launches;
// a while node holds an if node; a body is filled by stream capture
// (cudaStreamBeginCaptureToGraph); a conditional node joins a graph while it is being captured, as
// frameworks make them; the default value is applied again at each launch
// (cudaGraphCondAssignDefault); and the driver's rules for bodies are kept.
#include <cuda_runtime.h>

#include <cstdio>

#include "self_check.h"

namespace {

// One body iteration of the countdown: adds the counter to the sum, counts down, and keeps the
// loop going while anything is left.
__global__ void countdownStep(int* counter, long long* sum, cudaGraphConditionalHandle loop) {
  *sum += *counter;
  *counter -= 1;
  cudaGraphSetConditional(loop, *counter > 0 ? 1u : 0u);
}

// Sets the condition to *value (the host's choice for this launch).
__global__ void chooseFrom(const unsigned* value, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, *value);
}

__global__ void store(int* out, int value) { *out = value; }

// out[i] += 1 for every element: a body with a whole grid in it.
__global__ void addOne(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += 1;
}

__global__ void isOdd(const int* counter, cudaGraphConditionalHandle h) {
  cudaGraphSetConditional(h, (*counter & 1) ? 1u : 0u);
}

cudaGraphNode_t addConditional(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count,
                               cudaGraphConditionalHandle handle, cudaGraphConditionalNodeType type,
                               unsigned size, cudaGraph_t** bodies) {
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = size;
  cudaGraphNode_t node;
  CHECK_CUDA(cudaGraphAddNode(&node, graph, deps, nullptr, count, &p));
  CHECK(p.conditional.phGraph_out != nullptr, "no body graphs came back");
  *bodies = p.conditional.phGraph_out;
  return node;
}

cudaGraphNode_t addKernel(cudaGraph_t graph, const cudaGraphNode_t* deps, size_t count, void* fn,
                          void** args, unsigned blocks = 1, unsigned threads = 1) {
  cudaKernelNodeParams k = {};
  k.func = fn;
  k.gridDim = dim3(blocks);
  k.blockDim = dim3(threads);
  k.kernelParams = args;
  cudaGraphNode_t node;
  CHECK_CUDA(cudaGraphAddKernelNode(&node, graph, deps, count, &k));
  return node;
}

template <typename T>
T readBack(const T* device) {
  T value;
  CHECK_CUDA(cudaMemcpy(&value, device, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

template <typename T>
void write(T* device, T value) {
  CHECK_CUDA(cudaMemcpy(device, &value, sizeof value, cudaMemcpyHostToDevice));
}

void whileLoop(cudaStream_t stream, int* counter, long long* sum) {
  cudaGraph_t graph;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle loop;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
  cudaGraph_t* body;
  addConditional(graph, nullptr, 0, loop, cudaGraphCondTypeWhile, 1, &body);
  void* args[] = {&counter, &sum, &loop};
  addKernel(body[0], nullptr, 0, reinterpret_cast<void*>(countdownStep), args);
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  // Three launches of different lengths: the device decides each time when the loop ends.
  const int lengths[] = {10, 1000, 3};
  for (int n : lengths) {
    write(counter, n);
    write(sum, 0LL);
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    long long expected = static_cast<long long>(n) * (n + 1) / 2;
    CHECK(readBack(sum) == expected, "while over %d: sum %lld, expected %lld", n, readBack(sum),
          expected);
    CHECK(readBack(counter) == 0, "while over %d: counter ended at %d", n, readBack(counter));
  }
  std::printf("while node: countdowns of 10, 1000 and 3 ran to their device-chosen ends\n");
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
}

void ifElseAndSwitch(cudaStream_t stream, unsigned* choice, int* out) {
  cudaGraph_t graph;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle ifHandle, switchHandle;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&ifHandle, graph, 0, 0));
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&switchHandle, graph, 0, 0));
  // choose -> if/else -> choose -> switch, in one graph.
  void* chooseIf[] = {&choice, &ifHandle};
  cudaGraphNode_t c1 = addKernel(graph, nullptr, 0, reinterpret_cast<void*>(chooseFrom), chooseIf);
  cudaGraph_t* ifBodies;
  cudaGraphNode_t ifNode =
      addConditional(graph, &c1, 1, ifHandle, cudaGraphCondTypeIf, 2, &ifBodies);
  int* first = out;
  int* second = out + 1;
  int thenValue = 100, elseValue = 200;
  void* thenArgs[] = {&first, &thenValue};
  void* elseArgs[] = {&first, &elseValue};
  addKernel(ifBodies[0], nullptr, 0, reinterpret_cast<void*>(store), thenArgs);
  addKernel(ifBodies[1], nullptr, 0, reinterpret_cast<void*>(store), elseArgs);
  void* chooseSwitch[] = {&choice, &switchHandle};
  cudaGraphNode_t c2 =
      addKernel(graph, &ifNode, 1, reinterpret_cast<void*>(chooseFrom), chooseSwitch);
  cudaGraph_t* cases;
  addConditional(graph, &c2, 1, switchHandle, cudaGraphCondTypeSwitch, 3, &cases);
  int caseValues[3] = {10, 11, 12};
  void* caseArgs[3][2];
  for (int i = 0; i < 3; ++i) {
    caseArgs[i][0] = &second;
    caseArgs[i][1] = &caseValues[i];
    addKernel(cases[i], nullptr, 0, reinterpret_cast<void*>(store), caseArgs[i]);
  }
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (unsigned value : {0u, 1u, 2u, 7u}) {
    write(choice, value);
    write(first, -1);
    write(second, -1);
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    int expectFirst = value ? thenValue : elseValue;
    int expectSecond = value < 3 ? caseValues[value] : -1;  // no case: nothing runs
    CHECK(readBack(first) == expectFirst, "if/else on %u: %d, expected %d", value, readBack(first),
          expectFirst);
    CHECK(readBack(second) == expectSecond, "switch on %u: %d, expected %d", value,
          readBack(second), expectSecond);
  }
  std::printf("if/else and switch nodes: conditions 0, 1, 2 and 7 took their branches\n");
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
}

// A while node whose body counts down and, on odd counts only, adds one to every element of a
// buffer through an if node; the if node's body is filled by stream capture.
void nestedAndCaptured(cudaStream_t stream, int* counter, int* buffer, int n) {
  cudaGraph_t graph;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle loop, odd;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&odd, graph, 0, 0));
  cudaGraph_t* loopBody;
  addConditional(graph, nullptr, 0, loop, cudaGraphCondTypeWhile, 1, &loopBody);
  void* oddArgs[] = {&counter, &odd};
  cudaGraphNode_t test =
      addKernel(loopBody[0], nullptr, 0, reinterpret_cast<void*>(isOdd), oddArgs);
  cudaGraph_t* ifBody;
  cudaGraphNode_t ifNode =
      addConditional(loopBody[0], &test, 1, odd, cudaGraphCondTypeIf, 1, &ifBody);
  // The if body by capture.
  cudaStream_t capture;
  CHECK_CUDA(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamBeginCaptureToGraph(capture, ifBody[0], nullptr, nullptr, 0,
                                           cudaStreamCaptureModeThreadLocal));
  addOne<<<(n + 127) / 128, 128, 0, capture>>>(buffer, n);
  CHECK_CUDA(cudaGetLastError());
  cudaGraph_t captured;
  CHECK_CUDA(cudaStreamEndCapture(capture, &captured));
  CHECK(captured == ifBody[0], "capture into the body returned another graph");
  // Count down after the if: countdownStep sums into a scratch value and sets the loop handle.
  long long* scratch;
  CHECK_CUDA(cudaMalloc(&scratch, sizeof *scratch));
  void* stepArgs[] = {&counter, &scratch, &loop};
  addKernel(loopBody[0], &ifNode, 1, reinterpret_cast<void*>(countdownStep), stepArgs);
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_CUDA(cudaMemset(buffer, 0, n * sizeof(int)));
  write(counter, 9);  // 9, 7, 5, 3, 1 are odd: five passes add one
  CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  int* host = new int[n];
  CHECK_CUDA(cudaMemcpy(host, buffer, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i)
    CHECK(host[i] == 5, "nested: element %d is %d, expected 5", i, host[i]);
  delete[] host;
  std::printf("while node holding an if node filled by capture: 5 of 9 passes took the branch\n");
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(capture));
  CHECK_CUDA(cudaFree(scratch));
}

// How frameworks make a conditional while they capture (PyTorch's torch.cond under CUDA graphs):
// a conditional node joins the capturing graph after the capture's current dependencies, its body
// is captured from another stream, and the capture goes on after the node.
void conditionalDuringCapture(int* counter, long long* sum, int* out) {
  cudaStream_t main, side;
  CHECK_CUDA(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
  int before = 3, after = 4;
  store<<<1, 1, 0, main>>>(out, before);
  cudaStreamCaptureStatus status;
  cudaGraph_t capturing;
  const cudaGraphNode_t* deps = nullptr;
  size_t count = 0;
  CHECK_CUDA(cudaStreamGetCaptureInfo(main, &status, nullptr, &capturing, &deps, nullptr, &count));
  CHECK(status == cudaStreamCaptureStatusActive && count == 1, "capture status %d, %zu deps",
        static_cast<int>(status), count);
  cudaGraphConditionalHandle loop;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&loop, capturing, 1, cudaGraphCondAssignDefault));
  cudaGraph_t* body;
  cudaGraphNode_t node =
      addConditional(capturing, deps, count, loop, cudaGraphCondTypeWhile, 1, &body);
  CHECK_CUDA(cudaStreamBeginCaptureToGraph(side, body[0], nullptr, nullptr, 0,
                                           cudaStreamCaptureModeThreadLocal));
  countdownStep<<<1, 1, 0, side>>>(counter, sum, loop);
  cudaGraph_t sideGraph;
  CHECK_CUDA(cudaStreamEndCapture(side, &sideGraph));
  CHECK_CUDA(cudaStreamUpdateCaptureDependencies(main, &node, nullptr, 1,
                                                 cudaStreamSetCaptureDependencies));
  store<<<1, 1, 0, main>>>(out, after);
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamEndCapture(main, &graph));
  CHECK(graph == capturing, "the capture ended with another graph");
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  write(counter, 20);
  write(sum, 0LL);
  write(out, 0);
  CHECK_CUDA(cudaGraphLaunch(exec, main));
  CHECK_CUDA(cudaStreamSynchronize(main));
  CHECK(readBack(sum) == 210 && readBack(counter) == 0 && readBack(out) == after,
        "captured while node: sum %lld, counter %d, out %d", readBack(sum), readBack(counter),
        readBack(out));
  std::printf("a while node added during capture, its body captured from another stream\n");
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaStreamDestroy(main));
  CHECK_CUDA(cudaStreamDestroy(side));
}

void driverRules() {
  cudaGraph_t graph;
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle;
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
  EXPECT_CUDA_ERROR(cudaGraphConditionalHandleCreate(&handle, graph, 0, 2), cudaErrorInvalidValue);
  cudaGraphNodeParams p = {};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 3;  // an if node has one or two bodies
  cudaGraphNode_t node;
  EXPECT_CUDA_ERROR(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &p), cudaErrorInvalidValue);
  p.conditional.type = cudaGraphCondTypeWhile;
  p.conditional.size = 2;  // a while node has one
  EXPECT_CUDA_ERROR(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &p), cudaErrorInvalidValue);
  p.conditional.size = 1;
  CHECK_CUDA(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &p));
  cudaGraph_t body = p.conditional.phGraph_out[0];
  cudaGraphNodeType type;
  CHECK_CUDA(cudaGraphNodeGetType(node, &type));
  CHECK(type == cudaGraphNodeTypeConditional, "node type %d", static_cast<int>(type));
  // A body takes kernel, empty, child graph, memset, memcpy and conditional nodes only: a graph
  // holding anything else fails to be added or to be instantiated.
  cudaHostNodeParams host = {};
  host.fn = [](void*) {};
  cudaGraphNode_t hostNode;
  if (cudaGraphAddHostNode(&hostNode, body, nullptr, 0, &host) == cudaSuccess) {
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess,
          "a graph with a host node in a conditional body was instantiated");
  }
  (void)cudaGetLastError();
  CHECK_CUDA(cudaGraphDestroy(graph));
  // A clone has bodies of its own.
  CHECK_CUDA(cudaGraphCreate(&graph, 0));
  CHECK_CUDA(cudaGraphConditionalHandleCreate(&handle, graph, 0, 0));
  p.conditional.handle = handle;
  CHECK_CUDA(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &p));
  cudaGraphNode_t empty;
  CHECK_CUDA(cudaGraphAddEmptyNode(&empty, p.conditional.phGraph_out[0], nullptr, 0));
  cudaGraph_t clone;
  CHECK_CUDA(cudaGraphClone(&clone, graph));
  cudaGraphNode_t cloned;
  CHECK_CUDA(cudaGraphNodeFindInClone(&cloned, node, clone));
  CHECK(cloned != node, "the clone shares the conditional node");
  CHECK_CUDA(cudaGraphDestroy(clone));
  CHECK_CUDA(cudaGraphDestroy(graph));
  std::printf("bodies and handles follow the driver's rules\n");
}

}  // namespace

int main() {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int* counter;
  long long* sum;
  unsigned* choice;
  int* out;
  constexpr int kElements = 1000;
  int* buffer;
  CHECK_CUDA(cudaMalloc(&counter, sizeof *counter));
  CHECK_CUDA(cudaMalloc(&sum, sizeof *sum));
  CHECK_CUDA(cudaMalloc(&choice, sizeof *choice));
  CHECK_CUDA(cudaMalloc(&out, 2 * sizeof *out));
  CHECK_CUDA(cudaMalloc(&buffer, kElements * sizeof *buffer));
  whileLoop(stream, counter, sum);
  ifElseAndSwitch(stream, choice, out);
  nestedAndCaptured(stream, counter, buffer, kElements);
  conditionalDuringCapture(counter, sum, out);
  driverRules();
  CHECK_CUDA(cudaFree(counter));
  CHECK_CUDA(cudaFree(sum));
  CHECK_CUDA(cudaFree(choice));
  CHECK_CUDA(cudaFree(out));
  CHECK_CUDA(cudaFree(buffer));
  CHECK_CUDA(cudaStreamDestroy(stream));
  return pass();
}
