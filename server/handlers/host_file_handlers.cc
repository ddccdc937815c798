// Pinned host memory a client on this host shares as memory files (shm sessions): share maps the
// file the client passed on the session's socket ahead of the request, mapDevice maps it into a
// context's device addresses too (CU_MEMHOSTALLOC_DEVICEMAP), release forgets it. Copies that
// name a shared file are served in copy_handlers.cc.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status hostFile(RequestContext& request, Request::Reader r) {
  auto m = r.getHostFile();
  SessionState& session = request.session;
  switch (m.getOp()) {
    case wire::Request::HostFileOpKind::SHARE:
      // The file came before this request; a session whose transport passes none finds nothing.
      return session.hostFiles.share(m.getId(), m.getBytes(), session.connection.takeFile());
    case wire::Request::HostFileOpKind::RELEASE: {
      SharedHostFiles::DeviceMapping mapped;
      if (Status st = session.hostFiles.release(m.getId(), &mapped); !st.ok()) return st;
      // A context destroyed since took its mappings with it.
      if (auto context = mapped.context ? session.contexts.find(mapped.context) : nullptr)
        return context->hostFileUnmap(mapped.address, mapped.bytes);
      return Status::success();
    }
    case wire::Request::HostFileOpKind::MAP_DEVICE: {
      std::shared_ptr<int> memfd;
      uint64_t bytes = 0;
      // Whole pages (kHostFileMapGranularity), as share() required.
      if (Status st = session.hostFiles.descriptor(m.getId(), &memfd, &bytes); !st.ok()) return st;
      BackendContext* context = nullptr;
      if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
      uint64_t address = 0;
      if (Status st = context->hostFileMap(memfd, bytes, &address); !st.ok()) return st;
      if (Status st =
              session.hostFiles.noteDeviceMapping(m.getId(), {m.getContext(), address, bytes});
          !st.ok()) {
        (void)context->hostFileUnmap(address, bytes);
        return st;
      }
      request.reply.setHandle(address);
      return Status::success();
    }
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown host file operation");
}

constexpr RequestHandlerRow kRows[] = {
    {Request::HOST_FILE, hostFile},
};

}  // namespace

std::span<const RequestHandlerRow> hostFileHandlers() { return kRows; }

}  // namespace gpupool::server
