// Device-side malloc/free and new/delete: each thread allocates a buffer whose size depends on its
// index, fills it, sums it, and frees it; one block builds a linked list in device heap memory
// that a second kernel walks; and the heap limit is raised with cudaDeviceSetLimit.
#include <vector>

#include "self_check.h"

struct Node {
  int value;
  Node* next;
};

__global__ void perThread(int* sums, int* failures) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int count = 1 + t % 37;
  int* buffer = static_cast<int*>(malloc(count * sizeof(int)));
  if (buffer == nullptr) {
    atomicAdd(failures, 1);
    return;
  }
  for (int i = 0; i < count; ++i) buffer[i] = t + i;
  int sum = 0;
  for (int i = 0; i < count; ++i) sum += buffer[i];
  sums[t] = sum;
  free(buffer);
}

__device__ Node* listHead;

__global__ void buildList(int count) {
  Node* head = nullptr;
  for (int i = 0; i < count; ++i) {
    Node* node = new Node;
    node->value = i * i;
    node->next = head;
    head = node;
  }
  listHead = head;
}

__global__ void walkList(long long* sum, int* length) {
  long long total = 0;
  int n = 0;
  for (Node* node = listHead; node != nullptr;) {
    total += node->value;
    ++n;
    Node* next = node->next;
    delete node;
    node = next;
  }
  *sum = total;
  *length = n;
}

int main() {
  CHECK_CUDA(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20));
  size_t heap = 0;
  CHECK_CUDA(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
  CHECK(heap >= (16u << 20), "heap limit %zu after setting 16 MiB", heap);
  const int blocks = 4, threads = 64, n = blocks * threads;
  int *dsums, *dfailures;
  CHECK_CUDA(cudaMalloc(&dsums, n * sizeof(int)));
  CHECK_CUDA(cudaMalloc(&dfailures, sizeof(int)));
  CHECK_CUDA(cudaMemset(dfailures, 0, sizeof(int)));
  perThread<<<blocks, threads>>>(dsums, dfailures);
  CHECK_CUDA(cudaGetLastError());
  std::vector<int> sums(n);
  int failures = -1;
  CHECK_CUDA(cudaMemcpy(sums.data(), dsums, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&failures, dfailures, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(failures == 0, "%d device mallocs failed", failures);
  for (int t = 0; t < n; ++t) {
    const int count = 1 + t % 37;
    const int want = count * t + count * (count - 1) / 2;
    CHECK(sums[t] == want, "thread %d sum %d, expected %d", t, sums[t], want);
  }
  std::printf("per-thread malloc/free ok\n");

  const int count = 500;
  buildList<<<1, 1>>>(count);
  CHECK_CUDA(cudaGetLastError());
  long long* dsum;
  int* dlength;
  CHECK_CUDA(cudaMalloc(&dsum, sizeof(long long)));
  CHECK_CUDA(cudaMalloc(&dlength, sizeof(int)));
  walkList<<<1, 1>>>(dsum, dlength);
  CHECK_CUDA(cudaGetLastError());
  long long sum = 0;
  int length = 0;
  CHECK_CUDA(cudaMemcpy(&sum, dsum, sizeof(sum), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&length, dlength, sizeof(length), cudaMemcpyDeviceToHost));
  long long want = 0;
  for (int i = 0; i < count; ++i) want += static_cast<long long>(i) * i;
  CHECK(length == count && sum == want, "list of %d nodes summing to %lld, expected %d / %lld",
        length, sum, count, want);
  std::printf("linked list across kernels ok\n");
  CHECK_CUDA(cudaFree(dsums));
  CHECK_CUDA(cudaFree(dfailures));
  CHECK_CUDA(cudaFree(dsum));
  CHECK_CUDA(cudaFree(dlength));
  return pass();
}
