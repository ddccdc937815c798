// Holds back the work that could stop the server's session thread at a pending host function's
// gate (server/host_gates.h), until that host function has returned.
//
// The gate's release reaches the server through the session's thread. A synchronous call, or work
// that the legacy-stream rules make the server order on that thread (work on the legacy stream
// while any gate is pending; work on a blocking stream while a gate is pending on the legacy
// stream), could block that thread behind the gate, and the release would never be read. So such
// work waits here, on the caller's thread, for the pending host functions instead: order holds,
// and nothing the gate needs waits behind it. The host-function threads themselves pass freely.
#pragma once

namespace gpupool::client {

class HostFunctionFence {
 public:
  enum class Work { kCall, kLegacyStream, kBlockingStream, kNonBlockingStream };

  // Blocks until `work` may go to the server (at once on a host-function thread).
  static void await(Work work);
  // A host function was placed in stream order (on the legacy stream or another), or has returned.
  static void opened(bool legacyStream);
  static void closed(bool legacyStream);
  // Marks the calling thread as a host-function thread for its lifetime.
  static void enterHostFunctionThread();
  static bool onHostFunctionThread();
};

}  // namespace gpupool::client
