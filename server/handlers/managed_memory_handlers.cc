// Managed memory (cuMemAllocManaged) as ordinary device memory, charged to the tenant's quota, with
// the client holding a host mirror at the same address. The client sends the pages its host code
// wrote (write); at a synchronization point it asks for the pages the device changed (fetch). The
// server keeps the hash of every page as the client last saw it, so a fetch returns only pages
// whose contents differ from that: the client's page tracking covers host writes, these hashes
// cover device writes, and neither side moves pages nobody wrote. A __managed__ variable's memory
// (adoptGlobal) is a region like any other, owned by its module rather than freed by the client.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "server/handlers/bulk_placement.h"
#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

// The granularity of coherence: the client's host page.
constexpr uint64_t kManagedPage = 4096;

// A 64-bit hash of one page (four independent lanes, so it runs at memory speed).
uint64_t managedPageHash(const uint8_t* page) {
  constexpr uint64_t kMul1 = 0x9e3779b97f4a7c15ull, kMul2 = 0xc2b2ae3d27d4eb4full;
  uint64_t lane[4] = {1, 2, 3, 4};
  for (uint64_t i = 0; i < kManagedPage; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, page + i + 8 * l, 8);
      uint64_t x = lane[l] ^ (w * kMul1);
      lane[l] = ((x << 31) | (x >> 33)) * kMul2;
    }
  }
  uint64_t h =
      lane[0] ^ (lane[1] * kMul1) ^ (lane[2] * kMul2) ^ ((lane[3] << 17) | (lane[3] >> 47));
  h ^= h >> 29;
  h *= kMul1;
  return h ^ (h >> 32);
}

using ManagedRegion = SessionState::ManagedRegion;

// The region that holds [address, address+bytes), or null.
ManagedRegion* managedRegionOf(SessionState& session, uint64_t context, uint64_t address,
                               uint64_t bytes, uint64_t* base) {
  auto it = session.managed.upper_bound(address);
  if (it == session.managed.begin()) return nullptr;
  --it;
  ManagedRegion& region = it->second;
  if (region.context != context || address - it->first >= region.bytes ||
      bytes > region.bytes - (address - it->first)) {
    return nullptr;
  }
  *base = it->first;
  return &region;
}

Status managedAlloc(RequestContext& request, BackendContext& context, uint64_t id, uint64_t bytes) {
  if (bytes == 0 || bytes % kManagedPage) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "managed allocations are whole pages");
  }
  uint64_t address = 0;
  auto allocate = [&](uint64_t* at) { return context.memAlloc(bytes, at); };
  if (Status st = chargedAllocation(request, context, bytes, allocate, &address); !st.ok()) {
    return st;
  }
  // The client's fresh mirror reads as zeros, so the device copy starts as zeros too.
  if (Status st = context.memset(address, 0, 1, bytes, 1, bytes, 0, false); !st.ok()) {
    (void)chargedFree(request, context, id, address, [&] { return context.memFree(address); });
    return st;
  }
  // A region of a context destroyed since may have held these addresses: it is gone with it.
  auto& managed = request.session.managed;
  for (auto it = managed.lower_bound(address);
       it != managed.end() && it->first < address + bytes;) {
    it = managed.erase(it);
  }
  if (auto it = managed.lower_bound(address); it != managed.begin()) {
    if (--it; it->first + it->second.bytes > address) managed.erase(it);
  }
  std::vector<uint8_t> zeros(kManagedPage, 0);
  ManagedRegion region{id, bytes, std::vector<uint64_t>(bytes / kManagedPage)};
  std::fill(region.pageHashes.begin(), region.pageHashes.end(), managedPageHash(zeros.data()));
  request.session.managed[address] = std::move(region);
  auto out = request.reply.initMemAlloc();
  out.setAddress(address);
  return Status::success();
}

Status managedFree(RequestContext& request, BackendContext& context, uint64_t id,
                   uint64_t address) {
  auto it = request.session.managed.find(address);
  if (it == request.session.managed.end() || it->second.context != id || it->second.module) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "not a managed allocation of this context");
  }
  request.session.managed.erase(it);
  return chargedFree(request, context, id, address, [&] { return context.memFree(address); });
}

// The client's written pages, in order: each run is received, hashed and written to the device.
Status managedWrite(RequestContext& request, BackendContext& context, uint64_t id,
                    capnp::List<uint64_t>::Reader runs) {
  if (runs.size() % 2) return Status::error(CUDA_ERROR_INVALID_VALUE, "malformed managed runs");
  uint64_t total = 0;
  for (unsigned i = 0; i < runs.size(); i += 2) {
    uint64_t base = 0;
    uint64_t address = runs[i], bytes = runs[i + 1];
    if (address % kManagedPage || bytes % kManagedPage || total + bytes < total ||
        !managedRegionOf(request.session, id, address, bytes, &base)) {
      return Status::error(CUDA_ERROR_INVALID_VALUE, "managed write outside managed memory");
    }
    total += bytes;
  }
  if (total != request.bulkBytes()) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "managed write bytes do not match its bulk");
  }
  ScratchBuffer& staging = request.session.staging;
  for (unsigned i = 0; i < runs.size(); i += 2) {
    uint64_t base = 0;
    uint64_t address = runs[i], bytes = runs[i + 1];
    ManagedRegion* region = managedRegionOf(request.session, id, address, bytes, &base);
    for (uint64_t done = 0; done < bytes;) {
      uint64_t n = std::min(bytes - done, kBulkChunkBytes);
      uint8_t* landing = static_cast<uint8_t*>(context.hostView(address + done, n));
      if (!landing) {
        staging.resize(n);
        landing = staging.data();
      }
      request.receiveBulk(landing, n);
      for (uint64_t p = 0; p < n; p += kManagedPage) {
        region->pageHashes[(address + done + p - base) / kManagedPage] =
            managedPageHash(landing + p);
      }
      if (landing == staging.data()) {
        if (Status st = context.copyHostToDevice(address + done, landing, n, 0, false); !st.ok()) {
          return st;
        }
      }
      done += n;
    }
  }
  return Status::success();
}

// Adds the pages of [base + from, base + to) whose hash changed (all of them with `all`) to the
// reply's runs, coalesced within the region: the client finds each run inside one allocation, and
// regions may be adjacent.
void collectChangedPages(SessionState& session, ManagedRegion& region, uint64_t base,
                         const uint8_t* contents, uint64_t from, uint64_t to, bool copyBytes,
                         bool all = false) {
  for (uint64_t offset = from; offset < to; offset += kManagedPage) {
    const uint8_t* page = contents + (offset - from);
    uint64_t hash = managedPageHash(page);
    uint64_t& seen = region.pageHashes[offset / kManagedPage];
    if (hash == seen && !all) continue;
    seen = hash;
    auto& runs = session.managedReplyRuns;
    if (!runs.empty() && offset > 0 && runs[runs.size() - 2] + runs.back() == base + offset) {
      runs.back() += kManagedPage;
    } else {
      runs.push_back(base + offset);
      runs.push_back(kManagedPage);
    }
    if (copyBytes) {
      session.managedReplyBytes.insert(session.managedReplyBytes.end(), page, page + kManagedPage);
    }
  }
}

// Every managed page of context `id` the device changed since the client last saw it; with
// `onlyBase`, every page of the region at that address (a region just adopted).
Status managedFetch(RequestContext& request, BackendContext& context, uint64_t id,
                    std::optional<uint64_t> onlyBase = std::nullopt) {
  SessionState& session = request.session;
  session.managedReplyRuns.clear();
  session.managedReplyBytes.clear();
  auto wanted = [&](uint64_t base, const ManagedRegion& region) {
    return region.context == id && (!onlyBase || *onlyBase == base);
  };
  // Whether the reply's bytes are device memory itself (emu) or copies (a real device).
  bool direct = true;
  for (auto& [base, region] : session.managed) {
    if (wanted(base, region) && !context.hostView(base, region.bytes)) direct = false;
  }
  const bool all = onlyBase.has_value();
  for (auto& [base, region] : session.managed) {
    if (!wanted(base, region)) continue;
    if (direct) {
      const auto* view = static_cast<const uint8_t*>(context.hostView(base, region.bytes));
      collectChangedPages(session, region, base, view, 0, region.bytes, false, all);
      continue;
    }
    ScratchBuffer& staging = session.staging;
    for (uint64_t done = 0; done < region.bytes;) {
      uint64_t n = std::min(region.bytes - done, kBulkChunkBytes);
      staging.resize(n);
      if (Status st = context.copyDeviceToHost(staging.data(), base + done, n, 0); !st.ok()) {
        return st;
      }
      collectChangedPages(session, region, base, staging.data(), done, done + n, true, all);
      done += n;
    }
  }
  const auto& runs = session.managedReplyRuns;
  request.reply.setValue(static_cast<int64_t>(runs.size() / 2));
  if (runs.empty()) return Status::success();
  request.replyBulk.push_back({runs.data(), runs.size() * sizeof(uint64_t)});
  if (!direct) {
    request.replyBulk.push_back(
        {session.managedReplyBytes.data(), session.managedReplyBytes.size()});
    return Status::success();
  }
  for (size_t i = 0; i < runs.size(); i += 2) {
    request.replyBulk.push_back({context.hostView(runs[i], runs[i + 1]), runs[i + 1]});
  }
  return Status::success();
}

// A __managed__ variable of a loaded module becomes a managed region, its pages coherent with the
// client's mirror like those of cuMemAllocManaged; the reply carries all of them, the mirror's
// first contents. The module's unload ends the region (module_handlers.cc).
Status managedAdoptGlobal(RequestContext& request, BackendContext& context, uint64_t id,
                          uint64_t module, const std::string& name) {
  uint64_t address = 0, bytes = 0, base = 0, rangeBytes = 0;
  if (Status st = context.moduleGetGlobal(module, name, &address, &bytes); !st.ok()) return st;
  if (Status st = context.moduleManagedRange(module, address, &base, &rangeBytes); !st.ok()) {
    return st;
  }
  if (rangeBytes == 0) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "'" + name + "' is not a __managed__ variable");
  }
  if (base % kManagedPage || rangeBytes % kManagedPage) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "managed variable range is not whole pages");
  }
  auto& managed = request.session.managed;
  bool known = false;
  for (auto it = managed.begin(); it != managed.end();) {
    const bool overlaps = it->first < base + rangeBytes && base < it->first + it->second.bytes;
    if (!overlaps) {
      ++it;
      continue;
    }
    if (it->second.context != id) {
      it = managed.erase(it);  // a region of a context destroyed since
      continue;
    }
    if (it->first == base && it->second.bytes == rangeBytes && it->second.module == module) {
      known = true;  // another variable in the same managed memory, or asked again
      ++it;
      continue;
    }
    if (it->second.module == module && base <= it->first &&
        it->first + it->second.bytes <= base + rangeBytes) {
      // The module's managed memory known so far, grown by this variable's pages (a driver that
      // names no allocation for them: cuda_context.cc): the client's mirror of it makes way for
      // one of the whole range, which the reply fills, after it sent its writes.
      it = managed.erase(it);
      continue;
    }
    return Status::error(CUDA_ERROR_NOT_SUPPORTED,
                         "managed variable '" + name +
                             "' shares host pages with other managed memory, which its mirror "
                             "cannot");
  }
  if (!known) {
    managed[base] =
        ManagedRegion{id, rangeBytes, std::vector<uint64_t>(rangeBytes / kManagedPage), module};
  }
  return managedFetch(request, context, id, base);
}

Status managedMemory(RequestContext& request, Request::Reader r) {
  auto m = r.getManagedMemory();
  uint64_t id = m.getContext();
  return request.withContext(id, [&](BackendContext& context) {
    switch (m.getOp()) {
      case Request::ManagedMemoryOp::ALLOC:
        return managedAlloc(request, context, id, m.getBytes());
      case Request::ManagedMemoryOp::FREE:
        return managedFree(request, context, id, m.getAddress());
      case Request::ManagedMemoryOp::WRITE:
        return managedWrite(request, context, id, m.getRuns());
      case Request::ManagedMemoryOp::FETCH:
        return managedFetch(request, context, id);
      case Request::ManagedMemoryOp::ADOPT_GLOBAL:
        return managedAdoptGlobal(request, context, id, m.getModule(), m.getName());
    }
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown managed memory operation");
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MANAGED_MEMORY, managedMemory},
};

}  // namespace

std::span<const RequestHandlerRow> managedMemoryHandlers() { return kRows; }

}  // namespace gpupool::server
