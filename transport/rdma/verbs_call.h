// Checked calls into libibverbs and librdmacm: one place that turns a failed call into a
// TransportError "<call>: <reason>" with the call's own error. ibv_post_send, ibv_post_recv,
// ibv_req_notify_cq and ibv_query_* return the errno value; rdma_* calls return -1 and set errno;
// constructors (ibv_alloc_pd, ibv_reg_mr, ...) return null and set errno.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "transport/connection.h"

namespace gpupool::transport::rdma {

// "<call>: <strerror(error)>".
inline std::string verbsError(const char* call, int error) {
  return std::string(call) + ": " + std::strerror(error);
}

// For calls that return the errno value (0 on success): the reason, empty on success.
inline std::string returnedError(const char* call, int ret) {
  return ret == 0 ? std::string() : verbsError(call, ret);
}

// Throws for calls that return the errno value.
inline void checkReturned(int ret, const char* call,
                          TransportError::Kind kind = TransportError::Kind::kDisconnected) {
  if (ret != 0) throw TransportError(kind, verbsError(call, ret));
}

// Throws for calls that return -1 (or any non-zero value) and set errno.
inline void checkErrno(int ret, const char* call,
                       TransportError::Kind kind = TransportError::Kind::kUnavailable) {
  if (ret != 0) throw TransportError(kind, verbsError(call, errno));
}

// Throws for calls that return null and set errno; returns the pointer otherwise.
template <typename T>
T* checkCreated(T* created, const char* call,
                TransportError::Kind kind = TransportError::Kind::kUnavailable) {
  if (!created) throw TransportError(kind, verbsError(call, errno));
  return created;
}

}  // namespace gpupool::transport::rdma
