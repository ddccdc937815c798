// Stream memory operations (cuStreamWaitValue*, cuStreamWriteValue*, cuStreamBatchMemOp): the
// operations are checked here, the same for every backend, and queued on the stream in order
// (graph_handlers.cc replays batch memory operation nodes through the same check).
// The client checks them too; this is what a client that skipped its checks meets.
#include <string>
#include <utility>
#include <vector>

#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// cuStreamBatchMemOp takes fewer than 256 operations.
constexpr size_t kMaxOps = 255;

Status refuse(const std::string& why) { return Status::error(CUDA_ERROR_INVALID_VALUE, why); }

// Why `op` cannot be served, or an empty reason. FLUSH is not supported where
// CAN_FLUSH_REMOTE_WRITES is 0 (NVIDIA's error there); anything else is an invalid value.
struct Problem {
  CUresult code = CUDA_ERROR_INVALID_VALUE;
  std::string why;
};
Problem invalid(std::string why) { return {CUDA_ERROR_INVALID_VALUE, std::move(why)}; }
Problem problem(const StreamMemOp& op) {
  constexpr const char* kNoFlush = ": the pool reports CAN_FLUSH_REMOTE_WRITES 0";
  switch (op.kind) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
      if (op.flags & CU_STREAM_WAIT_VALUE_FLUSH) {
        return {CUDA_ERROR_NOT_SUPPORTED, std::string("CU_STREAM_WAIT_VALUE_FLUSH") + kNoFlush};
      }
      if (op.flags > CU_STREAM_WAIT_VALUE_NOR) return invalid("unknown wait flags");
      break;
    }
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      if (op.flags != CU_STREAM_WRITE_VALUE_DEFAULT) return invalid("unknown write flags");
      break;
    case CU_STREAM_MEM_OP_BARRIER:
      if (op.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
          op.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU) {
        return invalid("unknown memory barrier type");
      }
      return {};
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
      return {CUDA_ERROR_NOT_SUPPORTED,
              std::string("CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES") + kNoFlush};
    default:
      return invalid("unknown operation " + std::to_string(static_cast<int>(op.kind)));
  }
  if (op.address % (op.wide() ? 8 : 4) != 0) return invalid("misaligned address");
  return {};
}

Status memOps(RequestContext& request, Request::Reader r) {
  auto m = r.getStreamMemOps();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    std::vector<StreamMemOp> ops;
    if (Status st = readStreamMemOps(m.getOps(), &ops); !st.ok()) return st;
    return context.streamMemOps(m.getStream(), ops);
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::STREAM_MEM_OPS, memOps},
};

}  // namespace

Status readStreamMemOps(capnp::List<wire::Request::StreamMemOp>::Reader list,
                        std::vector<StreamMemOp>* ops) {
  if (list.size() == 0 || list.size() > kMaxOps) {
    return refuse("a batch of stream memory operations holds 1 to 255 operations");
  }
  ops->clear();
  ops->reserve(list.size());
  for (auto op : list) {
    // Read as an int first: a value outside the enum's range must not be loaded as one.
    if (op.getKind() < CU_STREAM_MEM_OP_WAIT_VALUE_32 || op.getKind() > CU_STREAM_MEM_OP_BARRIER) {
      return refuse("stream memory operation " + std::to_string(ops->size()) +
                    ": unknown operation " + std::to_string(op.getKind()));
    }
    StreamMemOp o;
    o.kind = static_cast<CUstreamBatchMemOpType>(op.getKind());
    o.address = op.getAddress();
    o.value = op.getValue();
    o.flags = op.getFlags();
    if (Problem p = problem(o); !p.why.empty()) {
      return Status::error(p.code,
                           "stream memory operation " + std::to_string(ops->size()) + ": " + p.why);
    }
    ops->push_back(o);
  }
  return Status::success();
}

std::span<const RequestHandlerRow> memOpHandlers() { return kRows; }

}  // namespace gpupool::server
