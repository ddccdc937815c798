// Where RDMA tests can run: a usable verbs device plus an address rdma_cm can resolve to it.
#pragma once

#include <cstdlib>
#include <string>

#include "transport/rdma/rdma_transport.h"

namespace gpupool::transport::testing {

// The IP address to listen and connect on: GPU_POOL_RDMA_TEST_ADDR, else RDMA_VM_IP (set inside
// ../shared/rdma-vm). rdma_cm cannot use loopback addresses, so there is no default.
inline std::string rdmaTestAddress() {
  for (const char* name : {"GPU_POOL_RDMA_TEST_ADDR", "RDMA_VM_IP"}) {
    if (const char* v = std::getenv(name); v && *v) return v;
  }
  return {};
}

// Empty when RDMA tests can run here, else why not (for GTEST_SKIP).
inline std::string rdmaSkipReason() {
  std::string reason = rdmaUnavailableReason();
  if (!reason.empty()) return reason;
  if (rdmaTestAddress().empty()) {
    return "no address bound to an RDMA device: set GPU_POOL_RDMA_TEST_ADDR (rdma_cm cannot use "
           "loopback)";
  }
  return {};
}

}  // namespace gpupool::transport::testing

#define SKIP_WITHOUT_RDMA()                                                           \
  do {                                                                                \
    std::string skipReason = ::gpupool::transport::testing::rdmaSkipReason();         \
    if (!skipReason.empty()) GTEST_SKIP() << "rdma tests need verbs: " << skipReason; \
  } while (0)
