// The raw-wire baselines `gpupool bench` measures the driver calls against: requests that only
// move bytes, so their cost is the transport's alone.
#include <algorithm>

#include "server/handlers/bulk_placement.h"
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// A ping echoes its bulk from one buffer: bounded so a client cannot make the server allocate
// whatever a frame header claims.
constexpr uint64_t kMaxPingBytes = 64ull << 20;
constexpr uint64_t kMaxSourceBytes = 1ull << 30;

// The bulk comes back unchanged (latency).
Status ping(RequestContext& request, Request::Reader) {
  uint64_t bytes = request.bulkBytes();
  if (bytes > kMaxPingBytes) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "ping bulk over the 64 MiB limit");
  }
  ScratchBuffer& staging = request.session.staging;
  staging.resize(bytes);
  request.receiveBulk(staging.data(), bytes);
  request.replyBulk.push_back({staging.data(), staging.size()});
  return Status::success();
}

// The bytes are read and dropped (throughput towards the server).
Status sink(RequestContext& request, Request::Reader) {
  uint64_t left = request.bulkBytes();
  ScratchBuffer& staging = request.session.staging;
  staging.resize(std::min(left, kBulkChunkBytes));
  while (left) {
    uint64_t n = std::min(left, kBulkChunkBytes);
    request.receiveBulk(staging.data(), n);
    left -= n;
  }
  return Status::success();
}

// As many bytes as asked come back (throughput from the server).
Status source(RequestContext& request, Request::Reader r) {
  uint64_t bytes = r.getSource();
  if (bytes > kMaxSourceBytes) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "source request too large");
  }
  ScratchBuffer& staging = request.session.staging;
  staging.resize(bytes);
  request.replyBulk.push_back({staging.data(), bytes});
  return Status::success();
}

constexpr RequestHandlerRow kRows[] = {
    {Request::PING, ping},
    {Request::SINK, sink},
    {Request::SOURCE, source},
};

}  // namespace

std::span<const RequestHandlerRow> wireBaselineHandlers() { return kRows; }

}  // namespace gpupool::server
