// Host functions in stream order through the runtime: cudaLaunchHostFunc and
// cudaStreamAddCallback interleaved with kernels and copies on two streams (one blocking, one
// non-blocking) and on the legacy default stream. Checks that each function sees the results of
// the work before it, that work after it sees what it wrote into pinned memory, that functions on
// one stream run in order, and that the launching thread does not wait for the function: the
// first one waits for a flag the main thread sets only after cudaLaunchHostFunc has returned; and
// that functions placed by one thread while another frees memory all run, with no call failing.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "self_check.h"

namespace {

constexpr int kCount = 1 << 14;
constexpr size_t kBytes = kCount * sizeof(int);
constexpr unsigned kThreads = 256;
constexpr unsigned kBlocks = (kCount + kThreads - 1) / kThreads;

__global__ void fill(int* out, int count, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = base + 3 * i;
}

__global__ void addOne(const int* in, int* out, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = in[i] + 1;
}

// What a host function found and did; checked on the main thread afterwards (a host function
// must not call CUDA, and failing inside one would hide which check failed).
struct Step {
  const int* in = nullptr;               // pinned: filled by the copy before the function
  int* out = nullptr;                    // pinned: copied to the device after the function
  int base = 0;                          // in[i] must be base + 3i
  int add = 0;                           // out[i] = in[i] + add
  std::atomic<bool>* release = nullptr;  // when set, wait for it first
  std::atomic<int>* order = nullptr;
  int position = -1;    // order value when it ran
  int wrongInput = -1;  // first element that did not hold what the earlier work wrote
  bool waitedTooLong = false;
  bool ran = false;
  cudaStream_t expectedStream = nullptr;
  cudaStream_t seenStream = nullptr;
  cudaError_t seenStatus = cudaErrorUnknown;
};

void runStep(Step* s) {
  if (s->release) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!s->release->load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        s->waitedTooLong = true;  // the launching thread is waiting for this function
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (int i = 0; i < kCount && s->in; ++i) {
    if (s->in[i] != s->base + 3 * i) {
      s->wrongInput = i;
      break;
    }
  }
  for (int i = 0; i < kCount && s->out; ++i) s->out[i] = s->in[i] + s->add;
  s->position = s->order->fetch_add(1);
  s->ran = true;
}

void CUDART_CB hostFunction(void* data) { runStep(static_cast<Step*>(data)); }

void CUDART_CB countRun(void* data) { static_cast<std::atomic<int>*>(data)->fetch_add(1); }

void CUDART_CB streamCallback(cudaStream_t stream, cudaError_t status, void* data) {
  auto* s = static_cast<Step*>(data);
  s->seenStream = stream;
  s->seenStatus = status;
  runStep(s);
}

void checkStep(const Step& s, const char* what) {
  CHECK(s.ran, "%s did not run", what);
  CHECK(!s.waitedTooLong, "%s: the launching thread waited for the host function", what);
  CHECK(s.wrongInput < 0, "%s saw element %d before the work ahead of it had written it", what,
        s.wrongInput);
}

int* pinned() {
  int* p = nullptr;
  CHECK_CUDA(cudaMallocHost(&p, kBytes));
  return p;
}

int* device() {
  int* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, kBytes));
  return p;
}

void expectResult(const int* host, int base, int add, const char* what) {
  for (int i = 0; i < kCount; ++i) {
    int want = base + 3 * i + add + 1;
    CHECK(host[i] == want, "%s: element %d is %d, expected %d (the host function's output)", what,
          i, host[i], want);
  }
}

}  // namespace

int main() {
  cudaStream_t s1 = nullptr, s2 = nullptr;
  CHECK_CUDA(cudaStreamCreate(&s1));
  CHECK_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  int *in1 = pinned(), *out1 = pinned(), *res1 = pinned();
  int *in2 = pinned(), *out2 = pinned(), *res2 = pinned();
  int *a1 = device(), *b1 = device(), *c1 = device();
  int *a2 = device(), *b2 = device(), *c2 = device();
  std::atomic<int> order{0};
  std::atomic<bool> release{false};

  // Stream 1: kernel, copy to pinned memory, then a host function that waits for the main thread.
  fill<<<kBlocks, kThreads, 0, s1>>>(a1, kCount, 5);
  CHECK_CUDA(cudaMemcpyAsync(in1, a1, kBytes, cudaMemcpyDeviceToHost, s1));
  // Stream 2 likewise, with a stream callback.
  fill<<<kBlocks, kThreads, 0, s2>>>(a2, kCount, 1000);
  CHECK_CUDA(cudaMemcpyAsync(in2, a2, kBytes, cudaMemcpyDeviceToHost, s2));

  Step first{in1, out1, 5, 7, &release, &order};
  CHECK_CUDA(cudaLaunchHostFunc(s1, hostFunction, &first));
  // A second function on stream 1 must run after the first has returned.
  Step second{nullptr, nullptr, 0, 0, nullptr, &order};
  CHECK_CUDA(cudaLaunchHostFunc(s1, hostFunction, &second));
  Step callback{in2, out2, 1000, 11, nullptr, &order};
  callback.expectedStream = s2;
  CHECK_CUDA(cudaStreamAddCallback(s2, streamCallback, &callback, 0));
  // Kernels queued behind the functions, before the first is allowed to finish.
  fill<<<kBlocks, kThreads, 0, s2>>>(c2, kCount, 0);
  // Everything above returned while the first function is still waiting for this flag.
  CHECK(!first.ran, "the first host function finished before the main thread let it");
  release.store(true);

  // Work after the functions reads what they wrote into pinned memory.
  CHECK_CUDA(cudaMemcpyAsync(b1, out1, kBytes, cudaMemcpyHostToDevice, s1));
  addOne<<<kBlocks, kThreads, 0, s1>>>(b1, c1, kCount);
  CHECK_CUDA(cudaMemcpyAsync(res1, c1, kBytes, cudaMemcpyDeviceToHost, s1));
  CHECK_CUDA(cudaMemcpyAsync(b2, out2, kBytes, cudaMemcpyHostToDevice, s2));
  addOne<<<kBlocks, kThreads, 0, s2>>>(b2, c2, kCount);
  CHECK_CUDA(cudaMemcpyAsync(res2, c2, kBytes, cudaMemcpyDeviceToHost, s2));
  CHECK_CUDA(cudaStreamSynchronize(s1));
  CHECK_CUDA(cudaStreamSynchronize(s2));

  checkStep(first, "cudaLaunchHostFunc on a blocking stream");
  checkStep(second, "the second cudaLaunchHostFunc");
  checkStep(callback, "cudaStreamAddCallback on a non-blocking stream");
  CHECK(second.position > first.position, "host functions on one stream ran out of order (%d, %d)",
        first.position, second.position);
  CHECK(callback.seenStream == s2, "the callback got another stream");
  CHECK(callback.seenStatus == cudaSuccess, "the callback got status %s",
        cudaGetErrorName(callback.seenStatus));
  expectResult(res1, 5, 7, "stream 1");
  expectResult(res2, 1000, 11, "stream 2");
  std::printf("host functions ran in stream order on two streams; results checked\n");

  // The legacy default stream: the function waits for the kernel and copy before it, and
  // cudaDeviceSynchronize waits for the function.
  fill<<<kBlocks, kThreads>>>(a1, kCount, 77);
  CHECK_CUDA(cudaMemcpyAsync(in1, a1, kBytes, cudaMemcpyDeviceToHost, 0));
  Step legacy{in1, out1, 77, 1, nullptr, &order};
  CHECK_CUDA(cudaLaunchHostFunc(0, hostFunction, &legacy));
  CHECK_CUDA(cudaMemcpyAsync(b1, out1, kBytes, cudaMemcpyHostToDevice, 0));
  addOne<<<kBlocks, kThreads>>>(b1, c1, kCount);
  CHECK_CUDA(cudaMemcpy(res1, c1, kBytes, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaDeviceSynchronize());
  checkStep(legacy, "cudaLaunchHostFunc on the legacy stream");
  expectResult(res1, 77, 1, "legacy stream");
  std::printf("a host function on the legacy default stream ran in order\n");

  // One thread places host functions while another allocates and frees (cudaFree waits for the
  // device): every call must go on in order with the functions placed beside it, none may fail and
  // every function must run (the client orders the two on the wire: host_function_fence.h).
  {
    constexpr int kRounds = 300;
    std::atomic<int> ran{0};
    std::thread placer([&] {
      for (int i = 0; i < kRounds; ++i) CHECK_CUDA(cudaLaunchHostFunc(s2, countRun, &ran));
    });
    for (int i = 0; i < kRounds; ++i) {
      int* p = nullptr;
      CHECK_CUDA(cudaMalloc(&p, 256));
      CHECK_CUDA(cudaFree(p));
    }
    placer.join();
    CHECK_CUDA(cudaStreamSynchronize(s2));
    CHECK(ran.load() == kRounds, "%d of %d host functions ran", ran.load(), kRounds);
    std::printf("%d host functions placed beside %d frees on another thread all ran\n", kRounds,
                kRounds);
  }

  EXPECT_CUDA_ERROR(cudaLaunchHostFunc(s1, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_CUDA_ERROR(cudaStreamAddCallback(s1, streamCallback, &callback, 1), cudaErrorInvalidValue);

  for (int* p : {in1, out1, res1, in2, out2, res2}) CHECK_CUDA(cudaFreeHost(p));
  for (int* p : {a1, b1, c1, a2, b2, c2}) CHECK_CUDA(cudaFree(p));
  CHECK_CUDA(cudaStreamDestroy(s1));
  CHECK_CUDA(cudaStreamDestroy(s2));
  return pass();
}
