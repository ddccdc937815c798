// CUDA graphs by stream capture (runtime API): a capture forked into a second stream and joined
// back through events, with kernels, memsets and a device-to-device copy; the captured graph's
// structure; instantiated once and launched several times with new inputs in between; and the
// capture rules: cudaStreamIsCapturing tells the truth, and a cudaStreamSynchronize of a capturing
// stream fails and invalidates the capture; the dependency set edited during a capture
// (cudaStreamUpdateCaptureDependencies, set and add); cudaLaunchKernelEx captured as <<<>>> is.
#include <cuda_runtime.h>

#include <vector>

#include "self_check.h"

namespace {

constexpr int kCount = 4096;
constexpr size_t kBytes = kCount * sizeof(int);

// y = y * k + x
__global__ void axpy(int* y, const int* x, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * k + x[i];
}

__global__ void addConstant(int* y, int c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += c;
}

constexpr int kThreads = 256;
constexpr int kBlocks = (kCount + kThreads - 1) / kThreads;

cudaStreamCaptureStatus captureStatus(cudaStream_t s) {
  cudaStreamCaptureStatus status;
  CHECK_CUDA(cudaStreamIsCapturing(s, &status));
  return status;
}

}  // namespace

int main() {
  int *in = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_CUDA(cudaMalloc(&in, kBytes));
  CHECK_CUDA(cudaMalloc(&a, kBytes));
  CHECK_CUDA(cudaMalloc(&b, kBytes));
  CHECK_CUDA(cudaMalloc(&c, kBytes));
  cudaStream_t s1, s2;
  CHECK_CUDA(cudaStreamCreate(&s1));
  CHECK_CUDA(cudaStreamCreate(&s2));
  cudaEvent_t fork, join;
  CHECK_CUDA(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

  CHECK(captureStatus(s1) == cudaStreamCaptureStatusNone, "s1 captures before BeginCapture");
  CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  CHECK(captureStatus(s1) == cudaStreamCaptureStatusActive, "s1 is not capturing");
  CHECK(captureStatus(s2) == cudaStreamCaptureStatusNone, "s2 captures before it joined");
  unsigned long long captureId = 0;
  cudaStreamCaptureStatus infoStatus;
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &infoStatus, &captureId));
  CHECK(infoStatus == cudaStreamCaptureStatusActive, "capture info status");

  // s1: a = 0; a = a * 1 + in  (a = in)
  CHECK_CUDA(cudaMemsetAsync(a, 0, kBytes, s1));
  CHECK_CUDA(cudaEventRecord(fork, s1));
  axpy<<<kBlocks, kThreads, 0, s1>>>(a, in, 1, kCount);
  CHECK_CUDA(cudaGetLastError());
  // s2 forks off after the memset: b = 0; b += 5; b = b * 3 + in  (b = 15 + in)
  CHECK_CUDA(cudaStreamWaitEvent(s2, fork, 0));
  CHECK(captureStatus(s2) == cudaStreamCaptureStatusActive, "s2 did not join the capture");
  CHECK_CUDA(cudaMemsetAsync(b, 0, kBytes, s2));
  addConstant<<<kBlocks, kThreads, 0, s2>>>(b, 5, kCount);
  axpy<<<kBlocks, kThreads, 0, s2>>>(b, in, 3, kCount);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventRecord(join, s2));
  // Joined back: c = b (copy); c = c * 2 + a  (c = 30 + 3 * in)
  CHECK_CUDA(cudaStreamWaitEvent(s1, join, 0));
  CHECK_CUDA(cudaMemcpyAsync(c, b, kBytes, cudaMemcpyDeviceToDevice, s1));
  axpy<<<kBlocks, kThreads, 0, s1>>>(c, a, 2, kCount);
  CHECK_CUDA(cudaGetLastError());
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamEndCapture(s1, &graph));
  CHECK(graph != nullptr, "EndCapture gave no graph");
  CHECK(captureStatus(s1) == cudaStreamCaptureStatusNone, "s1 still captures after EndCapture");
  CHECK(captureStatus(s2) == cudaStreamCaptureStatusNone, "s2 still captures after EndCapture");
  std::printf("captured: fork/join across two streams ok\n");

  // The graph: 2 memsets, 4 kernels, 1 copy; one root (a's memset: b's memset waits for it).
  size_t nodes = 0, roots = 0, edges = 0;
  CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK_CUDA(cudaGraphGetRootNodes(graph, nullptr, &roots));
  CHECK_CUDA(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges));
  CHECK(nodes == 7, "the captured graph has %zu nodes, expected 7", nodes);
  CHECK(roots == 1, "the captured graph has %zu roots, expected 1", roots);
  // memsetA->axpyA, memsetA->memsetB, memsetB->add, add->axpyB, axpyA->copy, axpyB->copy,
  // copy->final
  CHECK(edges == 7, "the captured graph has %zu edges, expected 7", edges);
  std::vector<cudaGraphNode_t> all(nodes);
  CHECK_CUDA(cudaGraphGetNodes(graph, all.data(), &nodes));
  int kernels = 0, memsets = 0, copies = 0;
  for (cudaGraphNode_t n : all) {
    cudaGraphNodeType type;
    CHECK_CUDA(cudaGraphNodeGetType(n, &type));
    kernels += type == cudaGraphNodeTypeKernel;
    memsets += type == cudaGraphNodeTypeMemset;
    copies += type == cudaGraphNodeTypeMemcpy;
  }
  CHECK(kernels == 4 && memsets == 2 && copies == 1, "node types: %d kernels %d memsets %d copies",
        kernels, memsets, copies);
  std::printf("graph structure: %zu nodes, %zu edges ok\n", nodes, edges);

  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<int> input(kCount), result(kCount);
  for (int launch = 0; launch < 4; ++launch) {
    for (int i = 0; i < kCount; ++i) input[i] = launch * 1000 + i;
    CHECK_CUDA(cudaMemcpy(in, input.data(), kBytes, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaGraphLaunch(exec, s1));
    CHECK_CUDA(cudaStreamSynchronize(s1));
    CHECK_CUDA(cudaMemcpy(result.data(), c, kBytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < kCount; ++i) {
      CHECK(result[i] == 30 + 3 * input[i], "launch %d: c[%d] = %d, expected %d", launch, i,
            result[i], 30 + 3 * input[i]);
    }
  }
  // Back-to-back launches on a stream run one after the other.
  for (int i = 0; i < kCount; ++i) input[i] = 7;
  CHECK_CUDA(cudaMemcpy(in, input.data(), kBytes, cudaMemcpyHostToDevice));
  for (int launch = 0; launch < 3; ++launch) CHECK_CUDA(cudaGraphLaunch(exec, s2));
  CHECK_CUDA(cudaStreamSynchronize(s2));
  CHECK_CUDA(cudaMemcpy(result.data(), c, kBytes, cudaMemcpyDeviceToHost));
  CHECK(result[0] == 51 && result[kCount - 1] == 51, "after three launches c = %d", result[0]);
  std::printf("graph launched 7 times ok\n");

  // The dependency set can be edited during capture (cudaStreamUpdateCaptureDependencies):
  // after x1 and x2 (in order), setting the set to {x1} makes x3 depend on x1 only, and adding x2
  // back makes x4 depend on both; the graph has exactly those edges and computes accordingly.
  EXPECT_CUDA_ERROR(cudaStreamUpdateCaptureDependencies(s1, nullptr, nullptr, 0, 0),
                    cudaErrorIllegalState);
  (void)cudaGetLastError();
  CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  addConstant<<<kBlocks, kThreads, 0, s1>>>(a, 1, kCount);  // x1
  cudaStreamCaptureStatus st;
  const cudaGraphNode_t* deps = nullptr;
  size_t numDeps = 0;
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, nullptr, nullptr, &deps, nullptr, &numDeps));
  CHECK(numDeps == 1, "%zu dependencies after x1", numDeps);
  cudaGraphNode_t x1 = deps[0];
  addConstant<<<kBlocks, kThreads, 0, s1>>>(b, 2, kCount);  // x2, after x1
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, nullptr, nullptr, &deps, nullptr, &numDeps));
  cudaGraphNode_t x2 = deps[0];
  CHECK_CUDA(
      cudaStreamUpdateCaptureDependencies(s1, &x1, nullptr, 1, cudaStreamSetCaptureDependencies));
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, nullptr, nullptr, &deps, nullptr, &numDeps));
  CHECK(numDeps == 1 && deps[0] == x1, "set: %zu dependencies", numDeps);
  addConstant<<<kBlocks, kThreads, 0, s1>>>(c, 3, kCount);  // x3, after x1 only
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, nullptr, nullptr, &deps, nullptr, &numDeps));
  cudaGraphNode_t x3 = deps[0];
  CHECK_CUDA(
      cudaStreamUpdateCaptureDependencies(s1, &x2, nullptr, 1, cudaStreamAddCaptureDependencies));
  CHECK_CUDA(cudaStreamUpdateCaptureDependencies(s1, &x2, nullptr, 1, 0));  // already there
  CHECK_CUDA(cudaStreamGetCaptureInfo(s1, &st, nullptr, nullptr, &deps, nullptr, &numDeps));
  CHECK(numDeps == 2, "add: %zu dependencies, expected x3 and x2", numDeps);
  axpy<<<kBlocks, kThreads, 0, s1>>>(c, b, 1, kCount);  // x4: c += b, after x3 and x2
  // A node of another graph is refused, and leaves the capture as it was.
  cudaGraphNode_t foreign = all[0];
  EXPECT_CUDA_ERROR(cudaStreamUpdateCaptureDependencies(s1, &foreign, nullptr, 1, 0),
                    cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(cudaStreamUpdateCaptureDependencies(s1, &x1, nullptr, 1, 7),
                    cudaErrorInvalidValue);
  (void)cudaGetLastError();
  cudaGraph_t edited = nullptr;
  CHECK_CUDA(cudaStreamEndCapture(s1, &edited));
  size_t editedEdges = 0;
  CHECK_CUDA(cudaGraphGetEdges(edited, nullptr, nullptr, nullptr, &editedEdges));
  // x1->x2, x1->x3, x3->x4, x2->x4
  CHECK(editedEdges == 4, "the edited capture has %zu edges, expected 4", editedEdges);
  cudaGraphNode_t x3Dep = nullptr;
  size_t x3DepCount = 1;
  CHECK_CUDA(cudaGraphNodeGetDependencies(x3, &x3Dep, nullptr, &x3DepCount));
  CHECK(x3DepCount == 1 && x3Dep == x1, "x3 depends on %zu nodes, expected x1 only", x3DepCount);
  cudaGraphExec_t editedExec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&editedExec, edited, 0));
  CHECK_CUDA(cudaMemset(a, 0, kBytes));
  CHECK_CUDA(cudaMemset(b, 0, kBytes));
  CHECK_CUDA(cudaMemset(c, 0, kBytes));
  CHECK_CUDA(cudaGraphLaunch(editedExec, s1));
  CHECK_CUDA(cudaStreamSynchronize(s1));
  CHECK_CUDA(cudaMemcpy(result.data(), c, kBytes, cudaMemcpyDeviceToHost));
  CHECK(result[0] == 5 && result[kCount - 1] == 5, "c = %d after the edited graph, expected 5",
        result[0]);
  CHECK_CUDA(cudaMemcpy(result.data(), a, kBytes, cudaMemcpyDeviceToHost));
  CHECK(result[0] == 1, "a = %d after the edited graph, expected 1", result[0]);
  // Restore a = 7 for the checks below.
  addConstant<<<kBlocks, kThreads, 0, s1>>>(a, 6, kCount);
  CHECK_CUDA(cudaStreamSynchronize(s1));
  CHECK_CUDA(cudaGraphExecDestroy(editedExec));
  CHECK_CUDA(cudaGraphDestroy(edited));
  std::printf("capture dependencies set and added ok\n");

  // A synchronize of a capturing stream is refused and invalidates the capture.
  CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  addConstant<<<kBlocks, kThreads, 0, s1>>>(a, 1, kCount);
  EXPECT_CUDA_ERROR(cudaStreamSynchronize(s1), cudaErrorStreamCaptureUnsupported);
  CHECK(captureStatus(s1) == cudaStreamCaptureStatusInvalidated, "capture not invalidated");
  cudaGraph_t invalid = nullptr;
  EXPECT_CUDA_ERROR(cudaStreamEndCapture(s1, &invalid), cudaErrorStreamCaptureInvalidated);
  CHECK(invalid == nullptr, "an invalidated capture gave a graph");
  CHECK(captureStatus(s1) == cudaStreamCaptureStatusNone, "s1 still captures");
  (void)cudaGetLastError();
  // The stream works normally again, and the kernel captured in the failed capture never ran.
  CHECK_CUDA(cudaStreamSynchronize(s1));
  CHECK_CUDA(cudaMemcpy(result.data(), a, kBytes, cudaMemcpyDeviceToHost));
  CHECK(result[0] == 7, "a[0] = %d, expected 7", result[0]);
  std::printf("synchronize during capture -> invalidated ok\n");

  // cudaLaunchKernelEx (cuBLAS launches its kernels so) is captured as a kernel node like <<<>>>,
  // with an attribute that capture accepts; and an occupancy query naming the capturing stream
  // enqueues nothing, so it leaves the capture alone.
  CHECK_CUDA(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.stream = s1;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 0;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CHECK_CUDA(cudaLaunchKernelEx(&config, addConstant, a, 5, kCount));
  CHECK(captureStatus(s1) == cudaStreamCaptureStatusActive, "cudaLaunchKernelEx ended the capture");
  cudaGraph_t exGraph = nullptr;
  CHECK_CUDA(cudaStreamEndCapture(s1, &exGraph));
  size_t exNodes = 0;
  CHECK_CUDA(cudaGraphGetNodes(exGraph, nullptr, &exNodes));
  CHECK(exNodes == 1, "the cudaLaunchKernelEx capture has %zu nodes, expected 1", exNodes);
  cudaGraphExec_t exExec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exExec, exGraph, 0));
  CHECK_CUDA(cudaGraphLaunch(exExec, s1));
  CHECK_CUDA(cudaGraphLaunch(exExec, s1));
  CHECK_CUDA(cudaStreamSynchronize(s1));
  CHECK_CUDA(cudaMemcpy(result.data(), a, kBytes, cudaMemcpyDeviceToHost));
  CHECK(result[0] == 17 && result[kCount - 1] == 17, "after two launches a[0] = %d, expected 17",
        result[0]);
  CHECK_CUDA(cudaGraphExecDestroy(exExec));
  CHECK_CUDA(cudaGraphDestroy(exGraph));
  std::printf("cudaLaunchKernelEx captured ok\n");

  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaEventDestroy(fork));
  CHECK_CUDA(cudaEventDestroy(join));
  CHECK_CUDA(cudaStreamDestroy(s1));
  CHECK_CUDA(cudaStreamDestroy(s2));
  for (int* p : {in, a, b, c}) CHECK_CUDA(cudaFree(p));
  return pass();
}
