// Checks shared by the self-checking CUDA test programs.
//
// Every program prints what it verified and ends with "PASS" (exit 0); the first failed check
// prints "FAIL: <what>" with the CUDA error name and exits 1. Nothing here is gpupool-specific:
// the programs must behave identically on a real GPU.
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Fails the program with a formatted message.
#define FAIL(...)                                     \
  do {                                                \
    std::printf("FAIL: %s:%d: ", __FILE__, __LINE__); \
    std::printf(__VA_ARGS__);                         \
    std::printf("\n");                                \
    std::fflush(stdout);                              \
    std::exit(1);                                     \
  } while (0)

// Fails unless a runtime API call returns cudaSuccess.
#define CHECK_CUDA(call)                                                       \
  do {                                                                         \
    const cudaError_t check_cuda_status_ = (call);                             \
    if (check_cuda_status_ != cudaSuccess) {                                   \
      FAIL("%s returned %s (%s)", #call, cudaGetErrorName(check_cuda_status_), \
           cudaGetErrorString(check_cuda_status_));                            \
    }                                                                          \
  } while (0)

// Fails unless a runtime API call returns exactly `expected`.
#define EXPECT_CUDA_ERROR(call, expected)                                              \
  do {                                                                                 \
    const cudaError_t check_cuda_status_ = (call);                                     \
    if (check_cuda_status_ != (expected)) {                                            \
      FAIL("%s returned %s, expected %s", #call, cudaGetErrorName(check_cuda_status_), \
           cudaGetErrorName(expected));                                                \
    }                                                                                  \
  } while (0)

// Fails unless `condition` holds.
#define CHECK(condition, ...)            \
  do {                                   \
    if (!(condition)) FAIL(__VA_ARGS__); \
  } while (0)

inline int pass() {
  std::printf("PASS\n");
  return 0;
}

// A file name in the working directory that is this process's alone: tests run several programs
// (and the same program on several backends) at once from one directory.
inline std::string scratchFileName(const char* stem, const char* extension) {
  return std::string(stem) + "." + std::to_string(getpid()) + extension;
}
