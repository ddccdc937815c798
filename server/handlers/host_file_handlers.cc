// Pinned host memory a client on this host shares as memory files (shm sessions): share maps the
// file the client passed on the session's socket ahead of the request, release forgets it. Copies
// that name a shared file are served in copy_handlers.cc.
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
    case wire::Request::HostFileOpKind::RELEASE:
      return session.hostFiles.release(m.getId());
  }
  return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown host file operation");
}

constexpr RequestHandlerRow kRows[] = {
    {Request::HOST_FILE, hostFile},
};

}  // namespace

std::span<const RequestHandlerRow> hostFileHandlers() { return kRows; }

}  // namespace gpupool::server
