// cudaMallocAsync and cudaFreeAsync inside stream capture, as PyTorch's and vLLM's graph capture
// use them: the capture makes memory alloc and free nodes, the address the capture handed out
// stays valid at every launch, and a launch computes through it. An allocation the graph does not
// free is usable after the launch and freed by cudaFreeAsync, or by the next launch of a graph
// instantiated with cudaGraphInstantiateFlagAutoFreeOnLaunch.
#include <cuda_runtime.h>

#include <vector>

#include "self_check.h"

namespace {

constexpr int kCount = 8192;
constexpr size_t kBytes = kCount * sizeof(float);
constexpr int kThreads = 256;
constexpr int kBlocks = (kCount + kThreads - 1) / kThreads;

__global__ void scaleInto(float* dst, const float* src, float k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] * k;
}

__global__ void addOne(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += 1.0f;
}

void expectValues(const float* device, const std::vector<float>& expected, const char* what) {
  std::vector<float> got(kCount);
  CHECK_CUDA(cudaMemcpy(got.data(), device, kBytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) {
    CHECK(got[i] == expected[i], "%s: [%d] = %f, expected %f", what, i, got[i], expected[i]);
  }
}

size_t countNodes(cudaGraph_t graph, cudaGraphNodeType type) {
  size_t n = 0;
  CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CHECK_CUDA(cudaGraphGetNodes(graph, nodes.data(), &n));
  size_t found = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    CHECK_CUDA(cudaGraphNodeGetType(node, &t));
    if (t == type) ++found;
  }
  return found;
}

}  // namespace

int main() {
  std::vector<float> input(kCount);
  for (int i = 0; i < kCount; ++i) input[i] = static_cast<float>(i % 97) - 40.0f;
  float *in = nullptr, *out = nullptr;
  CHECK_CUDA(cudaMalloc(&in, kBytes));
  CHECK_CUDA(cudaMalloc(&out, kBytes));
  CHECK_CUDA(cudaMemcpy(in, input.data(), kBytes, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // A scratch buffer that lives only inside the graph: out = (in * 2 + 1) * 3.
  cudaGraph_t graph;
  float* scratch = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&scratch), kBytes, stream));
  CHECK(scratch != nullptr, "cudaMallocAsync in capture gave no address");
  scaleInto<<<kBlocks, kThreads, 0, stream>>>(scratch, in, 2.0f, kCount);
  addOne<<<kBlocks, kThreads, 0, stream>>>(scratch, kCount);
  scaleInto<<<kBlocks, kThreads, 0, stream>>>(out, scratch, 3.0f, kCount);
  CHECK_CUDA(cudaFreeAsync(scratch, stream));
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK(countNodes(graph, cudaGraphNodeTypeMemAlloc) == 1, "one alloc node captured");
  CHECK(countNodes(graph, cudaGraphNodeTypeMemFree) == 1, "one free node captured");
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<float> expected(kCount);
  for (int i = 0; i < kCount; ++i) expected[i] = (input[i] * 2.0f + 1.0f) * 3.0f;
  for (int launch = 0; launch < 3; ++launch) {
    CHECK_CUDA(cudaMemsetAsync(out, 0, kBytes, stream));
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    expectValues(out, expected, "captured scratch buffer");
  }
  std::printf("captured cudaMallocAsync/cudaFreeAsync: 3 launches through the scratch buffer\n");

  // An allocation the graph hands out: usable after the launch, freed by cudaFreeAsync.
  cudaGraph_t producer;
  float* result = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&result), kBytes, stream));
  scaleInto<<<kBlocks, kThreads, 0, stream>>>(result, in, -1.0f, kCount);
  CHECK_CUDA(cudaStreamEndCapture(stream, &producer));
  cudaGraphExec_t producerExec;
  CHECK_CUDA(cudaGraphInstantiate(&producerExec, producer, 0));
  for (int i = 0; i < kCount; ++i) expected[i] = -input[i];
  CHECK_CUDA(cudaGraphLaunch(producerExec, stream));
  addOne<<<kBlocks, kThreads, 0, stream>>>(result, kCount);  // stream work after the graph
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int i = 0; i < kCount; ++i) expected[i] += 1.0f;
  expectValues(result, expected, "allocation used after the launch");
  EXPECT_CUDA_ERROR(cudaGraphLaunch(producerExec, stream), cudaErrorInvalidValue);
  CHECK_CUDA(cudaFreeAsync(result, stream));
  CHECK_CUDA(cudaGraphLaunch(producerExec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (int i = 0; i < kCount; ++i) expected[i] = -input[i];
  expectValues(result, expected, "relaunch after cudaFreeAsync, same address");
  CHECK_CUDA(cudaFreeAsync(result, stream));
  CHECK_CUDA(cudaGraphExecDestroy(producerExec));

  // The same graph with AUTO_FREE_ON_LAUNCH relaunches without frees.
  CHECK_CUDA(cudaGraphInstantiateWithFlags(&producerExec, producer,
                                           cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int launch = 0; launch < 3; ++launch) CHECK_CUDA(cudaGraphLaunch(producerExec, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  expectValues(result, expected, "AUTO_FREE_ON_LAUNCH");
  CHECK_CUDA(cudaFree(result));
  std::printf("graph-made allocation: used after launch, freed by cudaFreeAsync, auto-free\n");

  size_t used = 0;
  CHECK_CUDA(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &used));
  CHECK(used >= kBytes, "graph memory high watermark %zu", used);

  CHECK_CUDA(cudaGraphExecDestroy(producerExec));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(producer));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaDeviceGraphMemTrim(0));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaFree(in));
  CHECK_CUDA(cudaFree(out));
  std::printf("PASS\n");
  return 0;
}
