#include "server/ipc_memory_registry.h"

#include <sys/random.h>

#include <cerrno>

namespace gpupool::server {
namespace {

bool randomToken(IpcMemoryRegistry::Token* token) {
  size_t filled = 0;
  while (filled < token->size()) {
    ssize_t got = getrandom(token->data() + filled, token->size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    filled += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

Status IpcMemoryRegistry::publish(const Export& exported, Token* token) {
  std::lock_guard lock(mutex_);
  size_t held = 0;
  for (const auto& [t, e] : exports_) {
    if (e.session != exported.session) continue;
    ++held;
    // cuIpcGetMemHandle may be called many times on one allocation: the same handle each time.
    // (And cuIpcGetEventHandle on one event: the same handle each time.)
    if (e.context == exported.context && e.event == exported.event &&
        e.vmmHandle == exported.vmmHandle && e.allocation.address == exported.allocation.address &&
        e.allocation.generation == exported.allocation.generation) {
      *token = t;
      return Status::success();
    }
  }
  if (held >= kMaxTokensPerSession) {
    return Status::error(CUDA_ERROR_OUT_OF_MEMORY,
                         "this session exported " + std::to_string(held) + " IPC handles already");
  }
  do {
    if (!randomToken(token)) {
      return Status::error(CUDA_ERROR_OPERATING_SYSTEM, "no random bytes for an IPC handle");
    }
  } while (exports_.count(*token));
  exports_[*token] = exported;
  return Status::success();
}

Status IpcMemoryRegistry::find(const Token& token, const std::string& tenant, Kind kind,
                               Export* exported) const {
  std::lock_guard lock(mutex_);
  auto it = exports_.find(token);
  if (it == exports_.end() || it->second.tenant != tenant || it->second.kind() != kind) {
    return Status::error(
        CUDA_ERROR_INVALID_HANDLE,
        kind == Kind::kEvent    ? "no exported event for this IPC handle on this server"
        : kind == Kind::kMemory ? "no exported allocation for this IPC handle on this server"
                                : "no exported allocation for this shareable handle on this server "
                                  "(of this tenant, its exporting session still connected)");
  }
  *exported = it->second;
  return Status::success();
}

void IpcMemoryRegistry::withdrawSession(uint64_t session) {
  std::lock_guard lock(mutex_);
  std::erase_if(exports_, [&](const auto& entry) { return entry.second.session == session; });
}

void IpcMemoryRegistry::withdrawContext(uint64_t session, uint64_t context) {
  std::lock_guard lock(mutex_);
  std::erase_if(exports_, [&](const auto& entry) {
    return entry.second.session == session && entry.second.context == context;
  });
}

void IpcMemoryRegistry::withdrawEvent(uint64_t session, uint64_t context, uint64_t event) {
  std::lock_guard lock(mutex_);
  std::erase_if(exports_, [&](const auto& entry) {
    return entry.second.session == session && entry.second.context == context &&
           entry.second.event == event;
  });
}

}  // namespace gpupool::server
