// The CUDA IPC tokens of one server (cuIpcGetMemHandle, cuIpcOpenMemHandle; cuIpcGetEventHandle,
// cuIpcOpenEventHandle; cuMemExportToShareableHandle, cuMemImportFromShareableHandle): each names
// an allocation, an event or a physical allocation one session exported, for the sessions of the
// same tenant to open. A token is 128
// random bits from the kernel's CSPRNG, the only secret a CUipcMemHandle carries; a token that is
// unknown, of another tenant, or whose exporter is gone opens nothing. Shared by every session;
// thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "server/backend.h"

namespace gpupool::server {

class IpcMemoryRegistry {
 public:
  using Token = std::array<uint8_t, 16>;

  // What a token names; a token opens only as its own kind.
  enum class Kind { kMemory, kEvent, kVmmAllocation };

  struct Export {
    std::string tenant;  // empty when the server runs without tenants
    uint64_t session = 0;
    uint64_t context = 0;  // the exporting context's handle in its session
    int device = 0;
    IpcExportedAllocation allocation;
    uint64_t event = 0;  // an event's handle in the exporting context; 0 for an allocation
    IpcExportedEvent eventState;
    uint64_t vmmHandle = 0;  // a physical allocation's handle in the exporting context, or 0
    VmmExportedAllocation vmm;

    Kind kind() const {
      return vmmHandle != 0 ? Kind::kVmmAllocation : event != 0 ? Kind::kEvent : Kind::kMemory;
    }
  };

  // The token for `exported`: the one handed out before for the same allocation, else a new one.
  // CUDA_ERROR_OUT_OF_MEMORY when the session holds kMaxTokensPerSession already.
  Status publish(const Export& exported, Token* token);
  // The export `token` names for a session of `tenant`: CUDA_ERROR_INVALID_HANDLE when there is
  // none (unknown, forged, of another tenant, or its session ended), which says nothing about
  // which.
  // `kind` says which kind the caller opens: a memory token never opens as an event, nor the
  // reverse.
  Status find(const Token& token, const std::string& tenant, Kind kind, Export* exported) const;
  // The session ended, or one of its contexts was destroyed: its tokens open nothing any more.
  void withdrawSession(uint64_t session);
  void withdrawContext(uint64_t session, uint64_t context);
  // The exporter destroyed the event: its token opens nothing any more.
  void withdrawEvent(uint64_t session, uint64_t context, uint64_t event);

  static constexpr size_t kMaxTokensPerSession = 1 << 16;

 private:
  mutable std::mutex mutex_;
  std::map<Token, Export> exports_;
};

}  // namespace gpupool::server
