// Managed memory: cuMemAllocManaged, __managed__ variables (cuModuleGetGlobal, cuLibraryGetManaged;
// module_api.cc asks), cuMemAdvise, cuMemPrefetchAsync and the batch calls,
// cuMemRangeGetAttribute(s) and cuStreamAttachMemAsync, for devices without concurrent managed
// access.
//
// A managed allocation is device memory on the server plus a host mirror in this process at the
// same address, so one pointer works in host code and in kernels. The two are made coherent at
// synchronization points, page by page, moving only pages that were written:
// - host -> device: the mirror stays read-only; the first write to a page faults, and the SIGSEGV
//   handler marks the page dirty (a lock-free bitmap) and makes it writable. Before any request
//   leaves for the server (RemoteSession's request observer: launches, copies, memsets, graphs,
//   synchronizations all go through it), the dirty pages go to the device and turn read-only again.
// - device -> host: after a synchronizing call (context, stream or event synchronize or a query
//   that found the work done, a synchronous copy) the server returns the pages whose contents
//   differ from what this client last saw (it keeps a hash per page), which land in the mirror.
//   Without work issued since the last such fetch, there is no round trip.
// Host code must not touch managed memory while the device may use it, as on any device with
// CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 0; the devices report exactly that.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "client_log.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "host_function_fence.h"
#include "managed_memory.h"

// cuda.h maps these names onto their newest versions; the older ABI versions are defined here too.
#undef cuMemAdvise
#undef cuMemPrefetchAsync
#undef cuMemPrefetchAsync_ptsz
#undef cuStreamAttachMemAsync
#undef cuMemPrefetchBatchAsync
#undef cuMemDiscardBatchAsync
#undef cuMemDiscardAndPrefetchBatchAsync
extern "C" {
CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUdevice device);
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                    CUstream hStream);
CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                         CUstream hStream);
CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                        unsigned int flags);
CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                         CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                                         size_t numPrefetchLocs, unsigned long long flags,
                                         CUstream hStream);
CUresult CUDAAPI cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                        unsigned long long flags, CUstream hStream);
CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                   CUmemLocation* prefetchLocs,
                                                   size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                   unsigned long long flags, CUstream hStream);
}

using namespace gpupool::client;

namespace {

// The granularity of coherence (the server's too): the host page.
constexpr size_t kManagedPageBytes = 4096;

// ---- Page tracking: what the SIGSEGV handler reads, lock-free ----

struct MirrorSlot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> bytes{0};            // 0: a free slot
  std::atomic<uint64_t>* dirty = nullptr;  // one bit per page, set by the fault handler
};
constexpr size_t kMaxMirrors = 4096;
MirrorSlot mirrorSlots[kMaxMirrors];
std::atomic<size_t> mirrorSlotsInUse{0};  // slots at or above this index were never used
struct sigaction previousSegvAction;

void managedWriteFault(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code == SEGV_ACCERR) {
    const size_t used = mirrorSlotsInUse.load(std::memory_order_acquire);
    for (size_t i = 0; i < used; ++i) {
      MirrorSlot& slot = mirrorSlots[i];
      size_t bytes = slot.bytes.load(std::memory_order_acquire);
      uintptr_t base = slot.base.load(std::memory_order_acquire);
      if (!bytes || address - base >= bytes) continue;
      size_t page = (address - base) / kManagedPageBytes;
      // Writable first, then dirty: a flush that clears the bit in between protects it again.
      mprotect(reinterpret_cast<void*>(base + page * kManagedPageBytes), kManagedPageBytes,
               PROT_READ | PROT_WRITE);
      slot.dirty[page / 64].fetch_or(uint64_t{1} << (page % 64), std::memory_order_acq_rel);
      return;
    }
  }
  // Not ours: whoever handled SIGSEGV before us, or the default action (the fault repeats).
  if (previousSegvAction.sa_flags & SA_SIGINFO) {
    previousSegvAction.sa_sigaction(signal, info, context);
  } else if (previousSegvAction.sa_handler != SIG_DFL && previousSegvAction.sa_handler != SIG_IGN) {
    previousSegvAction.sa_handler(signal);
  } else {
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &fallback, nullptr);
  }
}

void installManagedFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = managedWriteFault;
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previousSegvAction);
  });
}

// ---- The allocations ----

// What cuMemAdvise and cuMemPrefetchAsync recorded for one page (only the host can be named: no
// device has concurrent managed access).
enum PageAdvice : uint8_t {
  kReadMostly = 1,
  kPreferredHost = 2,
  kAccessedByHost = 4,
  kPrefetchedToHost = 8,
};

struct ManagedAllocation {
  ContextObject* context = nullptr;
  size_t bytes = 0;  // whole pages
  size_t slot = 0;
  unsigned attachFlags = CU_MEM_ATTACH_GLOBAL;
  CUstream attachedStream = nullptr;
  std::vector<uint8_t> advice;     // PageAdvice bits, per page
  ModuleObject* module = nullptr;  // a __managed__ variable's module, whose unload ends it
};

std::mutex managedMutex;  // the allocations, the slots' writers, flushes and fetches
// Never destroyed: cudart unloads its modules (and so their __managed__ variables) from its own
// exit handler, which runs after this library's static destructors when cudart loaded it. Made
// at first use, not at load: a process that never uses managed memory allocates nothing here
// (cudart may unload this library when cuInit fails, and leak checkers then count what it held).
std::map<CUdeviceptr, ManagedAllocation>& managedAllocationMap() {
  static auto* allocations = new std::map<CUdeviceptr, ManagedAllocation>();
  return *allocations;
}
std::atomic<size_t> managedLive{0};
std::map<RemoteSession*, bool>& workSinceFetchMap() {  // under managedMutex
  static auto* work = new std::map<RemoteSession*, bool>();
  return *work;
}
thread_local bool inManagedCode = false;  // our own requests are not observed

struct ManagedScope {
  ManagedScope() : outer(inManagedCode) { inManagedCode = true; }
  ~ManagedScope() { inManagedCode = outer; }
  bool outer;
};

// Sends the written pages of `session`'s allocations and protects them again. Under managedMutex.
CUresult flushManagedWrites(RemoteSession& session) {
  std::map<ContextObject*,
           std::pair<std::vector<uint64_t>, std::vector<gpupool::transport::ConstBuffer>>>
      perContext;
  for (auto& [base, a] : managedAllocationMap()) {
    if (a.context->server != &session || !a.context->remote) continue;
    MirrorSlot& slot = mirrorSlots[a.slot];
    size_t pages = a.bytes / kManagedPageBytes;
    auto& [runs, bulk] = perContext[a.context];
    // Runs are coalesced within one allocation only: the server finds each inside one region.
    const size_t firstRun = runs.size();
    for (size_t w = 0; w < (pages + 63) / 64; ++w) {
      if (!slot.dirty[w].load(std::memory_order_relaxed)) continue;
      uint64_t bits = slot.dirty[w].exchange(0, std::memory_order_acq_rel);
      while (bits) {
        size_t first = static_cast<size_t>(__builtin_ctzll(bits));
        size_t last = first;
        while (last + 1 < 64 && (bits >> (last + 1) & 1)) ++last;
        bits &= last + 1 < 64 ? ~((uint64_t{2} << last) - (uint64_t{1} << first))
                              : ~(~uint64_t{0} << first);
        uint64_t address = base + (w * 64 + first) * kManagedPageBytes;
        uint64_t length = (last - first + 1) * kManagedPageBytes;
        // Read-only again before the bytes are read: a write from now on faults and marks it.
        mprotect(reinterpret_cast<void*>(address), length, PROT_READ);
        if (runs.size() > firstRun && runs[runs.size() - 2] + runs.back() == address) {
          runs.back() += length;
          bulk.back().size += length;
        } else {
          runs.push_back(address);
          runs.push_back(length);
          bulk.push_back({reinterpret_cast<const void*>(address), length});
        }
      }
    }
  }
  for (auto& [ctx, work] : perContext) {
    auto& [runs, bulk] = work;
    if (runs.empty()) continue;
    uint64_t remote = ctx->remote;
    CUresult r = session.post(
        "cuManagedWrite",
        [&](wire::Request::Builder b) {
          auto m = b.initManagedMemory();
          m.setContext(remote);
          m.setOp(wire::Request::ManagedMemoryOp::WRITE);
          auto list = m.initRuns(static_cast<unsigned>(runs.size()));
          for (unsigned i = 0; i < runs.size(); ++i) list.set(i, runs[i]);
        },
        bulk);
    if (r != CUDA_SUCCESS) return r;
    workSinceFetchMap()[&session] = true;
  }
  return CUDA_SUCCESS;
}

// The allocation holding [address, address+bytes) in `ctx`, or null. Under managedMutex.
ManagedAllocation* managedAllocationOf(ContextObject* ctx, uint64_t address, uint64_t bytes,
                                       uint64_t* base) {
  auto it = managedAllocationMap().upper_bound(address);
  if (it == managedAllocationMap().begin()) return nullptr;
  --it;
  if ((ctx && it->second.context != ctx) || address - it->first >= it->second.bytes ||
      bytes > it->second.bytes - (address - it->first)) {
    return nullptr;
  }
  if (base) *base = it->first;
  return &it->second;
}

// Takes the pages the device changed in `ctx` into the mirrors. Under managedMutex.
CUresult fetchManagedChanges(ContextObject* ctx) {
  uint64_t remote = ctx->remote;
  return ctx->server->call(
      "cuManagedFetch",
      [&](wire::Request::Builder b) {
        auto m = b.initManagedMemory();
        m.setContext(remote);
        m.setOp(wire::Request::ManagedMemoryOp::FETCH);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk& bulk) {
        uint64_t count = static_cast<uint64_t>(reply.getValue());
        if (count > bulk.remaining() / 16) return CUDA_ERROR_UNKNOWN;
        std::vector<uint64_t> runs(count * 2);
        if (!bulk.read(runs.data(), runs.size() * sizeof(uint64_t))) return CUDA_ERROR_UNKNOWN;
        for (size_t i = 0; i < runs.size(); i += 2) {
          uint64_t address = runs[i], length = runs[i + 1], base = 0;
          ManagedAllocation* a = managedAllocationOf(ctx, address, length, &base);
          if (!a || address % kManagedPageBytes || length % kManagedPageBytes) {
            return CUDA_ERROR_UNKNOWN;
          }
          void* at = reinterpret_cast<void*>(address);
          mprotect(at, length, PROT_READ | PROT_WRITE);
          if (!bulk.read(at, length)) return CUDA_ERROR_UNKNOWN;
          // Pages the host wrote meanwhile stay writable and dirty; the rest are clean again.
          // One mprotect per run of clean pages: per page, a large fetch would split the mapping
          // into thousands of pieces.
          MirrorSlot& slot = mirrorSlots[a->slot];
          const uint64_t end = (address - base + length) / kManagedPageBytes;
          for (uint64_t p = (address - base) / kManagedPageBytes; p < end;) {
            auto dirty = [&](uint64_t q) {
              return slot.dirty[q / 64].load(std::memory_order_acquire) >> (q % 64) & 1;
            };
            if (dirty(p)) {
              ++p;
              continue;
            }
            uint64_t clean = p;
            while (clean < end && !dirty(clean)) ++clean;
            mprotect(reinterpret_cast<void*>(base + p * kManagedPageBytes),
                     (clean - p) * kManagedPageBytes, PROT_READ);
            p = clean;
          }
        }
        return CUDA_SUCCESS;
      });
}

// Fetches for every context of `session` holding managed memory. Under managedMutex.
CUresult fetchManagedChangesOf(RemoteSession& session) {
  std::vector<ContextObject*> contexts;
  for (auto& [base, a] : managedAllocationMap()) {
    if (a.context->server == &session && a.context->remote &&
        std::find(contexts.begin(), contexts.end(), a.context) == contexts.end()) {
      contexts.push_back(a.context);
    }
  }
  workSinceFetchMap()[&session] = false;
  for (ContextObject* ctx : contexts) {
    if (CUresult r = fetchManagedChanges(ctx); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Calls after which the host may read what the device wrote.
bool synchronizesWithHost(const char* what) {
  static const char* const kNames[] = {
      "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
      "cuStreamQuery",    "cuEventQuery",        "cuMemcpyDtoH",
      "cuMemcpy",         "cuMemcpy2D",          "cuMemcpy2DUnaligned"};
  for (const char* name : kNames) {
    if (std::strcmp(what, name) == 0) return true;
  }
  return false;
}

void beforeRequest(RemoteSession& session, const char* what, bool posted) {
  if (inManagedCode || managedLive.load(std::memory_order_acquire) == 0) return;
  ManagedScope scope;
  std::lock_guard lock(managedMutex);
  if (posted || !synchronizesWithHost(what)) workSinceFetchMap()[&session] = true;
  // A failure here is the connection's, which the request itself reports.
  (void)flushManagedWrites(session);
}

void afterCall(RemoteSession& session, const char* what, CUresult result) {
  if (inManagedCode || result != CUDA_SUCCESS || !synchronizesWithHost(what) ||
      managedLive.load(std::memory_order_acquire) == 0) {
    return;
  }
  ManagedScope scope;
  std::lock_guard lock(managedMutex);
  if (!workSinceFetchMap()[&session]) return;
  if (CUresult r = fetchManagedChangesOf(session); r != CUDA_SUCCESS && logLevel() >= 1) {
    logLine("managed memory: fetching the device's changes after " + std::string(what) +
            " failed (" + std::to_string(r) + ")");
  }
}

const RemoteSession::RequestObserver kManagedObserver{beforeRequest, afterCall};

// Restores what the mirror replaced: the PROT_NONE reservation of its device addresses.
void unmapMirror(const ManagedAllocation& a, CUdeviceptr base) {
  MirrorSlot& slot = mirrorSlots[a.slot];
  slot.bytes.store(0, std::memory_order_release);
  slot.base.store(0, std::memory_order_release);
  void* at = reinterpret_cast<void*>(base);
  mmap(at, a.bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  delete[] slot.dirty;
  slot.dirty = nullptr;
  managedLive.fetch_sub(1, std::memory_order_acq_rel);
}

// Maps the host mirror of [address, address+bytes) of `ctx` (whole pages) at that address, with
// `contents` (null: zeros), read-only, and records it; null, with the reason in *why, when the
// address cannot be had in this process or no slot is left.
ManagedAllocation* mirrorManagedRange(ContextObject* ctx, CUdeviceptr address, size_t bytes,
                                      const uint8_t* contents, ModuleObject* module,
                                      std::string* why) {
  // The mirror sits at the device address itself, over this process's reservation of it (the
  // window reserved for the server's addresses, else one made here: device_address_reservations.h),
  // which it puts back when it goes.
  if (std::string taken; !keepDeviceRangeApart(*ctx->server, address, bytes, &taken)) {
    *why = taken + ", so no host mirror can live there";
    return nullptr;
  }
  void* want = reinterpret_cast<void*>(address);
  void* got = mmap(want, bytes, contents ? PROT_READ | PROT_WRITE : PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (got != want) {
    *why = "the host mirror of device address " + std::to_string(address) +
           " could not be mapped: " + std::strerror(errno);
    return nullptr;
  }
  if (contents) {
    std::memcpy(want, contents, bytes);
    mprotect(want, bytes, PROT_READ);
  }
  std::lock_guard lock(managedMutex);
  size_t slot = 0;
  while (slot < kMaxMirrors && mirrorSlots[slot].bytes.load(std::memory_order_acquire)) ++slot;
  if (slot == kMaxMirrors) {
    mmap(want, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    *why = "more than " + std::to_string(kMaxMirrors) + " managed allocations";
    return nullptr;
  }
  installManagedFaultHandler();
  RemoteSession::observeRequests(&kManagedObserver);
  size_t pages = bytes / kManagedPageBytes;
  MirrorSlot& s = mirrorSlots[slot];
  s.dirty = new std::atomic<uint64_t>[(pages + 63) / 64]();
  s.base.store(address, std::memory_order_release);
  s.bytes.store(bytes, std::memory_order_release);
  if (slot >= mirrorSlotsInUse.load()) mirrorSlotsInUse.store(slot + 1, std::memory_order_release);
  ManagedAllocation a;
  a.context = ctx;
  a.bytes = bytes;
  a.slot = slot;
  a.advice.assign(pages, 0);
  a.module = module;
  ManagedAllocation& recorded = managedAllocationMap()[address] = std::move(a);
  managedLive.fetch_add(1, std::memory_order_acq_rel);
  return &recorded;
}

CUresult allocateManaged(CUdeviceptr* dptr, size_t bytesize, unsigned flags) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  if (bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
    return refuseCall(
        CUDA_ERROR_INVALID_VALUE,
        "cuMemAllocManaged: flags must be CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST");
  }
  if (sysconf(_SC_PAGESIZE) != static_cast<long>(kManagedPageBytes)) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuMemAllocManaged: managed memory tracks 4 KiB host pages, and this host's "
                      "pages are " +
                          std::to_string(sysconf(_SC_PAGESIZE)) + " bytes");
  }
  if (bytesize > SIZE_MAX - kManagedPageBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t bytes = (bytesize + kManagedPageBytes - 1) / kManagedPageBytes * kManagedPageBytes;
  ManagedScope scope;
  RemoteSession* server = ctx->server;
  uint64_t address = 0;
  CUresult r = server->call(
      "cuMemAllocManaged",
      [&](wire::Request::Builder b) {
        auto m = b.initManagedMemory();
        m.setContext(ctx->remote);
        m.setOp(wire::Request::ManagedMemoryOp::ALLOC);
        m.setBytes(bytes);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        address = reply.getMemAlloc().getAddress();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  auto giveBack = [&](const std::string& why) {
    (void)server->post("cuMemFree", [&](wire::Request::Builder b) {
      auto m = b.initManagedMemory();
      m.setContext(ctx->remote);
      m.setOp(wire::Request::ManagedMemoryOp::FREE);
      m.setAddress(address);
    });
    return refuseCall(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAllocManaged: " + why);
  };
  std::string why;
  ManagedAllocation* a = mirrorManagedRange(ctx, address, bytes, nullptr, nullptr, &why);
  if (!a) return giveBack(why);
  {
    std::lock_guard lock(managedMutex);
    a->attachFlags = flags;
  }
  {
    std::lock_guard stateLock(DriverState::get().mutex);
    DeviceAllocation d{bytesize, ctx};
    d.managed = true;
    DriverState::get().deviceAllocations[address] = d;
  }
  *dptr = address;
  return CUDA_SUCCESS;
}

// Where cuMemAdvise or cuMemPrefetchAsync points: the host, a device of this pool, or neither.
enum class Target { kHost, kDevice, kInvalid };
Target targetOf(CUmemLocation location) {
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return Target::kHost;
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return location.id >= 0 && location.id < DriverState::get().deviceCount() ? Target::kDevice
                                                                                : Target::kInvalid;
    default:
      return Target::kInvalid;
  }
}
CUmemLocation locationOf(CUdevice device) {
  CUmemLocation l{};
  if (device == CU_DEVICE_CPU) {
    l.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    l.type = CU_MEM_LOCATION_TYPE_DEVICE;
    l.id = device;
  }
  return l;
}

constexpr const char* kNoConcurrentAccess =
    "no pool device has CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, which this needs (managed "
    "memory reaches the device at the next launch, copy or synchronization anyway)";

// The pages [first, last) of the managed allocation holding [devPtr, devPtr+count), rounded out to
// whole pages, as the driver does; null when the range is not managed memory. Under managedMutex.
ManagedAllocation* managedPages(CUdeviceptr devPtr, size_t count, size_t* first, size_t* last) {
  uint64_t base = 0;
  if (count == 0) return nullptr;
  ManagedAllocation* a = managedAllocationOf(nullptr, devPtr, count, &base);
  if (!a) return nullptr;
  *first = (devPtr - base) / kManagedPageBytes;
  *last = (devPtr - base + count + kManagedPageBytes - 1) / kManagedPageBytes;
  return a;
}

CUresult advise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  std::lock_guard lock(managedMutex);
  size_t first = 0, last = 0;
  ManagedAllocation* a = managedPages(devPtr, count, &first, &last);
  if (!a) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuMemAdvise: the range is not managed memory (system-allocated memory "
                      "needs PAGEABLE_MEMORY_ACCESS, which no pool device has)");
  }
  uint8_t set = 0, clear = 0;
  Target target = targetOf(location);
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
      set = kReadMostly;
      break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
      clear = kReadMostly;
      break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      clear = kPreferredHost;
      break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: {
      uint8_t bit =
          advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ? kPreferredHost : kAccessedByHost;
      if (target == Target::kInvalid) return CUDA_ERROR_INVALID_VALUE;
      if (target == Target::kDevice) {
        // Nothing a device could have been given can be taken back; setting one is refused.
        if (advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_SUCCESS;
        return refuseCall(CUDA_ERROR_INVALID_DEVICE,
                          std::string("cuMemAdvise: ") + kNoConcurrentAccess);
      }
      (advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY ? clear : set) = bit;
      break;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t p = first; p < last; ++p) a->advice[p] = (a->advice[p] | set) & ~clear;
  return CUDA_SUCCESS;
}

CUresult prefetch(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned flags,
                  CUstream stream) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* streamContext = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &streamContext, &remoteStream); r != CUDA_SUCCESS) {
    return r;
  }
  Target target = targetOf(location);
  if (target == Target::kInvalid) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(managedMutex);
  size_t first = 0, last = 0;
  ManagedAllocation* a = managedPages(devPtr, count, &first, &last);
  if (!a) return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemPrefetchAsync: not managed memory");
  if (target == Target::kDevice) {
    return refuseCall(CUDA_ERROR_INVALID_DEVICE,
                      std::string("cuMemPrefetchAsync to a device: ") + kNoConcurrentAccess);
  }
  // To the host: the device's changes reach the mirror at the synchronization the host must reach
  // before it touches them; what is recorded is where the range was last prefetched to.
  for (size_t p = first; p < last; ++p) a->advice[p] |= kPrefetchedToHost;
  return CUDA_SUCCESS;
}

// Whether every page of [first, last) has `bit`.
bool allPages(const ManagedAllocation& a, size_t first, size_t last, uint8_t bit) {
  for (size_t p = first; p < last; ++p) {
    if (!(a.advice[p] & bit)) return false;
  }
  return true;
}

CUresult rangeAttribute(void* data, size_t dataSize, int attribute, CUdeviceptr devPtr,
                        size_t count) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(managedMutex);
  size_t first = 0, last = 0;
  ManagedAllocation* a = managedPages(devPtr, count, &first, &last);
  if (!a) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, "cuMemRangeGetAttribute: not managed memory");
  }
  auto* out = static_cast<int*>(data);
  bool oneInt = dataSize == sizeof(int);
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      if (!oneInt) return CUDA_ERROR_INVALID_VALUE;
      *out = allPages(*a, first, last, kReadMostly) ? 1 : 0;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      if (!oneInt) return CUDA_ERROR_INVALID_VALUE;
      *out = allPages(*a, first, last, kPreferredHost) ? CU_DEVICE_CPU : CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      if (!oneInt) return CUDA_ERROR_INVALID_VALUE;
      *out = allPages(*a, first, last, kPrefetchedToHost) ? CU_DEVICE_CPU : CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      if (dataSize == 0 || dataSize % sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
      size_t n = dataSize / sizeof(int);
      for (size_t i = 0; i < n; ++i) out[i] = CU_DEVICE_INVALID;
      if (allPages(*a, first, last, kAccessedByHost)) out[0] = CU_DEVICE_CPU;
      return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: {
      if (dataSize != sizeof(CUmemLocationType)) return CUDA_ERROR_INVALID_VALUE;
      uint8_t bit = attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE ? kPreferredHost
                                                                                : kPrefetchedToHost;
      *static_cast<CUmemLocationType*>(data) =
          allPages(*a, first, last, bit) ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_INVALID;
      return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      // Meaningful only for a device or host NUMA location, which nothing here records.
      if (!oneInt) return CUDA_ERROR_INVALID_VALUE;
      *out = 0;
      return CUDA_SUCCESS;
    default:
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        "cuMemRangeGetAttribute: unknown attribute " + std::to_string(attribute));
  }
}

// cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync and cuMemDiscardAndPrefetchBatchAsync (CUDA
// 13): every argument is checked as cuda.h documents, each range as cuMemPrefetchAsync checks one.
// cuda.h also says they return an error unless every device has CONCURRENT_MANAGED_ACCESS, which
// no pool device has, so with good arguments they are refused: nothing is prefetched or discarded,
// as on a GPU without concurrent managed access.
enum class BatchOp { kPrefetch, kDiscard, kDiscardAndPrefetch };

CUresult batchManagedOp(BatchOp op, CUdeviceptr* dptrs, size_t* sizes, size_t count,
                        CUmemLocation* prefetchLocs, size_t* prefetchLocIdxs,
                        size_t numPrefetchLocs, unsigned long long flags, CUstream stream,
                        bool perThread) {
  const std::string what = op == BatchOp::kPrefetch  ? "cuMemPrefetchBatchAsync"
                           : op == BatchOp::kDiscard ? "cuMemDiscardBatchAsync"
                                                     : "cuMemDiscardAndPrefetchBatchAsync";
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (flags != 0) return refuseCall(CUDA_ERROR_INVALID_VALUE, what + ": flags must be 0");
  if (count == 0 || !dptrs || !sizes) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, what + ": needs count > 0, dptrs and sizes");
  }
  if (stream == CU_STREAM_LEGACY || (stream == nullptr && !perThread)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE, what + ": not on the legacy NULL stream");
  }
  ContextObject* streamContext = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &streamContext, &remoteStream); r != CUDA_SUCCESS) {
    return r;
  }
  if (op != BatchOp::kDiscard) {
    if (numPrefetchLocs == 0 || numPrefetchLocs > count || !prefetchLocs || !prefetchLocIdxs) {
      return refuseCall(CUDA_ERROR_INVALID_VALUE,
                        what + ": needs 1 to count locations and their first indices");
    }
    // prefetchLocIdxs[i] is the first range location i applies to, up to the next location's
    // first. Equal indices are accepted (observed on driver 580.159.04, H200: {0, 0}): the earlier
    // location then applies to no range.
    for (size_t i = 0; i < numPrefetchLocs; ++i) {
      if ((i == 0 && prefetchLocIdxs[0] != 0) ||
          (i > 0 && prefetchLocIdxs[i] < prefetchLocIdxs[i - 1]) || prefetchLocIdxs[i] >= count) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          what + ": prefetchLocIdxs must start at 0 and not fall, below count");
      }
      if (targetOf(prefetchLocs[i]) == Target::kInvalid) return CUDA_ERROR_INVALID_DEVICE;
    }
  }
  {
    std::lock_guard lock(managedMutex);
    for (size_t i = 0; i < count; ++i) {
      size_t first = 0, last = 0;
      if (!managedPages(dptrs[i], sizes[i], &first, &last)) {
        return refuseCall(CUDA_ERROR_INVALID_VALUE,
                          what + ": range " + std::to_string(i) + " is not managed memory");
      }
    }
  }
  return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                    what + ": " + kNoConcurrentAccess +
                        ", and cuda.h says every device needs it for the batch calls");
}

CUresult attachMemory(CUstream stream, CUdeviceptr dptr, size_t length, unsigned flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* ctx = nullptr;
  uint64_t remoteStream = 0;
  if (CUresult r = resolveStream(stream, &ctx, &remoteStream); r != CUDA_SUCCESS) return r;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
      flags != CU_MEM_ATTACH_SINGLE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags == CU_MEM_ATTACH_SINGLE && (stream == nullptr || stream == CU_STREAM_LEGACY)) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuStreamAttachMemAsync: the NULL stream cannot be attached to singly");
  }
  std::lock_guard lock(managedMutex);
  auto it = managedAllocationMap().find(dptr);
  if (it == managedAllocationMap().end()) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuStreamAttachMemAsync: not the start of a managed allocation (pageable "
                      "memory needs PAGEABLE_MEMORY_ACCESS, which no pool device has)");
  }
  DeviceAllocation info;
  DriverState::get().findDevice(dptr, 0, nullptr, &info);
  if (length != 0 && length != info.size && length != it->second.bytes) {
    return refuseCall(CUDA_ERROR_INVALID_VALUE,
                      "cuStreamAttachMemAsync: length must be 0 or the whole allocation");
  }
  // Recorded; coherence stays at synchronization points whatever the association.
  it->second.attachFlags = flags;
  it->second.attachedStream = stream;
  return CUDA_SUCCESS;
}

}  // namespace

namespace gpupool::client {

CUresult freeManagedAllocation(CUdeviceptr base, const DeviceAllocation& info) {
  ManagedScope scope;
  ContextObject* ctx = info.context;
  {
    std::lock_guard lock(managedMutex);
    auto it = managedAllocationMap().find(base);
    if (it == managedAllocationMap().end()) return CUDA_ERROR_INVALID_VALUE;
    if (it->second.module) {
      return refuseCall(
          CUDA_ERROR_INVALID_VALUE,
          "cuMemFree: a __managed__ variable belongs to its module, not to cuMemFree");
    }
    unmapMirror(it->second, base);
    managedAllocationMap().erase(it);
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations.erase(base);
  }
  auto fence = HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(ctx));
  uint64_t remote = ctx->remote;
  return ctx->server->post("cuMemFree", [&](wire::Request::Builder b) {
    auto m = b.initManagedMemory();
    m.setContext(remote);
    m.setOp(wire::Request::ManagedMemoryOp::FREE);
    m.setAddress(base);
  });
}

void dropManagedAllocationsOf(ContextObject* ctx) {
  if (managedLive.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(managedMutex);
  for (auto it = managedAllocationMap().begin(); it != managedAllocationMap().end();) {
    if (it->second.context != ctx) {
      ++it;
      continue;
    }
    unmapMirror(it->second, it->first);
    it = managedAllocationMap().erase(it);
  }
}

CUresult adoptManagedGlobal(ModuleObject* m, const std::string& name, CUdeviceptr address,
                            size_t variableBytes) {
  ContextObject* ctx = m->context;
  {
    std::lock_guard lock(managedMutex);
    if (managedAllocationOf(ctx, address, std::max<size_t>(variableBytes, 1), nullptr)) {
      return CUDA_SUCCESS;  // already mirrored
    }
    // The server may grow a mirrored range of the module to hold this variable too: what the host
    // wrote there goes first, as the reply's contents replace the mirror.
    ManagedScope scope;
    if (CUresult r = flushManagedWrites(*ctx->server); r != CUDA_SUCCESS) return r;
  }
  if (sysconf(_SC_PAGESIZE) != static_cast<long>(kManagedPageBytes)) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "__managed__ variable '" + name +
                          "': managed memory tracks 4 KiB host pages, and this host's pages are " +
                          std::to_string(sysconf(_SC_PAGESIZE)) + " bytes");
  }
  ManagedScope scope;
  uint64_t base = 0, bytes = 0;
  std::vector<uint8_t> contents;
  CUresult r = ctx->server->call(
      "cuModuleGetGlobal (managed)",
      [&](wire::Request::Builder b) {
        auto a = b.initManagedMemory();
        a.setContext(ctx->remote);
        a.setOp(wire::Request::ManagedMemoryOp::ADOPT_GLOBAL);
        a.setModule(m->remote);
        a.setName(name);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk& bulk) {
        // One run: the whole pages of managed memory holding the variable, then their bytes.
        uint64_t run[2];
        if (reply.getValue() != 1 || !bulk.read(run, sizeof(run))) return CUDA_ERROR_UNKNOWN;
        base = run[0];
        bytes = run[1];
        if (base % kManagedPageBytes || bytes % kManagedPageBytes || bytes == 0 ||
            address - base >= bytes || bytes != bulk.remaining()) {
          return CUDA_ERROR_UNKNOWN;
        }
        contents.resize(bytes);
        return bulk.read(contents.data(), bytes) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN;
      });
  if (r != CUDA_SUCCESS) return r;
  // The module's mirrors the range grew over (the server dropped their regions) make way.
  std::vector<CUdeviceptr> replaced;
  {
    std::lock_guard lock(managedMutex);
    for (auto it = managedAllocationMap().begin(); it != managedAllocationMap().end();) {
      if (it->second.context != ctx || it->second.module != m || it->first < base ||
          it->first + it->second.bytes > base + bytes) {
        ++it;
        continue;
      }
      unmapMirror(it->second, it->first);
      replaced.push_back(it->first);
      it = managedAllocationMap().erase(it);
    }
  }
  if (!replaced.empty()) {
    std::lock_guard stateLock(DriverState::get().mutex);
    for (CUdeviceptr old : replaced) DriverState::get().deviceAllocations.erase(old);
  }
  std::string why;
  if (!mirrorManagedRange(ctx, base, bytes, contents.data(), m, &why)) {
    return refuseCall(CUDA_ERROR_OUT_OF_MEMORY, "__managed__ variable '" + name + "': " + why);
  }
  std::lock_guard stateLock(DriverState::get().mutex);
  DeviceAllocation d{bytes, ctx};
  d.managed = true;
  d.moduleVariable = true;
  DriverState::get().deviceAllocations[base] = d;
  return CUDA_SUCCESS;
}

void dropManagedGlobalsOf(ModuleObject* m) {
  if (managedLive.load(std::memory_order_acquire) == 0) return;
  std::vector<CUdeviceptr> bases;
  {
    std::lock_guard lock(managedMutex);
    for (auto it = managedAllocationMap().begin(); it != managedAllocationMap().end();) {
      if (it->second.module != m) {
        ++it;
        continue;
      }
      unmapMirror(it->second, it->first);
      bases.push_back(it->first);
      it = managedAllocationMap().erase(it);
    }
  }
  std::lock_guard lock(DriverState::get().mutex);
  for (CUdeviceptr base : bases) DriverState::get().deviceAllocations.erase(base);
}

CUresult refreshManagedAfterWrite(ContextObject* ctx, CUdeviceptr dst) {
  if (managedLive.load(std::memory_order_acquire) == 0) return CUDA_SUCCESS;
  ManagedScope scope;
  std::lock_guard lock(managedMutex);
  if (!managedAllocationOf(ctx, dst, 0, nullptr)) return CUDA_SUCCESS;
  // Anything the host wrote first goes out ahead of the fetch, in order.
  if (CUresult r = flushManagedWrites(*ctx->server); r != CUDA_SUCCESS) return r;
  return fetchManagedChanges(ctx);
}

}  // namespace gpupool::client

// ---- Entry points ----

GPUPOOL_DRIVER_API CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                              unsigned int flags) {
  return allocateManaged(dptr, bytesize, flags);
}

GPUPOOL_DRIVER_API CUresult cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                           CUmemLocation location) {
  return advise(devPtr, count, advice, location);
}

GPUPOOL_DRIVER_API CUresult cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                        CUdevice device) {
  return advise(devPtr, count, advice, locationOf(device));
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count,
                                                  CUmemLocation location, unsigned int flags,
                                                  CUstream hStream) {
  return prefetch(devPtr, count, location, flags, hStream);
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                                       CUmemLocation location, unsigned int flags,
                                                       CUstream hStream) {
  PerThreadDefaultStream perThread;
  return prefetch(devPtr, count, location, flags, hStream);
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                               CUstream hStream) {
  return prefetch(devPtr, count, locationOf(dstDevice), 0, hStream);
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count,
                                                    CUdevice dstDevice, CUstream hStream) {
  PerThreadDefaultStream perThread;
  return prefetch(devPtr, count, locationOf(dstDevice), 0, hStream);
}

GPUPOOL_DRIVER_API CUresult cuMemRangeGetAttribute(void* data, size_t dataSize,
                                                   CUmem_range_attribute attribute,
                                                   CUdeviceptr devPtr, size_t count) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  return rangeAttribute(data, dataSize, static_cast<int>(attribute), devPtr, count);
}

GPUPOOL_DRIVER_API CUresult cuMemRangeGetAttributes(void** data, size_t* dataSizes,
                                                    CUmem_range_attribute* attributes,
                                                    size_t numAttributes, CUdeviceptr devPtr,
                                                    size_t count) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!data || !dataSizes || !attributes || numAttributes == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < numAttributes; ++i) {
    if (CUresult r =
            rangeAttribute(data[i], dataSizes[i], static_cast<int>(attributes[i]), devPtr, count);
        r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr,
                                                   size_t length, unsigned int flags) {
  return attachMemory(hStream, dptr, length, flags);
}

GPUPOOL_DRIVER_API CUresult cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr,
                                                        size_t length, unsigned int flags) {
  PerThreadDefaultStream perThread;
  return attachMemory(hStream, dptr, length, flags);
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                    CUmemLocation* prefetchLocs,
                                                    size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                    unsigned long long flags, CUstream hStream) {
  return batchManagedOp(BatchOp::kPrefetch, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                        numPrefetchLocs, flags, hStream, false);
}

GPUPOOL_DRIVER_API CUresult cuMemPrefetchBatchAsync_ptsz(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  PerThreadDefaultStream perThread;
  return batchManagedOp(BatchOp::kPrefetch, dptrs, sizes, count, prefetchLocs, prefetchLocIdxs,
                        numPrefetchLocs, flags, hStream, true);
}

GPUPOOL_DRIVER_API CUresult cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                   unsigned long long flags, CUstream hStream) {
  return batchManagedOp(BatchOp::kDiscard, dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream,
                        false);
}

GPUPOOL_DRIVER_API CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes,
                                                        size_t count, unsigned long long flags,
                                                        CUstream hStream) {
  PerThreadDefaultStream perThread;
  return batchManagedOp(BatchOp::kDiscard, dptrs, sizes, count, nullptr, nullptr, 0, flags, hStream,
                        true);
}

GPUPOOL_DRIVER_API CUresult cuMemDiscardAndPrefetchBatchAsync(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  return batchManagedOp(BatchOp::kDiscardAndPrefetch, dptrs, sizes, count, prefetchLocs,
                        prefetchLocIdxs, numPrefetchLocs, flags, hStream, false);
}

GPUPOOL_DRIVER_API CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  PerThreadDefaultStream perThread;
  return batchManagedOp(BatchOp::kDiscardAndPrefetch, dptrs, sizes, count, prefetchLocs,
                        prefetchLocIdxs, numPrefetchLocs, flags, hStream, true);
}
