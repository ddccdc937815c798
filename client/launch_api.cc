// Kernel launches: parameters are packed by the layout the server reported for the function, so
// the server gets one flat parameter block, exactly as the kernel declares it.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "launch_checks.h"
#include "module_resolution.h"
#include "raw_enum.h"
#include "stream_capture.h"
#include "texture_references.h"

using namespace gpupool::client;

namespace gpupool::client {

CUresult packParams(const FunctionObject& f, void** kernelParams, void** extra,
                    std::vector<uint8_t>* block) {
  block->assign(f.paramBytes(), 0);
  if (kernelParams) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (!kernelParams[i]) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(block->data() + f.params[i].first, kernelParams[i], f.params[i].second);
    }
    return CUDA_SUCCESS;
  }
  if (extra) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        buffer = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = *static_cast<size_t*>(extra[i + 1]);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (!buffer || size < block->size()) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(block->data(), buffer, block->size());
    return CUDA_SUCCESS;
  }
  return f.params.empty() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

namespace {
// The driver's answer to an impossible launch shape (cudart turns it into
// cudaErrorInvalidConfiguration); see server/backends/emu/emu_context.cc.
constexpr CUresult kInvalidLaunchConfiguration = static_cast<CUresult>(9);
}  // namespace

CUresult checkShape(const FunctionObject& f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                    unsigned by, unsigned bz, unsigned sharedBytes) {
  const DeviceSnapshot* d = DriverState::get().device(f.module->context->device);
  auto attr = [&](CUdevice_attribute a) { return static_cast<uint64_t>(d->attribute(a)); };
  auto fattr = [&](CUfunction_attribute a) -> uint64_t {
    return static_cast<size_t>(a) < f.attributes.size() ? static_cast<uint64_t>(f.attributes[a])
                                                        : 0;
  };
  uint64_t threads = uint64_t{bx} * by * bz;
  uint64_t maxThreads = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (fattr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) {
    maxThreads = std::min(maxThreads, fattr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  }
  // More threads than any block of the device may have is CUDA_ERROR_INVALID_VALUE, not an invalid
  // configuration (observed on driver 580.159.04, H200: a block of 2048 threads).
  if (threads > attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) return CUDA_ERROR_INVALID_VALUE;
  if (threads == 0 || gx == 0 || gy == 0 || gz == 0 || threads > maxThreads ||
      bx > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X) ||
      by > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y) ||
      bz > attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z) ||
      gx > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X) ||
      gy > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y) ||
      gz > attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)) {
    return kInvalidLaunchConfiguration;
  }
  if (f.attributes.size() > CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
      sharedBytes > fattr(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)) {
    return kInvalidLaunchConfiguration;
  }
  return CUDA_SUCCESS;
}

CUresult checkKernelAttribute(const char* who, int id, const CUlaunchAttributeValue& value,
                              bool* cooperative) {
  auto refuse = [&](const std::string& why) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, std::string(who) + ": " + why);
  };
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      if (value.memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT &&
          value.memSyncDomain != CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE) {
        return refuse("unknown memory sync domain");
      }
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: {
      const CUaccessPolicyWindow& w = value.accessPolicyWindow;
      if (!(w.hitRatio >= 0.0f && w.hitRatio <= 1.0f) ||
          w.missProp == CU_ACCESS_PROPERTY_PERSISTING) {
        return refuse("invalid access-policy window");
      }
      return CUDA_SUCCESS;
    }
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
      *cooperative = value.cooperative != 0;
      return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
      if (value.clusterDim.x > 1 || value.clusterDim.y > 1 || value.clusterDim.z > 1) {
        return refuse(
            "thread-block clusters larger than 1x1x1 are served only on a device that reports "
            "CLUSTER_LAUNCH");
      }
      return CUDA_SUCCESS;
    default:
      return refuse("launch attribute " + std::to_string(id) + " is not supported");
  }
}

}  // namespace gpupool::client

namespace {

// A cooperative launch (cuLaunchCooperativeKernel) is a call, not a posted request: the server
// answers at once whether every block fits on the device (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
// otherwise), as the driver does. Captured, it is a kernel node with the COOPERATIVE attribute.
CUresult launch(CUfunction h, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned sharedBytes, CUstream stream, void** kernelParams,
                void** extra, bool cooperative = false,
                const CUlaunchAttributeValue* cluster = nullptr,
                const CUlaunchAttributeValue* preferred = nullptr) {
  CaptureScope capturing;  // a capturing stream takes the launch as a node
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  if (CUresult r = resolveStream(stream, &ctx, &s); r != CUDA_SUCCESS) return r;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, ctx, &f); r != CUDA_SUCCESS) return r;
  if (f->module->context != ctx) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = checkShape(*f, gx, gy, gz, bx, by, bz, sharedBytes); r != CUDA_SUCCESS) {
    return r;
  }
  if (cluster) {
    // Only a device that runs clusters takes one, as a call: its driver answers at once whether
    // the cluster fits the grid and the device (CUDA_ERROR_INVALID_CLUSTER_SIZE). Captured, the
    // node carries it, checked against the grid as cuGraphKernelNodeSetAttribute checks it.
    const DeviceSnapshot* d = DriverState::get().device(ctx->device);
    if (!d->attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        "cuLaunchKernelEx: a thread-block cluster on a device without cluster "
                        "launch (it reports CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0)");
    }
  }
  if (CUresult r = bindTextureReferences(f); r != CUDA_SUCCESS) return r;
  std::vector<uint8_t> params;
  if (CUresult r = packParams(*f, kernelParams, extra, &params); r != CUDA_SUCCESS) return r;
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (CUresult r = CUDA_SUCCESS; captureKernel(stream, f, grid, block, sharedBytes, params,
                                               cooperative, cluster, preferred, &r)) {
    return r;
  }
  auto build = [&](wire::Request::Builder b) {
    auto k = b.initLaunchKernel();
    k.setContext(ctx->remote);
    k.setFunction(f->remote);
    k.getGrid().setX(gx);
    k.getGrid().setY(gy);
    k.getGrid().setZ(gz);
    k.getBlock().setX(bx);
    k.getBlock().setY(by);
    k.getBlock().setZ(bz);
    k.setSharedBytes(sharedBytes);
    k.setStream(s);
    k.setParams(kj::arrayPtr(params.data(), params.size()));
    k.setCooperative(cooperative);
    if (cluster) {
      k.getCluster().setX(cluster->clusterDim.x);
      k.getCluster().setY(cluster->clusterDim.y);
      k.getCluster().setZ(cluster->clusterDim.z);
    }
  };
  if (cluster) return ctx->server->call("cuLaunchKernelEx", build);
  if (cooperative) return ctx->server->call("cuLaunchCooperativeKernel", build);
  return ctx->server->post("cuLaunchKernel", build);
}

CUresult refuse(const char* why) {
  return refuseCall(CUDA_ERROR_INVALID_VALUE, std::string("cuLaunchKernelEx: ") + why);
}

// An event that a launch attribute asks to be triggered: it must be this context's and, as the
// driver requires, made without timing.
CUresult launchEvent(CUevent h, ContextObject* ctx, EventObject** out) {
  EventObject* e = asEvent(h);
  if (!e) return refuse("the attribute's event is not a valid event");
  if (e->context != ctx) return refuse("the attribute's event belongs to another context");
  if (!(e->flags & CU_EVENT_DISABLE_TIMING)) {
    return refuse("the attribute's event must be created with CU_EVENT_DISABLE_TIMING");
  }
  *out = e;
  return CUDA_SUCCESS;
}

// cuLaunchKernelEx: each attribute is honoured or the launch is refused, never dropped.
// - Hints that change speed, not results (priority, access-policy window, memory sync domains)
//   are accepted; a 1x1x1 cluster is an ordinary launch.
// - Programmatic stream serialization is served as full serialization, a stricter order than the
//   one it allows.
// - The programmatic and launch-completion events are recorded when the kernel has completed,
//   which is after the point either one names: whatever waits for them waits at least as long.
// - A cooperative launch is served as cuLaunchCooperativeKernel. A cluster larger than 1x1x1 goes
//   to the server's driver as cuLaunchKernelEx with the cluster's shape, on a device that reports
//   CLUSTER_LAUNCH (refused elsewhere); captured, the node carries it.
// - A preferred cluster (PREFERRED_CLUSTER_DIMENSION) is checked as the driver documents it (a
//   multiple of the regular cluster that divides the grid, the same in z) and served as the
//   regular clusters, which the driver may always fall back to ("best effort"); without a regular
//   cluster it has no effect, as documented. Captured, the node keeps it.
CUresult launchEx(const CUlaunchConfig* config, CUfunction h, void** kernelParams, void** extra) {
  if (!config || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  uint64_t s = 0;
  {
    // On a capturing stream launch() below takes the kernel as a node, and the completion events
    // become event-record nodes after it.
    CaptureScope capturing;
    if (CUresult r = resolveStream(config->hStream, &ctx, &s); r != CUDA_SUCCESS) return r;
  }
  std::vector<EventObject*> completionEvents;
  bool cooperative = false;
  const CUlaunchAttributeValue* cluster = nullptr;
  const CUlaunchAttributeValue* regular = nullptr;    // CLUSTER_DIMENSION, 1x1x1 included
  const CUlaunchAttributeValue* preferred = nullptr;  // PREFERRED_CLUSTER_DIMENSION
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    const int id = rawEnumValue(a.id);
    switch (id) {
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        break;
      case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
        const auto& c = a.value.clusterDim;
        if (c.x == 0 || c.y == 0 || c.z == 0) return refuse("a cluster dimension of 0");
        regular = &a.value;
        if (c.x * c.y * c.z > 1) cluster = &a.value;  // 1x1x1 is an ordinary launch
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        preferred = &a.value;
        break;
      case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: {
        EventObject* e = nullptr;
        if (CUresult r = launchEvent(a.value.programmaticEvent.event, ctx, &e); r != CUDA_SUCCESS) {
          return r;
        }
        completionEvents.push_back(e);
        break;
      }
      case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT: {
        EventObject* e = nullptr;
        if (CUresult r = launchEvent(a.value.launchCompletionEvent.event, ctx, &e);
            r != CUDA_SUCCESS) {
          return r;
        }
        completionEvents.push_back(e);
        break;
      }
      default:
        if (CUresult r = checkKernelAttribute("cuLaunchKernelEx", id, a.value, &cooperative);
            r != CUDA_SUCCESS) {
          return r;
        }
    }
  }
  if (!regular) preferred = nullptr;  // it takes effect only beside a regular cluster
  if (preferred) {
    const auto& p = preferred->preferredClusterDim;
    const auto& c = regular->clusterDim;
    if (p.x == 0 || p.y == 0 || p.z == 0 || p.x % c.x != 0 || p.y % c.y != 0 || p.z != c.z) {
      return refuse(
          "the preferred cluster must be a multiple of the regular cluster in x and y, and equal "
          "to it in z");
    }
    if (config->gridDimX % p.x != 0 || config->gridDimY % p.y != 0) {
      return refuseCall(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                        "cuLaunchKernelEx: the preferred cluster shape does not divide the grid");
    }
    if (logLevel() >= 2 && uint64_t{p.x} * p.y * p.z > uint64_t{c.x} * c.y * c.z) {
      logLine("cuLaunchKernelEx: the preferred " + std::to_string(p.x) + "x" + std::to_string(p.y) +
              "x" + std::to_string(p.z) + " clusters are served as the " +
              "regular ones (the driver's best-effort fallback)");
    }
  }
  if (CUresult r =
          launch(h, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                 config->blockDimY, config->blockDimZ, config->sharedMemBytes, config->hStream,
                 kernelParams, extra, cooperative, cluster, preferred);
      r != CUDA_SUCCESS) {
    return r;
  }
  for (EventObject* e : completionEvents) {
    if (CUresult r = CUDA_SUCCESS; captureEventRecord(config->hStream, e, 0, &r)) {
      if (r != CUDA_SUCCESS) return r;
      continue;
    }
    CUresult r = ctx->server->post("cuLaunchKernelEx", [&](wire::Request::Builder b) {
      auto rec = b.initEventRecord();
      rec.setContext(ctx->remote);
      rec.setEvent(e->remote);
      rec.setStream(s);
    });
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int sharedBytes,
                                           CUstream stream, void** kernelParams, void** extra) {
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx, unsigned int by,
                                                unsigned int bz, unsigned int sharedBytes,
                                                CUstream stream, void** kernelParams,
                                                void** extra) {
  PerThreadDefaultStream perThread;
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                             void** kernelParams, void** extra) {
  return launchEx(config, f, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                                  void** kernelParams, void** extra) {
  PerThreadDefaultStream perThread;
  return launchEx(config, f, kernelParams, extra);
}

GPUPOOL_DRIVER_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx,
                                                      unsigned int gy, unsigned int gz,
                                                      unsigned int bx, unsigned int by,
                                                      unsigned int bz, unsigned int sharedBytes,
                                                      CUstream stream, void** kernelParams) {
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, nullptr, true);
}

GPUPOOL_DRIVER_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx,
                                                           unsigned int gy, unsigned int gz,
                                                           unsigned int bx, unsigned int by,
                                                           unsigned int bz,
                                                           unsigned int sharedBytes,
                                                           CUstream stream, void** kernelParams) {
  PerThreadDefaultStream perThread;
  return launch(f, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, nullptr, true);
}
