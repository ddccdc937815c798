// CUDA IPC memory and event handles: a session exports one of its allocations under a random
// token (cuIpcGetMemHandle), another session of the same tenant opens it by that token
// (cuIpcOpenMemHandle) and closes it (cuIpcCloseMemHandle); events alike (cuIpcGetEventHandle,
// cuIpcOpenEventHandle; the opened event is destroyed as any other). The tokens live in the
// server's IpcMemoryRegistry; the backend maps the memory. The memory stays charged to the
// exporting context's allocation: opening it charges nothing.
#include <cstring>

#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

uint64_t tokenHalf(const IpcMemoryRegistry::Token& token, size_t from) {
  uint64_t value = 0;
  for (size_t i = 0; i < 8; ++i) value |= uint64_t{token[from + i]} << (8 * i);
  return value;
}

int deviceOfContext(const SessionContexts& contexts, uint64_t id) {
  int device = -1;
  contexts.forEach([&](uint64_t each, const SessionContexts::Entry& entry) {
    if (each == id) device = entry.device;
  });
  return device;
}

// Publishes `exported` and answers its token (two halves in the `global` reply).
Status publishToken(IpcMemoryRegistry& registry, const IpcMemoryRegistry::Export& exported,
                    RequestContext& request) {
  IpcMemoryRegistry::Token token{};
  if (Status st = registry.publish(exported, &token); !st.ok()) return st;
  auto out = request.reply.initGlobal();
  out.setAddress(tokenHalf(token, 0));
  out.setBytes(tokenHalf(token, 8));
  return Status::success();
}

// The export the request's token names for this session: not its own (as the driver answers a
// process opening its own handle), of its tenant, of the kind asked for.
Status findExport(const IpcMemoryRegistry& registry, const SessionState& session,
                  const std::string& tenant, capnp::Data::Reader bytes,
                  IpcMemoryRegistry::Kind kind, IpcMemoryRegistry::Export* exported) {
  IpcMemoryRegistry::Token token{};
  if (bytes.size() != token.size()) {
    return Status::error(CUDA_ERROR_INVALID_HANDLE, "malformed IPC handle");
  }
  std::memcpy(token.data(), bytes.begin(), token.size());
  if (Status st = registry.find(token, tenant, kind, exported); !st.ok()) return st;
  if (exported->session == session.id) {
    return Status::error(CUDA_ERROR_INVALID_CONTEXT,
                         "an IPC handle cannot be opened by the process that exported it");
  }
  return Status::success();
}

Status ipcMem(RequestContext& request, Request::Reader r) {
  auto m = r.getIpcMem();
  uint64_t id = m.getContext();
  BackendContext* context = nullptr;
  if (Status st = request.context(id, &context); !st.ok()) return st;
  SessionState& session = request.session;
  IpcMemoryRegistry& registry = session.server.ipcMemory();
  std::string tenant = session.tenant ? session.tenant->tenant() : std::string();
  switch (m.getOp()) {
    case Request::IpcMemOp::GET: {
      IpcMemoryRegistry::Export exported{
          tenant, session.id, id, deviceOfContext(session.contexts, id), {}, 0, {}, 0, {}};
      if (Status st = context->ipcExport(m.getAddress(), &exported.allocation); !st.ok()) {
        return st;
      }
      return publishToken(registry, exported, request);
    }
    case Request::IpcMemOp::OPEN: {
      if (m.getFlags() & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) {
        return Status::error(CUDA_ERROR_INVALID_VALUE,
                             "unknown cuIpcOpenMemHandle flags " + std::to_string(m.getFlags()));
      }
      IpcMemoryRegistry::Export exported;
      if (Status st = findExport(registry, session, tenant, m.getToken(),
                                 IpcMemoryRegistry::Kind::kMemory, &exported);
          !st.ok()) {
        return st;
      }
      uint64_t address = 0;
      if (Status st = context->ipcOpen(exported.allocation, &address); !st.ok()) return st;
      auto out = request.reply.initGlobal();
      out.setAddress(address);
      out.setBytes(exported.allocation.bytes);
      return Status::success();
    }
    case Request::IpcMemOp::CLOSE:
      return context->ipcClose(m.getAddress());
    case Request::IpcMemOp::GET_EVENT: {
      IpcMemoryRegistry::Export exported{
          tenant, session.id, id, deviceOfContext(session.contexts, id), {}, m.getEvent(),
          {},     0,          {}};
      if (exported.event == 0) return Status::error(CUDA_ERROR_INVALID_HANDLE, "no event");
      if (Status st = context->ipcExportEvent(m.getEvent(), &exported.eventState); !st.ok()) {
        return st;
      }
      return publishToken(registry, exported, request);
    }
    case Request::IpcMemOp::OPEN_EVENT: {
      IpcMemoryRegistry::Export exported;
      if (Status st = findExport(registry, session, tenant, m.getToken(),
                                 IpcMemoryRegistry::Kind::kEvent, &exported);
          !st.ok()) {
        return st;
      }
      uint64_t event = 0;
      if (Status st = context->ipcOpenEvent(exported.eventState, &event); !st.ok()) return st;
      request.reply.setHandle(event);
      return Status::success();
    }
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown IPC memory operation");
}

constexpr RequestHandlerRow kRows[] = {
    {Request::IPC_MEM, ipcMem},
};

}  // namespace

std::span<const RequestHandlerRow> ipcHandlers() { return kRows; }

}  // namespace gpupool::server
