// Green contexts: SM resources, their split (client/sm_partition.h), descriptors, and contexts
// whose kernels run on a partition of the device's SMs. A green context is an ordinary context
// object whose server side was created with its SM count (CtxCreate.smCount): the emu counts
// only those SMs (a cooperative launch's limit), the cuda backend makes a real green context.
// Only CU_DEV_RESOURCE_TYPE_SM resources exist here.
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"
#include "sm_partition.h"

namespace gpupool::client {

struct GreenContextObject {
  Tag tag = Tag::kGreenContext;
  ContextObject* context = nullptr;  // what cuCtxFromGreenCtx gives
  unsigned long long id = 0;         // cuGreenCtxGetId
};

}  // namespace gpupool::client

using namespace gpupool::client;

namespace {

// What a resource this library filled in says about itself, kept in CUdevResource's internal
// padding: the device, and the split it came from (0: a device's or context's whole resource).
struct ResourceOrigin {
  uint32_t magic;
  int32_t device;
  uint64_t split;
};
constexpr uint32_t kResourceMagic = 0x67727372;  // "gsrs"
static_assert(sizeof(ResourceOrigin) <= sizeof(CUdevResource::_internal_padding));

struct ResourceDescObject {
  Tag tag = Tag::kResourceDesc;
  int device = 0;
  unsigned smCount = 0;
};

// Descriptors have no destroy call in CUDA: they live as long as the library.
std::mutex& descriptorsMutex() {
  static std::mutex m;
  return m;
}
std::vector<std::unique_ptr<ResourceDescObject>>& descriptors() {
  static std::vector<std::unique_ptr<ResourceDescObject>> all;
  return all;
}

GreenContextObject* asGreenContext(CUgreenCtx h) {
  if (!isRegistered(h)) return nullptr;
  auto* g = reinterpret_cast<GreenContextObject*>(h);
  return g->tag == Tag::kGreenContext ? g : nullptr;
}

ResourceDescObject* asResourceDesc(CUdevResourceDesc h) {
  if (!isRegistered(h)) return nullptr;
  auto* d = reinterpret_cast<ResourceDescObject*>(h);
  return d->tag == Tag::kResourceDesc ? d : nullptr;
}

int computeMajorOf(int device) {
  return DriverState::get().device(device)->attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
}

unsigned deviceSms(int device) {
  return static_cast<unsigned>(
      DriverState::get().device(device)->attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
}

void fillSmResource(CUdevResource* r, int device, unsigned smCount, uint64_t split) {
  std::memset(r, 0, sizeof *r);
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  SmPartitionRules rules = smPartitionRules(computeMajorOf(device), 0);
  r->sm.smCount = smCount;
  r->sm.minSmPartitionSize = rules.minSize;
  r->sm.smCoscheduledAlignment = rules.alignment;
  ResourceOrigin origin{kResourceMagic, device, split};
  std::memcpy(r->_internal_padding, &origin, sizeof origin);
}

bool originOf(const CUdevResource* r, ResourceOrigin* origin) {
  std::memcpy(origin, r->_internal_padding, sizeof *origin);
  return origin->magic == kResourceMagic && DriverState::get().device(origin->device);
}

CUresult checkSmType(CUdevResourceType type, const char* what) {
  if (rawEnumValue(type) == CU_DEV_RESOURCE_TYPE_SM) return CUDA_SUCCESS;
  return refuseCall(CUDA_ERROR_INVALID_RESOURCE_TYPE,
                    std::string(what) + ": resource type " + std::to_string(rawEnumValue(type)) +
                        " is not served; only CU_DEV_RESOURCE_TYPE_SM resources exist here");
}

// The resources of a context: a green context's partition, or the whole device.
CUresult contextResource(ContextObject* c, CUdevResource* resource, CUdevResourceType type,
                         const char* what) {
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkSmType(type, what); r != CUDA_SUCCESS) return r;
  fillSmResource(resource, c->device, c->smCount ? c->smCount : deviceSms(c->device), 0);
  return CUDA_SUCCESS;
}

CUresult greenOrError(CUgreenCtx h, GreenContextObject** out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *out = asGreenContext(h);
  return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource* resource,
                                                   CUdevResourceType type) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!resource) return CUDA_ERROR_INVALID_VALUE;
  if (!DriverState::get().device(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (CUresult r = checkSmType(type, "cuDeviceGetDevResource"); r != CUDA_SUCCESS) return r;
  fillSmResource(resource, device, deviceSms(device), 0);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource* resource,
                                                CUdevResourceType type) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = hCtx ? asContext(hCtx) : DriverState::get().current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  return contextResource(c, resource, type, "cuCtxGetDevResource");
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource* resource,
                                                     CUdevResourceType type) {
  GreenContextObject* g = nullptr;
  if (CUresult r = greenOrError(hCtx, &g); r != CUDA_SUCCESS) return r;
  return contextResource(g->context, resource, type, "cuGreenCtxGetDevResource");
}

GPUPOOL_DRIVER_API CUresult cuDevSmResourceSplitByCount(
    CUdevResource* result, unsigned int* nbGroups, const CUdevResource* input,
    CUdevResource* remaining, unsigned int useFlags, unsigned int minCount) {
  constexpr const char* kWhat = "cuDevSmResourceSplitByCount";
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!nbGroups || !input || (result && *nbGroups == 0)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkSmType(input->type, kWhat); r != CUDA_SUCCESS) return r;
  ResourceOrigin origin{};
  if (!originOf(input, &origin)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      std::string(kWhat) +
                          ": the input resource was not filled in by "
                          "cuDeviceGetDevResource, cuCtxGetDevResource or "
                          "cuGreenCtxGetDevResource");
  }
  if (origin.split != 0) {
    return refuseCall(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                      std::string(kWhat) +
                          ": a split's output cannot be split again before a "
                          "green context is made of it");
  }
  constexpr unsigned kKnownFlags = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
                                   CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
  if (useFlags & ~kKnownFlags) return CUDA_ERROR_INVALID_VALUE;
  if (useFlags & CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(kWhat) +
                          ": CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE "
                          "sizes groups for thread-block clusters, which green "
                          "contexts of the pool are not sized for");
  }
  SmSplitPlan plan =
      planSmSplit(input->sm.smCount, computeMajorOf(origin.device), useFlags, minCount);
  if (plan.result != CUDA_SUCCESS) {
    return refuseCall(plan.result, std::string(kWhat) + ": " + std::to_string(minCount) +
                                       " SMs per group do not fit in a resource of " +
                                       std::to_string(input->sm.smCount));
  }
  if (!result) {
    *nbGroups = plan.groups;
    return CUDA_SUCCESS;
  }
  static std::atomic<uint64_t> nextSplit{1};
  const uint64_t split = nextSplit++;
  const unsigned made = *nbGroups < plan.groups ? *nbGroups : plan.groups;
  const unsigned inputSms = input->sm.smCount;  // input may alias an output
  const int device = origin.device;
  for (unsigned i = 0; i < made; ++i) fillSmResource(&result[i], device, plan.groupSize, split);
  if (remaining) fillSmResource(remaining, device, inputSms - made * plan.groupSize, split);
  *nbGroups = made;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* phDesc,
                                                      CUdevResource* resources,
                                                      unsigned int nbResources) {
  constexpr const char* kWhat = "cuDevResourceGenerateDesc";
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!phDesc || !resources || nbResources == 0) return CUDA_ERROR_INVALID_VALUE;
  ResourceOrigin first{};
  unsigned smCount = 0;
  for (unsigned i = 0; i < nbResources; ++i) {
    if (CUresult r = checkSmType(resources[i].type, kWhat); r != CUDA_SUCCESS) return r;
    ResourceOrigin origin{};
    if (!originOf(&resources[i], &origin)) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        std::string(kWhat) + ": resource " + std::to_string(i) +
                            " was not filled in by a resource query or split");
    }
    if (i == 0) first = origin;
    if (origin.device != first.device) {
      return refuseCall(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                        std::string(kWhat) + ": the resources come from different devices");
    }
    // Several resources must be split outputs, though not of one split call: NVIDIA accepts groups
    // of two splits (observed on driver 580.159.04, H200), whatever its documentation says. The
    // descriptor holds their SM counts together, no more than the device has (checked below).
    if (nbResources > 1 && origin.split == 0) {
      return refuseCall(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                        std::string(kWhat) +
                            ": several SM resources must all be outputs of "
                            "cuDevSmResourceSplitByCount");
    }
    smCount += resources[i].sm.smCount;
  }
  if (smCount == 0 || smCount > deviceSms(first.device)) {
    return refuseCall(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
                      std::string(kWhat) + ": " + std::to_string(smCount) +
                          " SMs make no partition of the device");
  }
  auto desc = std::make_unique<ResourceDescObject>();
  desc->device = first.device;
  desc->smCount = smCount;
  registerObject(desc.get());
  *phDesc = reinterpret_cast<CUdevResourceDesc>(desc.get());
  std::lock_guard lock(descriptorsMutex());
  descriptors().push_back(std::move(desc));
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc,
                                             CUdevice dev, unsigned int flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!phCtx) return CUDA_ERROR_INVALID_VALUE;
  ResourceDescObject* d = asResourceDesc(desc);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!DriverState::get().device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags != CU_GREEN_CTX_DEFAULT_STREAM) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuGreenCtxCreate: flags must be CU_GREEN_CTX_DEFAULT_STREAM (required)");
  }
  if (d->device != dev) {
    return refuseCall(CUDA_ERROR_INVALID_DEVICE,
                      "cuGreenCtxCreate: the descriptor's resources are device " +
                          std::to_string(d->device) + "'s, not device " + std::to_string(dev) +
                          "'s");
  }
  static std::atomic<unsigned long long> nextId{1};
  auto* c = new ContextObject();
  auto* g = new GreenContextObject();
  c->device = dev;
  c->server = DriverState::get().serverOf(dev);
  c->serverDevice = DriverState::get().serverDeviceOf(dev);
  c->smCount = d->smCount;
  c->green = g;
  g->context = c;
  g->id = nextId++;
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) {
    delete g;
    delete c;
    return r;
  }
  registerObject(c);
  registerObject(g);
  *phCtx = reinterpret_cast<CUgreenCtx>(g);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  GreenContextObject* g = nullptr;
  if (CUresult r = greenOrError(hCtx, &g); r != CUDA_SUCCESS) return r;
  ContextObject* c = g->context;
  DriverState::get().releaseRemote(c);
  std::erase(DriverState::get().stack(), c);
  unregisterObject(g);
  unregisterObject(c);
  g->tag = Tag::kDead;
  c->tag = Tag::kDead;
  delete g;
  delete c;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuCtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pContext) return CUDA_ERROR_INVALID_VALUE;
  GreenContextObject* g = asGreenContext(hCtx);
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = reinterpret_cast<CUcontext>(g->context);
  return CUDA_SUCCESS;
}

// Events: as cuCtxRecordEvent/cuCtxWaitEvent on the green context's context.
GPUPOOL_DRIVER_API CUresult cuGreenCtxRecordEvent(CUgreenCtx hCtx, CUevent hEvent) {
  GreenContextObject* g = nullptr;
  if (CUresult r = greenOrError(hCtx, &g); r != CUDA_SUCCESS) return r;
  return cuCtxRecordEvent(reinterpret_cast<CUcontext>(g->context), hEvent);
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxWaitEvent(CUgreenCtx hCtx, CUevent hEvent) {
  GreenContextObject* g = nullptr;
  if (CUresult r = greenOrError(hCtx, &g); r != CUDA_SUCCESS) return r;
  return cuCtxWaitEvent(reinterpret_cast<CUcontext>(g->context), hEvent);
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxStreamCreate(CUstream* phStream, CUgreenCtx greenCtx,
                                                   unsigned int flags, int priority) {
  GreenContextObject* g = nullptr;
  if (CUresult r = greenOrError(greenCtx, &g); r != CUDA_SUCCESS) return r;
  if (!phStream || flags != CU_STREAM_NON_BLOCKING) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuGreenCtxStreamCreate: flags must be CU_STREAM_NON_BLOCKING (required)");
  }
  return createStreamIn(g->context, flags, priority, phStream);
}

GPUPOOL_DRIVER_API CUresult cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long* greenCtxId) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!greenCtxId) return CUDA_ERROR_INVALID_VALUE;
  GreenContextObject* g = nullptr;
  if (greenCtx) {
    g = asGreenContext(greenCtx);
  } else if (ContextObject* current = DriverState::get().current()) {
    g = current->green;  // NULL asks for the current context's green context
  }
  if (!g) return CUDA_ERROR_INVALID_CONTEXT;
  *greenCtxId = g->id;
  return CUDA_SUCCESS;
}
