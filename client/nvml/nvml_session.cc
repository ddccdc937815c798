#include "client/nvml/nvml_session.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "client/client_log.h"
#include "client/nvml/visible_devices.h"
#include "client/pool_token.h"
#include "protocol/gpupool.capnp.h"
#include "protocol/message_codec.h"
#include "transport/transport_factory.h"

namespace gpupool::nvml {
namespace {

constexpr unsigned kNvmlConnectTimeoutMs = 5000;
constexpr unsigned kNvmlReplyTimeoutMs = 10000;

// libcuda.so.1's channel into its driver session (client/shared_session_channel.cc), when our
// libcuda is loaded in this process.
struct SharedChannel {
  using Bytes = void (*)(void*, const void*, size_t);
  int (*available)(const char* url) = nullptr;
  int (*welcome)(const char* url, Bytes onBytes, void* context) = nullptr;
  int (*call)(const char* url, const void* request, size_t size, Bytes onBytes,
              void* context) = nullptr;
};

// A device's answer and when it came (kept for kLiveTtl).
template <typename Answer>
struct CachedAnswer {
  Answer answer;
  std::chrono::steady_clock::time_point at;
};

struct LibraryState {
  std::mutex mutex;
  unsigned initCount = 0;
  std::optional<transport::Endpoint> endpoint;
  std::string endpointUrl;  // the first GPU_POOL_ENDPOINT entry, as libcuda's session names it
  std::unique_ptr<transport::Connection> connection;
  SharedChannel channel;
  bool shared = false;                 // requests travel on libcuda's session, not on `connection`
  std::vector<VisibleDevice> devices;  // filled by the first successful nvmlInit, then kept
  bool described = false;              // devices filled from the Welcome
  bool identified = false;  // their UUID text and MIG identity filled from the first status
  int cudaVersion = 0;
  std::string serverVersion, backendKind, nvidiaDriverVersion;
  std::shared_ptr<const LiveStatus> live;
  std::chrono::steady_clock::time_point liveAt;
  std::map<unsigned, CachedAnswer<MemoryView>> memory;
  std::map<unsigned, CachedAnswer<std::shared_ptr<const AccountingView>>> accounting;
};

LibraryState& state() {
  static LibraryState* s = new LibraryState();  // never destroyed: callers may outlive statics
  return *s;
}

std::vector<nvmlDevice_st>& handleSlots() {
  static auto* slots = new std::vector<nvmlDevice_st>();
  return *slots;
}

// The MIG-enabled GPUs that top-level handles name, described from their instances' placement.
std::vector<VisibleDevice>& migParents() {
  static auto* parents = new std::vector<VisibleDevice>();
  return *parents;
}
unsigned topLevelSlots = 0;

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into its 16 bytes (zeros when it is not one).
void parseGpuUuid(const std::string& text, unsigned char (&bytes)[16]) {
  std::string hex;
  for (char c : text.substr(text.find('-') + 1)) {
    if (c != '-') hex += c;
  }
  if (hex.size() != 32) return;
  for (size_t i = 0; i < 16; ++i) {
    bytes[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
}

// The handle table, as NVIDIA's NVML orders it: every whole GPU, and every MIG-enabled GPU (one
// entry for all of its instances this process sees), at the top in the order their first device
// appears; the MIG devices after them. A MIG instance whose parent the server did not describe
// (a server without NVML) stays a top-level device of its own.
void buildHandleTable(const std::vector<VisibleDevice>& devices) {
  auto& slots = handleSlots();
  auto& parents = migParents();
  std::vector<std::pair<unsigned, unsigned>> migDevices;  // visible index, parent's slot
  for (unsigned i = 0; i < devices.size(); ++i) {
    const VisibleDevice& d = devices[i];
    if (!d.placed()) {
      slots.push_back({nvmlDevice_st::Kind::gpu, i, i, 0});
      continue;
    }
    unsigned parentSlot = 0;
    for (; parentSlot < slots.size(); ++parentSlot) {
      const nvmlDevice_st& slot = slots[parentSlot];
      if (slot.kind == nvmlDevice_st::Kind::migParent &&
          parents[slot.device].uuidText == d.parentUuid) {
        break;
      }
    }
    if (parentSlot == slots.size()) {
      VisibleDevice gpu;
      gpu.serverIndex = d.serverIndex;
      gpu.name = d.parentName;
      gpu.uuidText = d.parentUuid;
      parseGpuUuid(d.parentUuid, gpu.uuid);
      gpu.pciDomain = d.pciDomain;  // an instance reports its GPU's PCI address
      gpu.pciBus = d.pciBus;
      gpu.pciDevice = d.pciDevice;
      gpu.totalMemory = d.parentMemoryTotal;
      gpu.attributes = d.attributes;
      gpu.migMaxDevices = d.migMaxDevices;
      gpu.migModeChangePending = d.migModeChangePending;
      parents.push_back(std::move(gpu));
      slots.push_back(
          {nvmlDevice_st::Kind::migParent, static_cast<unsigned>(parents.size() - 1), i, 0});
    }
    parents[slots[parentSlot].device].instances.push_back(i);
    migDevices.emplace_back(i, parentSlot);
  }
  topLevelSlots = static_cast<unsigned>(slots.size());
  for (auto [visible, parentSlot] : migDevices) {
    slots.push_back({nvmlDevice_st::Kind::migDevice, visible, visible, parentSlot});
  }
}

// Found while libcuda.so.1 is not loaded yet (cudart loads it at its first call), so looked for
// again until it is; dlopen with RTLD_NOLOAD only looks among the loaded libraries.
const SharedChannel* sharedChannel(LibraryState& s) {
  if (s.channel.call) return &s.channel;
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!libcuda) return nullptr;
  SharedChannel found;
  found.available =
      reinterpret_cast<decltype(found.available)>(dlsym(libcuda, "gpupoolShareAvailable"));
  found.welcome = reinterpret_cast<decltype(found.welcome)>(dlsym(libcuda, "gpupoolShareWelcome"));
  found.call = reinterpret_cast<decltype(found.call)>(dlsym(libcuda, "gpupoolShareCall"));
  dlclose(libcuda);  // only drops the reference NOLOAD took: libcuda stays loaded
  if (!found.available || !found.welcome || !found.call) return nullptr;  // NVIDIA's libcuda
  s.channel = found;
  return &s.channel;
}

// Collects the flat message a shared-channel function hands over.
// (Held as uint64_t: capnp::word is not copyable, so no std::vector of it.)
void collectWords(void* context, const void* bytes, size_t size) {
  auto* words = static_cast<std::vector<uint64_t>*>(context);
  words->resize(size / sizeof(uint64_t));
  std::memcpy(words->data(), bytes, words->size() * sizeof(uint64_t));
}

kj::ArrayPtr<const capnp::word> asWords(const std::vector<uint64_t>& words) {
  return kj::arrayPtr(reinterpret_cast<const capnp::word*>(words.data()), words.size());
}

nvmlReturn_t failed(nvmlReturn_t code, const std::string& why) {
  if (client::logLevel() >= 1) client::logLine("NVML: " + why);
  return code;
}

// One request, one reply, on the status connection (under the state's mutex).
std::unique_ptr<protocol::IncomingMessage> nvmlExchange(transport::Connection& connection,
                                                        capnp::MallocMessageBuilder& request) {
  protocol::sendMessage(connection, request);
  auto reply = std::make_unique<protocol::IncomingMessage>(connection);
  if (reply->bulkBytes() != 0) connection.discardBulk(reply->bulkBytes());
  return reply;
}

std::string programLabel() {
  char path[256] = {};
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  std::string name = n > 0 ? std::string(path, static_cast<size_t>(n)) : "unknown";
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return name + " (pid " + std::to_string(::getpid()) + ", nvml)";
}

// The devices as the server's Welcome describes them (once: handles stay valid).
void describeLocked(LibraryState& s, wire::Welcome::Reader welcome) {
  if (!s.described) {
    s.cudaVersion = welcome.getDriverVersion();
    s.serverVersion = welcome.getServerVersion();
    s.backendKind = welcome.getBackendKind();
    std::vector<VisibleDevice> all;
    for (auto d : welcome.getDevices()) {
      VisibleDevice v;
      v.serverIndex = static_cast<unsigned>(all.size());
      v.name = d.getName();
      auto uuid = d.getUuid();
      if (uuid.size() == sizeof v.uuid) std::memcpy(v.uuid, uuid.begin(), sizeof v.uuid);
      v.pciDomain = d.getPciDomain();
      v.pciBus = d.getPciBus();
      v.pciDevice = d.getPciDevice();
      v.totalMemory = d.getTotalMemory();
      for (int32_t a : d.getAttributes()) v.attributes.push_back(a);
      v.uuidText = formatGpuUuid(v.uuid);
      all.push_back(std::move(v));
    }
    s.devices = selectVisibleDevices(all, std::getenv("CUDA_VISIBLE_DEVICES"));
    s.described = true;
  }
}

// Moves to libcuda's session to the same server when this process has one: one connection per
// process, with the driver session's token and TLS. True when requests now travel there.
bool shareLocked(LibraryState& s) {
  if (s.shared) return true;
  const SharedChannel* channel = sharedChannel(s);
  if (!channel || !channel->available(s.endpointUrl.c_str())) return false;
  if (!s.described) {
    std::vector<uint64_t> words;
    if (channel->welcome(s.endpointUrl.c_str(), collectWords, &words) != 0) return false;
    try {
      capnp::FlatArrayMessageReader message(asWords(words));
      auto response = message.getRoot<wire::Response>();
      if (!response.isWelcome()) return false;
      describeLocked(s, response.getWelcome());
    } catch (const kj::Exception& e) {
      failed(NVML_ERROR_UNKNOWN, "libcuda's Welcome: " + std::string(e.getDescription().cStr()));
      return false;
    }
  }
  s.connection.reset();  // the status connection, if NVML opened one before libcuda connected
  s.shared = true;
  if (client::logLevel() >= 1) {
    client::logLine("NVML: sharing libcuda's session to " + s.endpointUrl);
  }
  return true;
}

// Connects and says Hello as a status client (no driver session is admitted or charged), with the
// token, so the server knows the tenant whose quota the memory answers show.
nvmlReturn_t connectLocked(LibraryState& s) {
  if (shareLocked(s)) return NVML_SUCCESS;
  s.connection.reset();
  try {
    auto connection = transport::connectEndpoint(*s.endpoint, kNvmlConnectTimeoutMs);
    connection->setReceiveTimeoutMs(kNvmlReplyTimeoutMs);
    capnp::MallocMessageBuilder message;
    auto hello = message.initRoot<wire::Request>().initHello();
    hello.setProtocolVersion(wire::PROTOCOL_VERSION);
    std::string unreadable;
    auto token = client::poolToken(&unreadable);
    if (!unreadable.empty()) {
      client::logLine("NVML: " + unreadable);  // a setup mistake: said whatever GPU_POOL_LOG is
      return NVML_ERROR_NO_PERMISSION;
    }
    if (token) hello.setAuthToken(*token);
    hello.setClientName(programLabel());
    hello.setPurpose(wire::Hello::Purpose::STATUS);
    auto reply = nvmlExchange(*connection, message);
    auto response = reply->root<wire::Response>();
    if (response.getResult() != 0 || !response.isWelcome()) {
      return failed(NVML_ERROR_NO_PERMISSION, s.endpoint->url() + " refused the NVML connection: " +
                                                  std::string(response.getMessage().cStr()));
    }
    describeLocked(s, response.getWelcome());
    s.connection = std::move(connection);
    s.shared = false;
    return NVML_SUCCESS;
  } catch (const transport::TransportError& e) {
    return failed(NVML_ERROR_DRIVER_NOT_LOADED,
                  "cannot reach " + s.endpoint->url() + ": " + std::string(e.what()));
  } catch (const kj::Exception& e) {
    return failed(NVML_ERROR_UNKNOWN, s.endpoint->url() + ": malformed reply: " +
                                          std::string(e.getDescription().cStr()));
  }
}

// Sends one request built by `build` and hands its Response to `read`: on libcuda's session when
// this process has one (moving there as soon as it does), else on the status connection, which is
// reconnected once when it was lost (the server may have closed an idle status connection).
template <typename Build, typename Read>
nvmlReturn_t askLocked(LibraryState& s, const char* what, Build&& build, Read&& read) {
  auto answer = [&](wire::Response::Reader response) {
    if (uint32_t result = response.getResult(); result != 0) {
      // A server that predates the request answers NOT_SUPPORTED; a pool refuses a connection
      // without a tenant what is per tenant.
      nvmlReturn_t as = result == CUDA_ERROR_NOT_SUPPORTED   ? NVML_ERROR_NOT_SUPPORTED
                        : result == CUDA_ERROR_NOT_PERMITTED ? NVML_ERROR_NO_PERMISSION
                                                             : NVML_ERROR_UNKNOWN;
      return failed(as, std::string(what) +
                            " refused by the server: " + std::string(response.getMessage().cStr()));
    }
    return read(response);
  };
  for (int attempt = 0; attempt < 2; ++attempt) {
    // At GPU_POOL_LOG=2 each request to the server is logged, as libcuda logs each remote call:
    // how a monitoring loop's cost shows (the cache keeps it to one per kLiveTtl).
    if (shareLocked(s)) {
      if (client::logLevel() >= 2)
        client::logLine(std::string("NVML: request ") + what + " (shared)");
      capnp::MallocMessageBuilder message;
      build(message.initRoot<wire::Request>());
      auto flat = capnp::messageToFlatArray(message);
      std::vector<uint64_t> reply;
      int rc = s.channel.call(s.endpointUrl.c_str(), flat.begin(),
                              flat.size() * sizeof(capnp::word), collectWords, &reply);
      if (rc > 0) {
        return failed(
            NVML_ERROR_GPU_IS_LOST,
            std::string(what) + ": libcuda's session failed (CUresult " + std::to_string(rc) + ")");
      }
      if (rc == 0) {
        try {
          capnp::FlatArrayMessageReader in(asWords(reply));
          return answer(in.getRoot<wire::Response>());
        } catch (const kj::Exception& e) {
          return failed(NVML_ERROR_UNKNOWN,
                        std::string(what) + ": malformed reply: " + e.getDescription().cStr());
        }
      }
      s.shared = false;  // libcuda's session is gone: NVML connects on its own
    }
    if (!s.connection) {
      if (nvmlReturn_t r = connectLocked(s); r != NVML_SUCCESS) return r;
      if (s.shared) continue;
    }
    if (client::logLevel() >= 2) client::logLine(std::string("NVML: request ") + what);
    try {
      capnp::MallocMessageBuilder message;
      build(message.initRoot<wire::Request>());
      auto reply = nvmlExchange(*s.connection, message);
      return answer(reply->root<wire::Response>());
    } catch (const transport::TransportError& e) {
      s.connection.reset();
      if (attempt == 1) {
        return failed(NVML_ERROR_GPU_IS_LOST, std::string(what) + ": " + e.what());
      }
    } catch (const kj::Exception& e) {
      s.connection.reset();
      return failed(NVML_ERROR_UNKNOWN,
                    std::string(what) + ": malformed reply: " + e.getDescription().cStr());
    }
  }
  return NVML_ERROR_UNKNOWN;
}

// The live figures from a status reply; the first one also gives the devices' identity: the UUID
// text `gpupool status` shows (MIG-… for MIG instances) and the MIG parent and profile.
nvmlReturn_t refreshLiveLocked(LibraryState& s) {
  auto ownPid = static_cast<unsigned>(::getpid());
  std::string pidTag = "(pid " + std::to_string(ownPid) + ")";
  return askLocked(
      s, "status", [](wire::Request::Builder r) { r.setStatus(); },
      [&](wire::Response::Reader response) {
        if (!response.isStatus()) return failed(NVML_ERROR_UNKNOWN, "status: unexpected reply");
        auto status = response.getStatus();
        auto live = std::make_shared<LiveStatus>();
        auto devices = status.getDevices();
        for (auto& v : s.devices) {
          LiveStatus::Device d;
          if (v.serverIndex < devices.size()) {
            auto from = devices[v.serverIndex];
            d.memoryUsed = from.getMemoryUsed();
            d.memoryTotal = from.getMemoryTotal();
            d.utilization = from.getUtilization();
            d.utilizationMeasured = from.getUtilizationMeasured();
            d.sessions = from.getSessions();
            d.sensors = protocol::readSensorFigures(from.getSensors());
            // Identity once, before nvmlInit returns: other threads read it without the lock.
            if (!s.identified) {
              if (from.getUuid().size()) v.uuidText = from.getUuid();
              v.parentUuid = from.getParent();
              v.profile = from.getProfile();
              if (from.hasMig()) {
                auto mig = from.getMig();
                v.parentName = mig.getParentName();
                v.parentMemoryTotal = mig.getParentMemoryTotal();
                v.migIndex = mig.getIndex();
                v.migMaxDevices = mig.getMaxDevices();
                v.gpuInstanceId = mig.getGpuInstanceId();
                v.computeInstanceId = mig.getComputeInstanceId();
                v.migModeChangePending = mig.getModeChangePending();
              }
            }
          }
          live->devices.push_back(d);
        }
        for (auto session : status.getSessions()) {
          std::string name = session.getClientName();
          if (name.size() >= pidTag.size() &&
              name.compare(name.size() - pidTag.size(), pidTag.size(), pidTag) == 0) {
            OwnSession own{ownPid, session.getMemoryUsed(), {}};
            for (uint32_t d : session.getDevices()) own.serverDevices.push_back(d);
            live->ownSessions.push_back(std::move(own));
          }
        }
        if (!s.identified) s.nvidiaDriverVersion = status.getNvidiaDriverVersion();
        s.identified = true;
        s.live = std::move(live);
        s.liveAt = std::chrono::steady_clock::now();
        return NVML_SUCCESS;
      });
}

}  // namespace

nvmlReturn_t initLibrary() {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.initCount > 0) {
    ++s.initCount;
    return NVML_SUCCESS;
  }
  if (!s.endpoint) {
    const char* text = std::getenv("GPU_POOL_ENDPOINT");
    if (!text || !*text) {
      return failed(NVML_ERROR_DRIVER_NOT_LOADED, "GPU_POOL_ENDPOINT is not set: no pool to ask");
    }
    std::string error;
    auto endpoints = transport::parseEndpointList(text, &error);
    if (!endpoints) return failed(NVML_ERROR_DRIVER_NOT_LOADED, "GPU_POOL_ENDPOINT: " + error);
    // NVML asks the first server of the list (as `gpupool status` does).
    transport::Endpoint first = endpoints->front();
    s.endpointUrl = first.url();
    if (first.scheme == "rdma") first.scheme = "tcp";  // status travels over TCP beside RDMA
    if (first.scheme != "tcp" && first.scheme != "tls") {
      return failed(NVML_ERROR_DRIVER_NOT_LOADED,
                    "NVML speaks tcp:// and tls:// only, not " + first.url());
    }
    s.endpoint = first;
  }
  if (nvmlReturn_t r = connectLocked(s); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = refreshLiveLocked(s); r != NVML_SUCCESS) return r;
  if (handleSlots().empty()) {
    handleSlots().reserve(2 * s.devices.size());  // never reallocated: handles point into it
    buildHandleTable(s.devices);
  }
  s.initCount = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t shutdownLibrary() {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  if (s.initCount == 0) return NVML_ERROR_UNINITIALIZED;
  if (--s.initCount == 0) {
    s.connection.reset();
    s.shared = false;
    s.live.reset();
    s.memory.clear();
    s.accounting.clear();
  }
  return NVML_SUCCESS;
}

nvmlReturn_t checkInitialized() {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  return s.initCount ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

// The device list is fixed once described, so it is read without the lock.
const std::vector<VisibleDevice>& visibleDevices() { return state().devices; }

const VisibleDevice* deviceOf(nvmlDevice_t handle, nvmlReturn_t* result) {
  if ((*result = checkInitialized()) != NVML_SUCCESS) return nullptr;
  const auto& slots = handleSlots();
  if (!handle || slots.empty() || handle < &slots.front() || handle > &slots.back()) {
    *result = NVML_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  if (handle->kind == nvmlDevice_st::Kind::migParent) return &migParents()[handle->device];
  return &state().devices[handle->device];
}

unsigned topLevelCount() { return topLevelSlots; }
nvmlDevice_t topLevelHandle(unsigned index) { return &handleSlots().at(index); }

std::vector<nvmlDevice_t> allHandles() {
  std::vector<nvmlDevice_t> handles;
  for (nvmlDevice_st& slot : handleSlots()) handles.push_back(&slot);
  return handles;
}

nvmlDevice_t handleOfVisible(unsigned visibleIndex) {
  for (nvmlDevice_st& slot : handleSlots()) {
    if (slot.kind != nvmlDevice_st::Kind::migParent && slot.device == visibleIndex) return &slot;
  }
  return nullptr;
}
int cudaDriverVersion() { return state().cudaVersion; }
const std::string& serverVersion() { return state().serverVersion; }
const std::string& backendKind() { return state().backendKind; }
const std::string& nvidiaDriverVersion() { return state().nvidiaDriverVersion; }

nvmlReturn_t liveStatus(std::shared_ptr<const LiveStatus>* out) {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.initCount) return NVML_ERROR_UNINITIALIZED;
  if (!s.live || std::chrono::steady_clock::now() - s.liveAt >= kLiveTtl) {
    if (nvmlReturn_t r = refreshLiveLocked(s); r != NVML_SUCCESS) return r;
  }
  *out = s.live;
  return NVML_SUCCESS;
}

nvmlReturn_t liveDeviceStatus(nvmlDevice_t device, LiveStatus::Device* out,
                              std::shared_ptr<const LiveStatus>* keep) {
  nvmlReturn_t r;
  if (!deviceOf(device, &r)) return r;
  std::shared_ptr<const LiveStatus> live;
  if ((r = liveStatus(&live)) != NVML_SUCCESS) return r;
  if (device->live >= live->devices.size()) return NVML_ERROR_GPU_IS_LOST;
  *out = live->devices[device->live];
  if (keep) *keep = std::move(live);
  return NVML_SUCCESS;
}

namespace {

// The cached answer of device `visibleIndex` while it is fresh, else what `fetch` asks the server
// (then cached). Called with the library's lock held.
template <typename Answer, typename Fetch>
nvmlReturn_t cachedLocked(LibraryState& s, std::map<unsigned, CachedAnswer<Answer>>& cache,
                          unsigned visibleIndex, Answer* out, Fetch&& fetch) {
  if (!s.initCount) return NVML_ERROR_UNINITIALIZED;
  auto now = std::chrono::steady_clock::now();
  auto cached = cache.find(visibleIndex);
  if (cached != cache.end() && now - cached->second.at < kLiveTtl) {
    *out = cached->second.answer;
    return NVML_SUCCESS;
  }
  Answer fresh{};
  if (nvmlReturn_t r = fetch(s.devices.at(visibleIndex).serverIndex, &fresh); r != NVML_SUCCESS) {
    return r;
  }
  cache[visibleIndex] = {fresh, now};
  *out = std::move(fresh);
  return NVML_SUCCESS;
}

// N of a client name ending in "(pid N)"; 0 when it carries none.
unsigned pidInClientName(const std::string& name) {
  static const std::string tag = "(pid ";
  auto at = name.rfind(tag);
  if (at == std::string::npos || name.empty() || name.back() != ')') return 0;
  std::string digits = name.substr(at + tag.size(), name.size() - 1 - (at + tag.size()));
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return 0;
  }
  return static_cast<unsigned>(std::stoul(digits));
}

}  // namespace

nvmlReturn_t memoryView(unsigned visibleIndex, MemoryView* out) {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  return cachedLocked(s, s.memory, visibleIndex, out, [&](unsigned serverIndex, MemoryView* view) {
    return askLocked(
        s, "nvmlMemoryInfo", [&](wire::Request::Builder b) { b.setNvmlMemoryInfo(serverIndex); },
        [&](wire::Response::Reader response) {
          if (!response.isMemInfo()) return failed(NVML_ERROR_UNKNOWN, "memory: unexpected reply");
          view->free = response.getMemInfo().getFree();
          view->total = response.getMemInfo().getTotal();
          return NVML_SUCCESS;
        });
  });
}

nvmlReturn_t accountingView(unsigned visibleIndex, std::shared_ptr<const AccountingView>* out) {
  LibraryState& s = state();
  std::lock_guard lock(s.mutex);
  return cachedLocked(
      s, s.accounting, visibleIndex, out,
      [&](unsigned serverIndex, std::shared_ptr<const AccountingView>* answer) {
        auto view = std::make_shared<AccountingView>();
        nvmlReturn_t r = askLocked(
            s, "nvmlAccounting",
            [&](wire::Request::Builder b) { b.setNvmlAccounting(serverIndex); },
            [&](wire::Response::Reader response) {
              if (!response.isAccounting()) {
                return failed(NVML_ERROR_UNKNOWN, "accounting: unexpected reply");
              }
              auto accounting = response.getAccounting();
              view->bufferSize = accounting.getBufferSize();
              for (auto from : accounting.getRecords()) {
                unsigned pid = pidInClientName(from.getClientName());
                if (!pid) continue;
                view->records.push_back({pid, from.getStartTimeUs(), from.getEndTimeUs(),
                                         from.getKernelSeconds(), from.getPeakMemory()});
              }
              return NVML_SUCCESS;
            });
        *answer = std::move(view);
        return r;
      });
}

nvmlReturn_t copyText(const std::string& text, char* buffer, unsigned length) {
  if (!buffer) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace gpupool::nvml
