// Kernels: launches, function attributes and occupancy.
#include <algorithm>
#include <array>
#include <cstdint>

#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// A cluster dimension as the driver takes it: 0 (unset) is 1.
std::array<uint32_t, 3> dim3(wire::Dim3::Reader d) {
  return {std::max(d.getX(), 1u), std::max(d.getY(), 1u), std::max(d.getZ(), 1u)};
}

LaunchShape shapeOf(Request::LaunchKernel::Reader k) {
  LaunchShape s;
  s.grid = {k.getGrid().getX(), k.getGrid().getY(), k.getGrid().getZ()};
  s.block = {k.getBlock().getX(), k.getBlock().getY(), k.getBlock().getZ()};
  s.sharedBytes = k.getSharedBytes();
  s.cooperative = k.getCooperative();
  if (k.hasCluster()) s.cluster = dim3(k.getCluster());
  return s;
}

Status launch(RequestContext& request, Request::Reader r) {
  auto k = r.getLaunchKernel();
  return request.withContext(k.getContext(), [&](BackendContext& context) {
    auto params = k.getParams();
    return context.launch(k.getFunction(), shapeOf(k), k.getStream(),
                          std::span<const uint8_t>(params.begin(), params.size()));
  });
}

Status setAttribute(RequestContext& request, Request::Reader r) {
  auto f = r.getFuncSetAttribute();
  return request.withContext(f.getContext(), [&](BackendContext& context) {
    return context.funcSetAttribute(f.getFunction(), f.getAttribute(), f.getValue());
  });
}

Status occupancy(RequestContext& request, Request::Reader r) {
  auto o = r.getOccupancy();
  return request.withContext(o.getContext(), [&](BackendContext& context) {
    int value = 0;
    Status st = Status::success();
    if (o.getQuery() == wire::Request::OccupancyQuery::BLOCKS_PER_MULTIPROCESSOR) {
      st = context.occupancyMaxActiveBlocks(o.getFunction(), o.getBlockSize(),
                                            o.getDynamicSharedBytes(), o.getFlags(), &value);
    } else {
      if (o.getDynamicSharedBytes() > UINT32_MAX) {
        return Status::error(CUDA_ERROR_INVALID_VALUE, "shared memory size over 4 GiB");
      }
      LaunchShape shape;
      shape.grid = dim3(o.getGrid());
      shape.block = dim3(o.getBlock());
      shape.sharedBytes = static_cast<uint32_t>(o.getDynamicSharedBytes());
      shape.cluster = dim3(o.getCluster());
      st = context.occupancyClusters(
          o.getFunction(), shape,
          o.getQuery() == wire::Request::OccupancyQuery::POTENTIAL_CLUSTER_SIZE, &value);
    }
    if (st.ok()) request.reply.setValue(value);
    return st;
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::LAUNCH_KERNEL, launch},
    {Request::FUNC_SET_ATTRIBUTE, setAttribute},
    {Request::OCCUPANCY, occupancy},
};

}  // namespace

std::span<const RequestHandlerRow> launchHandlers() { return kRows; }

}  // namespace gpupool::server
