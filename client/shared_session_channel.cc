// The way libnvidia-ml.so.1 (client/nvml/) shares this process's driver session instead of opening
// a connection of its own, when both libraries are loaded in one process: it finds these three
// functions in the loaded libcuda.so.1 (dlopen RTLD_NOLOAD) and passes Cap'n Proto messages as flat
// bytes, so neither library depends on the other's internals. Only the NVML library's requests
// (status, nvmlMemoryInfo, nvmlAccounting) travel this way, and only once cuInit has connected:
// NVML never makes libcuda connect.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <string>

#include "client/client_log.h"
#include "client/driver_state.h"

using gpupool::client::DriverState;
using gpupool::client::RemoteSession;

extern "C" {

using GpupoolShareBytes = void (*)(void* context, const void* bytes, size_t size);

// 1 when this process has a driver session to `url` (a GPU_POOL_ENDPOINT entry), else 0.
__attribute__((visibility("default"))) int gpupoolShareAvailable(const char* url) {
  return url && DriverState::get().connectedSession(url) ? 1 : 0;
}

// Hands the session's Welcome Response (a flat message) to `onBytes`; 0 on success, -1 when
// there is no such session.
__attribute__((visibility("default"))) int gpupoolShareWelcome(const char* url,
                                                               GpupoolShareBytes onBytes,
                                                               void* context) {
  RemoteSession* session = url ? DriverState::get().connectedSession(url) : nullptr;
  if (!session || !onBytes) return -1;
  kj::ArrayPtr<const capnp::word> words = session->welcomeMessage();
  onBytes(context, words.begin(), words.size() * sizeof(capnp::word));
  return 0;
}

// Sends `request` (a flat Request message: status, nvmlMemoryInfo or
// nvmlAccounting) on the session and hands the
// Response to `onBytes`. Returns 0 when a Response came (whatever its result), -1 when there is no
// such session or the request is not one the NVML library sends, and the CUresult when the call
// itself failed (a lost connection).
__attribute__((visibility("default"))) int gpupoolShareCall(const char* url, const void* request,
                                                            size_t size, GpupoolShareBytes onBytes,
                                                            void* context) {
  RemoteSession* session = url ? DriverState::get().connectedSession(url) : nullptr;
  if (!session || !request || !onBytes || size % sizeof(capnp::word) != 0) return -1;
  namespace wire = gpupool::wire;
  try {
    kj::ArrayPtr<const capnp::word> words(static_cast<const capnp::word*>(request),
                                          size / sizeof(capnp::word));
    capnp::FlatArrayMessageReader message(words);
    auto asked = message.getRoot<wire::Request>();
    const char* what = asked.isStatus()           ? "status (NVML)"
                       : asked.isNvmlMemoryInfo() ? "nvmlMemoryInfo (NVML)"
                       : asked.isNvmlAccounting() ? "nvmlAccounting (NVML)"
                                                  : nullptr;
    if (!what) return -1;
    bool answered = false;
    CUresult result = session->call(
        what,
        [&](wire::Request::Builder r) {
          if (asked.isStatus()) {
            r.setStatus();
          } else if (asked.isNvmlMemoryInfo()) {
            r.setNvmlMemoryInfo(asked.getNvmlMemoryInfo());
          } else {
            r.setNvmlAccounting(asked.getNvmlAccounting());
          }
        },
        {},
        [&](wire::Response::Reader response, gpupool::client::ReplyBulk&) {
          capnp::MallocMessageBuilder copy;
          copy.setRoot(response);
          auto flat = capnp::messageToFlatArray(copy);
          onBytes(context, flat.begin(), flat.size() * sizeof(capnp::word));
          answered = true;
          return CUDA_SUCCESS;
        });
    if (answered) return 0;
    return result == CUDA_SUCCESS ? -1 : static_cast<int>(result);
  } catch (const kj::Exception& e) {
    gpupool::client::logLine(std::string("NVML shared call: malformed request: ") +
                             e.getDescription().cStr());
    return -1;
  }
}

}  // extern "C"
