// The pool's own requests: status for `gpupool status`/`top`, and a Hello sent twice.
#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

Status helloAgain(RequestContext&, Request::Reader) {
  return Status::error(CUDA_ERROR_INVALID_VALUE, "Hello sent twice");
}

Status status(RequestContext& request, Request::Reader) {
  request.session.server.fillStatus(request.reply.initStatus());
  return Status::success();
}

constexpr RequestHandlerRow kRows[] = {
    {Request::HELLO, helloAgain},
    {Request::STATUS, status},
};

}  // namespace

std::span<const RequestHandlerRow> poolHandlers() { return kRows; }

}  // namespace gpupool::server
