// Re-capturing a stream and updating the executable graph in place, as frameworks do between
// steps (runtime API): cudaGraphExecUpdate with a capture of the same shape takes effect on the
// next launch; one with another shape fails with the topology result and leaves the executable
// graph as it was; cudaGraphExecKernelNodeSetParams on a node of the original graph (not of the
// graph it was updated from) and cudaGraphNodeSetEnabled change what the next launch computes.
#include <cstdio>
#include <cstring>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kCount = 4096;
constexpr size_t kBytes = kCount * sizeof(int);
constexpr int kThreads = 256;
constexpr int kBlocks = (kCount + kThreads - 1) / kThreads;

// y = x * k + b
__global__ void affine(int* y, const int* x, int k, int b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * k + b;
}

// Captures: y = -1 (every byte 0xff), then y = x * k + b, `kernels` times.
cudaGraph_t capture(cudaStream_t s, int* y, const int* x, int k, int b, int kernels) {
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CHECK_CUDA(cudaMemsetAsync(y, 0xff, kBytes, s));
  for (int i = 0; i < kernels; ++i) affine<<<kBlocks, kThreads, 0, s>>>(y, x, k, b, kCount);
  cudaGraph_t g;
  CHECK_CUDA(cudaStreamEndCapture(s, &g));
  return g;
}

void launchAndCheck(cudaGraphExec_t exec, cudaStream_t s, const int* y, const std::vector<int>& x,
                    int k, int b, const char* what) {
  CHECK_CUDA(cudaGraphLaunch(exec, s));
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<int> out(kCount);
  CHECK_CUDA(cudaMemcpy(out.data(), y, kBytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) {
    int expected = x[i] * k + b;
    CHECK(out[i] == expected, "%s: y[%d] = %d, expected %d", what, i, out[i], expected);
  }
  std::printf("%s ok\n", what);
}

cudaGraphNode_t kernelNodeOf(cudaGraph_t g) {
  size_t n = 0;
  CHECK_CUDA(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CHECK_CUDA(cudaGraphGetNodes(g, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    CHECK_CUDA(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) return node;
  }
  FAIL("the captured graph has no kernel node");
}

}  // namespace

int main() {
  int *x, *y;
  CHECK_CUDA(cudaMalloc(&x, kBytes));
  CHECK_CUDA(cudaMalloc(&y, kBytes));
  std::vector<int> input(kCount);
  for (int i = 0; i < kCount; ++i) input[i] = i - 1000;
  CHECK_CUDA(cudaMemcpy(x, input.data(), kBytes, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraph_t first = capture(s, y, x, 2, 1, 1);
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, first, 0));
  launchAndCheck(exec, s, y, input, 2, 1, "captured graph");

  cudaGraph_t second = capture(s, y, x, 3, 7, 1);
  cudaGraphExecUpdateResultInfo info;
  std::memset(&info, 0, sizeof info);
  CHECK_CUDA(cudaGraphExecUpdate(exec, second, &info));
  CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d",
        static_cast<int>(info.result));
  launchAndCheck(exec, s, y, input, 3, 7, "cudaGraphExecUpdate");

  cudaGraph_t longer = capture(s, y, x, 5, 5, 2);
  cudaError_t refused = cudaGraphExecUpdate(exec, longer, &info);
  CHECK(refused == cudaErrorGraphExecUpdateFailure, "update to another shape returned %s",
        cudaGetErrorName(refused));
  CHECK(info.result == cudaGraphExecUpdateErrorTopologyChanged, "refused update result %d",
        static_cast<int>(info.result));
  launchAndCheck(exec, s, y, input, 3, 7, "after a refused update");

  // The executable graph's nodes are named by the graph it was instantiated from; a node of the
  // graph it was updated from names none of them (observed on driver 580.159.04, H200).
  int k = 4, b = -3, n = kCount;
  const int* xc = x;
  void* args[] = {&y, &xc, &k, &b, &n};
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(affine);
  p.gridDim = dim3(kBlocks);
  p.blockDim = dim3(kThreads);
  p.kernelParams = args;
  EXPECT_CUDA_ERROR(cudaGraphExecKernelNodeSetParams(exec, kernelNodeOf(second), &p),
                    cudaErrorInvalidValue);
  cudaGraphNode_t kernel = kernelNodeOf(first);
  CHECK_CUDA(cudaGraphExecKernelNodeSetParams(exec, kernel, &p));
  launchAndCheck(exec, s, y, input, 4, -3, "cudaGraphExecKernelNodeSetParams");

  // Disabled, the kernel leaves the memset's -1 in place.
  CHECK_CUDA(cudaGraphNodeSetEnabled(exec, kernel, 0));
  launchAndCheck(exec, s, y, input, 0, -1, "disabled kernel node");
  CHECK_CUDA(cudaGraphNodeSetEnabled(exec, kernel, 1));
  launchAndCheck(exec, s, y, input, 4, -3, "re-enabled kernel node");

  CHECK_CUDA(cudaGraphExecDestroy(exec));
  for (cudaGraph_t g : {first, second, longer}) CHECK_CUDA(cudaGraphDestroy(g));
  CHECK_CUDA(cudaStreamDestroy(s));
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(y));
  return pass();
}
