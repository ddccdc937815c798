// Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64, cuStreamBatchMemOp)
// on streams of the runtime's primary context: a stream held by a wait until another stream's
// write, a kernel's store or a host copy meets it, with the work queued behind the wait ordered
// after it; every wait condition in 32 and 64 bits; batches with barriers; and the refusals.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "driver_check.h"

namespace {

__global__ void store64(unsigned long long* flag, unsigned long long value) {
  *reinterpret_cast<volatile unsigned long long*>(flag) = value;
}

// Copies `from` into `to` when it runs: what it copies shows whether it ran after the write.
__global__ void copyWord(const unsigned* from, unsigned* to) { *to = *from; }

unsigned read32(CUdeviceptr p) {
  unsigned v = 0;
  CHECK_CU(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}
unsigned long long read64(CUdeviceptr p) {
  unsigned long long v = 0;
  CHECK_CU(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}

// The stream has not gone past its wait: still not done after a pause.
void expectHeld(CUstream s, const char* what) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "%s: the stream went past its wait", what);
}

// A wait of `bits` with condition `flags` for `value` on `flag` (already holding `before`, which
// must not meet it) holds the stream until another stream writes `after` (which must).
void waitCondition(CUstream waiter, CUstream writer, CUdeviceptr flag, int bits, unsigned flags,
                   unsigned long long value, unsigned long long before, unsigned long long after,
                   const char* what) {
  if (bits == 32) {
    CHECK_CU(cuStreamWriteValue32(writer, flag, static_cast<cuuint32_t>(before), 0));
    CHECK_CU(cuStreamSynchronize(writer));
    CHECK_CU(cuStreamWaitValue32(waiter, flag, static_cast<cuuint32_t>(value), flags));
  } else {
    CHECK_CU(cuStreamWriteValue64(writer, flag, before, 0));
    CHECK_CU(cuStreamSynchronize(writer));
    CHECK_CU(cuStreamWaitValue64(waiter, flag, value, flags));
  }
  expectHeld(waiter, what);
  if (bits == 32) {
    CHECK_CU(cuStreamWriteValue32(writer, flag, static_cast<cuuint32_t>(after), 0));
  } else {
    CHECK_CU(cuStreamWriteValue64(writer, flag, after, 0));
  }
  CHECK_CU(cuStreamSynchronize(waiter));
}

}  // namespace

int main() {
  const CUdevice device = usePrimaryContext();
  int wide = 0, nor = 0, flush = 0;
  CHECK_CU(cuDeviceGetAttribute(&wide, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device));
  CHECK_CU(cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, device));
  CHECK_CU(cuDeviceGetAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, device));

  CUstream a, b;
  CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr words;  // [0] flag, [1] data, [2] copy of data, [4..5] 64-bit flag, [8..] scratch
  CHECK_CU(cuMemAlloc(&words, 64 * sizeof(unsigned)));
  CHECK_CU(cuMemsetD32(words, 0, 64));
  CUdeviceptr flag = words, data = words + 4, copied = words + 8, flag64 = words + 16;
  // Each kernel runs once before any stream is held: NVIDIA's driver loads a kernel at its first
  // launch (lazy loading, CUDA 12's default), and loading may synchronize the context, which would
  // wait for a held stream whose wait only a later launch meets.
  store64<<<1, 1>>>(reinterpret_cast<unsigned long long*>(words + 192), 0);
  copyWord<<<1, 1>>>(reinterpret_cast<const unsigned*>(words + 200),
                     reinterpret_cast<unsigned*>(words + 204));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CU(cuCtxSynchronize());

  // Ordering: the copy queued behind the wait on `a` sees the data `b` set before its write.
  CHECK_CU(cuStreamWaitValue32(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  CHECK_CU(cuMemcpyDtoDAsync(copied, data, 4, a));
  expectHeld(a, "wait for a later write");
  CHECK(read32(copied) == 0, "the copy behind the wait ran before it");
  CHECK_CU(cuMemsetD32Async(data, 42, 1, b));
  CHECK_CU(cuStreamWriteValue32(b, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  CHECK_CU(cuStreamSynchronize(a));
  CHECK(read32(copied) == 42, "copy behind the wait saw %u, expected 42", read32(copied));

  // A kernel's store meets a 64-bit wait; a kernel queued behind the wait runs after it.
  if (wide) {
    const unsigned long long big = 0x100000002ull;
    CHECK_CU(cuStreamWaitValue64(a, flag64, big, CU_STREAM_WAIT_VALUE_EQ));
    copyWord<<<1, 1, 0, a>>>(reinterpret_cast<const unsigned*>(data + 0),
                             reinterpret_cast<unsigned*>(copied));
    CHECK_CUDA(cudaGetLastError());
    expectHeld(a, "64-bit wait for a kernel's store");
    CHECK_CU(cuMemsetD32Async(data, 7, 1, b));
    store64<<<1, 1, 0, b>>>(reinterpret_cast<unsigned long long*>(flag64), big);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CU(cuStreamSynchronize(a));
    CHECK(read32(copied) == 7, "kernel behind the 64-bit wait saw %u, expected 7", read32(copied));
  }

  // A host copy meets a wait.
  CHECK_CU(cuStreamWaitValue32(a, flag, 9, CU_STREAM_WAIT_VALUE_EQ));
  expectHeld(a, "wait for a host copy");
  unsigned nine = 9;
  CHECK_CU(cuMemcpyHtoD(flag, &nine, sizeof nine));
  CHECK_CU(cuStreamSynchronize(a));

  // Every condition, with a value that does not meet it first and one that does.
  waitCondition(a, b, flag, 32, CU_STREAM_WAIT_VALUE_GEQ, 100, 99, 100, "GEQ 32");
  // GEQ is cyclic: 0x00000001 is "after" 0xfffffff0.
  waitCondition(a, b, flag, 32, CU_STREAM_WAIT_VALUE_GEQ, 0xfffffff0u, 0xffffff00u, 1,
                "GEQ 32 across wraparound");
  waitCondition(a, b, flag, 32, CU_STREAM_WAIT_VALUE_EQ, 5, 6, 5, "EQ 32");
  waitCondition(a, b, flag, 32, CU_STREAM_WAIT_VALUE_AND, 0x10, 0x0f, 0x30, "AND 32");
  if (nor) {
    waitCondition(a, b, flag, 32, CU_STREAM_WAIT_VALUE_NOR, 0xffff0000u, 0x0000ffffu, 0x0000fffeu,
                  "NOR 32");
  }
  if (wide) {
    waitCondition(a, b, flag64, 64, CU_STREAM_WAIT_VALUE_GEQ, 0x500000000ull, 0x4ffffffffull,
                  0x500000001ull, "GEQ 64");
    waitCondition(a, b, flag64, 64, CU_STREAM_WAIT_VALUE_AND, 0x8000000000000000ull, 0x7full,
                  0x8000000000000000ull, "AND 64");
    if (nor) {
      waitCondition(a, b, flag64, 64, CU_STREAM_WAIT_VALUE_NOR, ~0ull << 1, 1, 0, "NOR 64");
    }
  }

  // A batch: two writes and a barrier, then a wait that they meet, on one stream in order.
  CUstreamBatchMemOpParams ops[4] = {};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = words + 32;
  ops[0].writeValue.value = 0xabcdu;
  ops[1].operation = CU_STREAM_MEM_OP_BARRIER;
  ops[1].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
  ops[2].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[2].waitValue.address = words + 32;
  ops[2].waitValue.value = 0xabcdu;
  ops[2].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[3].writeValue.operation =
      wide ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[3].writeValue.address = words + 40;
  if (wide) {
    ops[3].writeValue.value64 = 0x123456789ull;
  } else {
    ops[3].writeValue.value = 0x12345u;
  }
  CHECK_CU(cuStreamBatchMemOp(a, 4, ops, 0));
  CHECK_CU(cuStreamSynchronize(a));
  CHECK(read32(words + 32) == 0xabcdu, "batch write 0");
  if (wide) {
    CHECK(read64(words + 40) == 0x123456789ull, "batch 64-bit write");
  } else {
    CHECK(read32(words + 40) == 0x12345u, "batch 32-bit write");
  }

  // Refusals: nothing is queued, so nothing waits.
  expectError(cuStreamWaitValue32(a, flag + 2, 0, 0), CUDA_ERROR_INVALID_VALUE,
              "misaligned 32-bit wait");
  expectError(cuStreamWriteValue64(a, flag + 4, 0, 0), CUDA_ERROR_INVALID_VALUE,
              "misaligned 64-bit write");
  expectError(cuStreamWaitValue32(a, flag, 0, 7), CUDA_ERROR_INVALID_VALUE, "unknown wait flags");
  expectError(cuStreamWriteValue32(a, flag, 0, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
              CUDA_ERROR_INVALID_VALUE, "NO_MEMORY_BARRIER in the v2 API");
  expectError(cuStreamBatchMemOp(a, 1, ops, 1), CUDA_ERROR_INVALID_VALUE, "batch flags");
  expectError(cuStreamBatchMemOp(a, 256, ops, 0), CUDA_ERROR_INVALID_VALUE, "256 operations");
  CUstreamBatchMemOpParams bogus = {};
  bogus.operation = static_cast<CUstreamBatchMemOpType>(99);
  expectError(cuStreamBatchMemOp(a, 1, &bogus, 0), CUDA_ERROR_INVALID_VALUE, "unknown operation");
  if (!flush) {  // not supported, not an invalid value (observed on driver 580.159.04, H200)
    expectError(cuStreamWaitValue32(a, flag, 0, CU_STREAM_WAIT_VALUE_FLUSH),
                CUDA_ERROR_NOT_SUPPORTED, "FLUSH where CAN_FLUSH_REMOTE_WRITES is 0");
  }
  int onHost = 0;
  expectError(
      cuStreamWaitValue32(a, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(&onHost)), 0, 0),
      CUDA_ERROR_INVALID_VALUE, "wait on unregistered host memory");
  CHECK_CU(cuStreamSynchronize(a));

  CHECK_CU(cuMemFree(words));
  CHECK_CU(cuStreamDestroy(a));
  CHECK_CU(cuStreamDestroy(b));

  // A wait nothing meets, with a kernel queued behind it, in a context the program leaves without
  // destroying: the process ends with them pending. (cuCtxDestroy would wait for them forever on
  // NVIDIA's driver, which lets a context's work finish first; so would cudart's exit handlers.)
  // Under the pool the server tears the context down when the client goes, and must not be held
  // by the wait, nor by the kernel's admission under a pool's scheduler.
  CUcontext own;
  CHECK_CU(cuCtxCreate(&own, nullptr, 0, device));
  CUstream held;
  CHECK_CU(cuStreamCreate(&held, CU_STREAM_NON_BLOCKING));
  CUdeviceptr never;
  CHECK_CU(cuMemAlloc(&never, 16));
  CHECK_CU(cuMemsetD32(never, 0, 4));
  // The kernel loads in this context before the stream is held (see the first launches above).
  copyWord<<<1, 1, 0, held>>>(reinterpret_cast<const unsigned*>(never),
                              reinterpret_cast<unsigned*>(never + 4));
  CHECK_CUDA(cudaGetLastError());
  CHECK_CU(cuStreamSynchronize(held));
  CHECK_CU(cuStreamWaitValue32(held, never, 1, CU_STREAM_WAIT_VALUE_EQ));
  CHECK_CU(cuStreamWaitValue64(held, never + 8, 1, CU_STREAM_WAIT_VALUE_GEQ));
  copyWord<<<1, 1, 0, held>>>(reinterpret_cast<const unsigned*>(never),
                              reinterpret_cast<unsigned*>(never + 4));
  CHECK_CUDA(cudaGetLastError());
  expectHeld(held, "wait never met");
  std::printf("stream memory operations: waits held across streams, kernels, host copies: ok\n");
  pass();
  std::fflush(stdout);
  std::_Exit(0);  // no exit handlers: none may wait for the held stream
}
