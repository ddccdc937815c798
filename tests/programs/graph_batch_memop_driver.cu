// Batch memory operation graph nodes (cuGraphAddBatchMemOpNode and its getters and setters, the
// generic cuGraphAddNode form, cuGraphExecBatchMemOpNodeSetParams, cuGraphExecUpdate) and stream
// memory operations captured into a graph (cudaStreamBeginCapture around cuStreamWriteValue32,
// cuStreamWaitValue32 and cuStreamBatchMemOp: since CUDA 11.7 each becomes a batch memory
// operation node). Every launch's effect is read back; a wait node holds its stream until
// another stream's write meets it.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "driver_check.h"

namespace {

unsigned read32(CUdeviceptr p) {
  unsigned v = 0;
  CHECK_CU(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}
unsigned long long read64(CUdeviceptr p) {
  unsigned long long v = 0;
  CHECK_CU(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}

CUstreamBatchMemOpParams write32(CUdeviceptr address, unsigned value) {
  CUstreamBatchMemOpParams op = {};
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  op.writeValue.address = address;
  op.writeValue.value = value;
  op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  return op;
}
CUstreamBatchMemOpParams write64(CUdeviceptr address, unsigned long long value) {
  CUstreamBatchMemOpParams op = {};
  op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  op.writeValue.address = address;
  op.writeValue.value64 = value;
  op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  return op;
}
CUstreamBatchMemOpParams wait32(CUdeviceptr address, unsigned value, unsigned flags) {
  CUstreamBatchMemOpParams op = {};
  op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  op.waitValue.address = address;
  op.waitValue.value = value;
  op.waitValue.flags = flags;
  return op;
}

CUDA_BATCH_MEM_OP_NODE_PARAMS nodeParams(CUcontext ctx,
                                         std::vector<CUstreamBatchMemOpParams>& ops) {
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = {};
  p.ctx = ctx;
  p.count = static_cast<unsigned>(ops.size());
  p.paramArray = ops.data();
  p.flags = 0;
  return p;
}

CUgraphNodeType typeOf(CUgraphNode node) {
  CUgraphNodeType type;
  CHECK_CU(cuGraphNodeGetType(node, &type));
  return type;
}

void launchAndWait(CUgraphExec exec, CUstream stream) {
  CHECK_CU(cuGraphLaunch(exec, stream));
  CHECK_CU(cuStreamSynchronize(stream));
}

}  // namespace

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));  // makes the primary context current
  CUcontext ctx;
  CHECK_CU(cuCtxGetCurrent(&ctx));
  CUdevice device;
  CHECK_CU(cuCtxGetDevice(&device));
  int wide = 0;
  CHECK_CU(cuDeviceGetAttribute(&wide, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device));

  CUstream a, b;
  CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUdeviceptr words;  // [0] x, [2..3] 64-bit y, [4] flag, [5] data, [6] copy, [8..] scratch
  CHECK_CU(cuMemAlloc(&words, 64 * sizeof(unsigned)));
  CHECK_CU(cuMemsetD32(words, 0, 64));
  // cuMemsetD32 on device memory may still be running when it returns, on the legacy stream, which
  // the non-blocking streams do not wait for: natively the first graph's write ran first and the
  // memset cleared it (driver 580.159.04, H200). The context's synchronization orders it.
  CHECK_CU(cuCtxSynchronize());
  const CUdeviceptr x = words, y = words + 8, flag = words + 16, data = words + 20,
                    copied = words + 24, z = words + 32;

  // An explicit node: two writes, read back, instantiated and run.
  CUgraph graph;
  CHECK_CU(cuGraphCreate(&graph, 0));
  std::vector<CUstreamBatchMemOpParams> ops = {write32(x, 0x1234u)};
  if (wide) ops.push_back(write64(y, 0x500000007ull));
  CUDA_BATCH_MEM_OP_NODE_PARAMS params = nodeParams(ctx, ops);
  CUgraphNode writes;
  CHECK_CU(cuGraphAddBatchMemOpNode(&writes, graph, nullptr, 0, &params));
  ops[0].writeValue.value = 0xdead;  // the node copied the array
  CHECK(typeOf(writes) == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "node type %d", typeOf(writes));
  CUDA_BATCH_MEM_OP_NODE_PARAMS got = {};
  CHECK_CU(cuGraphBatchMemOpNodeGetParams(writes, &got));
  CHECK(got.ctx == ctx && got.count == ops.size() && got.flags == 0, "params read back");
  CHECK(got.paramArray[0].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 &&
            got.paramArray[0].writeValue.address == x &&
            got.paramArray[0].writeValue.value == 0x1234u,
        "operation read back");
  size_t count = 0;
  CHECK_CU(cuGraphGetNodes(graph, nullptr, &count));
  CHECK(count == 1, "graph holds %zu nodes", count);

  CUgraphExec exec;
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  launchAndWait(exec, a);
  CHECK(read32(x) == 0x1234u, "write node wrote %#x", read32(x));
  if (wide) CHECK(read64(y) == 0x500000007ull, "64-bit write node wrote %#llx", read64(y));

  // The exec setter changes the values of later launches, not the graph's node.
  ops[0].writeValue.value = 0x5678u;
  params = nodeParams(ctx, ops);
  CHECK_CU(cuGraphExecBatchMemOpNodeSetParams(exec, writes, &params));
  launchAndWait(exec, a);
  CHECK(read32(x) == 0x5678u, "exec setter: node wrote %#x", read32(x));
  CHECK_CU(cuGraphBatchMemOpNodeGetParams(writes, &got));
  CHECK(got.paramArray[0].writeValue.value == 0x1234u, "the exec setter changed the graph's node");
  // ...but not the count or the kinds of the operations.
  std::vector<CUstreamBatchMemOpParams> other = {wait32(x, 1, CU_STREAM_WAIT_VALUE_GEQ)};
  if (wide) other.push_back(write64(y, 1));
  CUDA_BATCH_MEM_OP_NODE_PARAMS otherParams = nodeParams(ctx, other);
  expectError(cuGraphExecBatchMemOpNodeSetParams(exec, writes, &otherParams),
              CUDA_ERROR_INVALID_VALUE, "exec setter changing an operation's kind");
  std::vector<CUstreamBatchMemOpParams> more = ops;
  more.push_back(write32(z, 1));
  CUDA_BATCH_MEM_OP_NODE_PARAMS moreParams = nodeParams(ctx, more);
  expectError(cuGraphExecBatchMemOpNodeSetParams(exec, writes, &moreParams),
              CUDA_ERROR_INVALID_VALUE, "exec setter changing the count");
  launchAndWait(exec, a);
  CHECK(read32(x) == 0x5678u, "a refused exec change changed the exec");

  // cuGraphExecUpdate: new values are taken; another kind of operation is refused.
  CUgraph next;
  CHECK_CU(cuGraphCreate(&next, 0));
  ops[0].writeValue.value = 0x9abcu;
  params = nodeParams(ctx, ops);
  CUgraphNode nextNode;
  CHECK_CU(cuGraphAddBatchMemOpNode(&nextNode, next, nullptr, 0, &params));
  CUgraphExecUpdateResultInfo info = {};
  CHECK_CU(cuGraphExecUpdate(exec, next, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update result %d", info.result);
  launchAndWait(exec, a);
  CHECK(read32(x) == 0x9abcu, "updated exec wrote %#x", read32(x));
  CHECK_CU(cuGraphBatchMemOpNodeSetParams(nextNode, &otherParams));
  expectError(cuGraphExecUpdate(exec, next, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
              "cuGraphExecUpdate changing an operation's kind");
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED && info.errorNode == nextNode,
        "update result %d", info.result);
  CHECK_CU(cuGraphDestroy(next));

  // The graph's node changed by cuGraphBatchMemOpNodeSetParams: a new instantiation runs it.
  ops[0].writeValue.value = 0x4242u;
  params = nodeParams(ctx, ops);
  CHECK_CU(cuGraphBatchMemOpNodeSetParams(writes, &params));
  CUgraphExec exec2;
  CHECK_CU(cuGraphInstantiate(&exec2, graph, 0));
  launchAndWait(exec2, a);
  CHECK(read32(x) == 0x4242u, "set node wrote %#x", read32(x));
  CHECK_CU(cuGraphExecDestroy(exec2));

  // A clone holds its own copy of the node.
  CUgraph clone;
  CHECK_CU(cuGraphClone(&clone, graph));
  CUgraphNode cloned;
  CHECK_CU(cuGraphNodeFindInClone(&cloned, writes, clone));
  CHECK(typeOf(cloned) == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "cloned node type %d", typeOf(cloned));
  CHECK_CU(cuGraphBatchMemOpNodeGetParams(cloned, &got));
  CHECK(got.count == ops.size() && got.paramArray[0].writeValue.value == 0x4242u,
        "cloned node's operations");
  CHECK_CU(cuGraphDestroy(clone));
  const std::string dotFile = scratchFileName("graph_batch_memop_driver", ".dot");
  CHECK_CU(cuGraphDebugDotPrint(graph, dotFile.c_str(), 0));
  FILE* dot = std::fopen(dotFile.c_str(), "r");
  CHECK(dot != nullptr, "no dot file");
  std::fclose(dot);
  std::remove(dotFile.c_str());
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));

  // A wait node holds the launch's stream until another stream writes; the copy after it (an
  // ordinary node depending on it) sees the data written before that write. The generic
  // cuGraphAddNode makes the wait node.
  CHECK_CU(cuGraphCreate(&graph, 0));
  std::vector<CUstreamBatchMemOpParams> waitOps = {wait32(flag, 1, CU_STREAM_WAIT_VALUE_EQ)};
  CUgraphNodeParams generic = {};
  generic.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  generic.memOp.ctx = ctx;
  generic.memOp.count = 1;
  generic.memOp.paramArray = waitOps.data();
  CUgraphNode waitNode, copyNode;
  CHECK_CU(cuGraphAddNode(&waitNode, graph, nullptr, nullptr, 0, &generic));
  CUDA_MEMCPY3D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = data;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = copied;
  copy.WidthInBytes = 4;
  copy.Height = 1;
  copy.Depth = 1;
  CHECK_CU(cuGraphAddMemcpyNode(&copyNode, graph, &waitNode, 1, &copy, ctx));
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, a));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(cuStreamQuery(a) == CUDA_ERROR_NOT_READY, "the graph went past its wait node");
  CHECK(read32(copied) == 0, "the copy after the wait node ran before it");
  CHECK_CU(cuMemsetD32Async(data, 77, 1, b));
  CHECK_CU(cuStreamWriteValue32(b, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  CHECK_CU(cuStreamSynchronize(a));
  CHECK(read32(copied) == 77, "copy after the wait node saw %u, expected 77", read32(copied));
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));

  // An empty batch is a node that does nothing (its acceptance observed on driver 580.159.04,
  // H200); a graph of it launches.
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUgraphNode empty;
  params = nodeParams(ctx, ops);
  params.count = 0;
  CHECK_CU(cuGraphAddBatchMemOpNode(&empty, graph, nullptr, 0, &params));
  CHECK(typeOf(empty) == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "empty batch node type %d",
        typeOf(empty));
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, a));
  CHECK_CU(cuStreamSynchronize(a));
  CHECK_CU(cuGraphExecDestroy(exec));
  CHECK_CU(cuGraphDestroy(graph));

  // Refusals: node flags, memory that is not device memory.
  CHECK_CU(cuGraphCreate(&graph, 0));
  CUgraphNode refused;
  params = nodeParams(ctx, ops);
  params.flags = 1;
  expectError(cuGraphAddBatchMemOpNode(&refused, graph, nullptr, 0, &params),
              CUDA_ERROR_INVALID_VALUE, "a batch node with flags");
  std::vector<CUstreamBatchMemOpParams> misaligned = {write32(x + 1, 1)};
  params = nodeParams(ctx, misaligned);
  expectError(cuGraphAddBatchMemOpNode(&refused, graph, nullptr, 0, &params),
              CUDA_ERROR_INVALID_VALUE, "a misaligned write");
  CHECK_CU(cuGraphGetNodes(graph, nullptr, &count));
  CHECK(count == 0, "refused nodes were added");
  CHECK_CU(cuGraphDestroy(graph));

  // Capture: each stream memory operation on a capturing stream becomes a batch memory
  // operation node, run when the graph is launched and not before.
  CHECK_CU(cuMemsetD32(words, 0, 64));
  CHECK_CU(cuCtxSynchronize());  // the memset before the non-blocking stream's graph (see above)
  cudaStream_t capturing = reinterpret_cast<cudaStream_t>(a);
  CHECK_CUDA(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  CHECK_CU(cuStreamWriteValue32(a, x, 11, CU_STREAM_WRITE_VALUE_DEFAULT));
  CHECK_CU(cuStreamWaitValue32(a, x, 11, CU_STREAM_WAIT_VALUE_EQ));
  std::vector<CUstreamBatchMemOpParams> batch = {write32(z, 12), write32(z + 4, 13)};
  CHECK_CU(cuStreamBatchMemOp(a, static_cast<unsigned>(batch.size()), batch.data(), 0));
  cudaGraph_t captured;
  CHECK_CUDA(cudaStreamEndCapture(capturing, &captured));
  CHECK(read32(x) == 0 && read32(z) == 0, "captured operations ran during capture");
  CUgraph capturedGraph = reinterpret_cast<CUgraph>(captured);
  CHECK_CU(cuGraphGetNodes(capturedGraph, nullptr, &count));
  CHECK(count == 3, "capture made %zu nodes, expected 3", count);
  std::vector<CUgraphNode> nodes(count);
  CHECK_CU(cuGraphGetNodes(capturedGraph, nodes.data(), &count));
  for (CUgraphNode n : nodes) {
    CHECK(typeOf(n) == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "captured node type %d", typeOf(n));
  }
  cudaGraphExec_t capturedExec;
  CHECK_CUDA(cudaGraphInstantiate(&capturedExec, captured, 0));
  CHECK_CUDA(cudaGraphLaunch(capturedExec, capturing));
  CHECK_CUDA(cudaStreamSynchronize(capturing));
  CHECK(read32(x) == 11 && read32(z) == 12 && read32(z + 4) == 13, "captured graph wrote %u %u %u",
        read32(x), read32(z), read32(z + 4));
  CHECK_CUDA(cudaGraphExecDestroy(capturedExec));
  CHECK_CUDA(cudaGraphDestroy(captured));

  CHECK_CU(cuMemFree(words));
  CHECK_CU(cuStreamDestroy(a));
  CHECK_CU(cuStreamDestroy(b));
  std::printf("graph_batch_memop_driver: ok\n");
  return pass();
}
