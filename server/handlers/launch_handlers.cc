// Kernels: launches, function attributes and occupancy.
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

LaunchShape shapeOf(Request::LaunchKernel::Reader k) {
  LaunchShape s;
  s.grid = {k.getGrid().getX(), k.getGrid().getY(), k.getGrid().getZ()};
  s.block = {k.getBlock().getX(), k.getBlock().getY(), k.getBlock().getZ()};
  s.sharedBytes = k.getSharedBytes();
  s.cooperative = k.getCooperative();
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
    int blocks = 0;
    Status st = context.occupancyMaxActiveBlocks(o.getFunction(), o.getBlockSize(),
                                                 o.getDynamicSharedBytes(), o.getFlags(), &blocks);
    if (st.ok()) request.reply.setValue(blocks);
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
