// gpupoold: the GPU pool server.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "server/backends/emu/emu_backend.h"
#include "server/backends/emu/emu_memory.h"
#include "server/device_uuid.h"
#include "server/malloc_in_use.h"
#include "server/metrics_http.h"
#include "server/mig_enumeration.h"
#include "server/pool_config.h"
#include "server/pool_server.h"
#include "server/readiness_set.h"
#include "server/tenant_pool.h"
#include "transport/endpoint.h"
#include "transport/open_file_limit.h"
#include "transport/pinned_memory.h"
#include "transport/transport_factory.h"
#ifdef GPUPOOL_HAVE_CUDA_BACKEND
#include "server/backends/cuda/cuda_backend.h"
#endif

namespace {

// gpupoold's exit status after a fatal device fault under --on-device-fault exit (EX_TEMPFAIL of
// sysexits.h: try again later), so that its supervisor restarts it (deploy/).
constexpr int kDeviceFaultExitStatus = 75;
// How long a faulted gpupoold goes on answering (refusing) calls before it exits.
constexpr auto kDeviceFaultGrace = std::chrono::seconds(1);

// "4GiB", "512MiB", "64KiB", "1G", or plain bytes.
bool parseSize(const std::string& text, uint64_t* out) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(pos);
  uint64_t scale = 1;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "KiB" || unit == "K")
    scale = 1ull << 10;
  else if (unit == "MiB" || unit == "M")
    scale = 1ull << 20;
  else if (unit == "GiB" || unit == "G")
    scale = 1ull << 30;
  else if (unit == "TiB" || unit == "T")
    scale = 1ull << 40;
  else
    return false;
  *out = value * scale;
  return true;
}

// `gpupoold --list-devices`: what this machine could pool, as NVML sees it.
int listPoolDevices(const std::string& nvmlLibrary) {
  std::string error;
  auto nvml = gpupool::server::openNvml(nvmlLibrary, &error);
  if (!nvml) {
    std::cerr << "gpupoold: NVML is unavailable, so devices cannot be listed: " << error << "\n";
    return 1;
  }
  auto devices = gpupool::server::enumeratePoolDevices(*nvml, &error);
  if (!error.empty()) {
    std::cerr << "gpupoold: NVML: " << error << "\n";
    return 1;
  }
  for (const auto& d : devices) {
    std::cout << d.uuid << "  " << d.name << "  " << (d.memoryBytes >> 20) << " MiB";
    if (!d.parentUuid.empty()) std::cout << "  MIG " << d.profile << " on " << d.parentUuid;
    if (d.migPending) std::cout << "  (MIG mode changes at the next GPU reset)";
    std::cout << "\n";
  }
  if (devices.empty()) std::cout << "no devices\n";
  return 0;
}

// What status shows of the cuda devices beyond the backend's description, from the server's NVML
// when it is there: UUIDs as NVIDIA tools write them, MIG parent and profile, and the sensors.
// Without NVML a MIG instance is known only by the uuid configured for it, and shows no sensors.
struct CudaDeviceViews {
  std::vector<gpupool::server::PoolServer::DeviceIdentity> identities;
  std::unique_ptr<gpupool::server::DeviceSensors> sensors;
};

CudaDeviceViews cudaDeviceViews(const gpupool::server::Backend& backend,
                                const gpupool::server::PoolConfig* config,
                                const std::string& nvmlLibrary, bool verbose) {
  using namespace gpupool::server;
  std::string error;
  std::vector<PoolDeviceCandidate> candidates;
  auto nvml = openNvml(nvmlLibrary, &error);
  if (nvml) candidates = enumeratePoolDevices(*nvml, &error);
  if (!error.empty() && verbose) {
    std::cerr << "gpupoold: no MIG parent/profile or sensors in status: " << error << "\n";
  }
  CudaDeviceViews views;
  std::vector<NvmlHandle> gpus;
  for (size_t i = 0; i < backend.devices().size(); ++i) {
    const auto& uuid = backend.devices()[i].uuid;
    PoolServer::DeviceIdentity identity{formatDeviceUuid("GPU-", uuid), "", "", {}};
    if (config && i < config->devices.size() && config->devices[i].uuid.rfind("MIG-", 0) == 0) {
      identity.uuid = formatDeviceUuid("MIG-", uuid);
    }
    NvmlHandle gpu = nullptr;
    if (const PoolDeviceCandidate* c = findPoolDevice(candidates, uuid)) {
      identity = {c->uuid, c->parentUuid, c->profile, c->mig};
      if (nvml->deviceHandle(c->gpuIndex, &gpu) != kNvmlSuccess) gpu = nullptr;
    }
    gpus.push_back(gpu);
    views.identities.push_back(std::move(identity));
  }
  if (nvml && error.empty()) {
    views.sensors = std::make_unique<DeviceSensors>(std::move(nvml), std::move(gpus));
  }
  return views;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupool;
  CLI::App app{"gpupoold: serves pooled GPUs to gpupool clients (libcuda.so.1)", "gpupoold"};
  // With the malloc in use: performance reports and bug reports need it (docs/performance.md).
  app.set_version_flag("--version", std::string(server::PoolServer::version()) +
                                        " (malloc: " + server::mallocInUse() + ")");
  std::string listen = "tcp://127.0.0.1:7000";
  std::string rdmaListen;
  std::string shmListen;
  std::string backendKind = "emu";
  unsigned devices = 1;
  std::string driver = "libcuda.so.1";
  std::string nvmlLibrary = "libnvidia-ml.so.1";
  std::string memory = "4GiB";
  int computeCapability = 80;
  int multiprocessors = 132;
  unsigned emuThreads = 0;
  bool emuGenericPath = false;
  uint64_t stepLimit = 0;
  bool verbose = false;
  // Default: derived from the pid, so servers started side by side rarely share a window.
  unsigned addressSlot = static_cast<unsigned>(getpid()) % server::emu::EmuMemory::kSlots;
  app.add_option("--listen", listen, "Endpoint to listen on (tcp://HOST:PORT; port 0 picks one)")
      ->capture_default_str();
  app.add_option("--rdma-listen", rdmaListen,
                 "Also accept RDMA sessions here (rdma://IP:PORT, an address on an RDMA device; "
                 "advertised to TCP clients, which switch to it when they can)");
  app.add_option("--shm-listen", shmListen,
                 "Also accept shared-memory sessions from clients on this host here (shm:///PATH, "
                 "a Unix socket path; who may connect is the socket file's permissions)");
  app.add_option("--backend", backendKind, "Device backend")
      ->check(CLI::IsMember({"emu", "cuda"}))
      ->capture_default_str();
  app.add_option("--devices", devices,
                 "Number of devices to serve (emu: how many to create, up to 8)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--driver", driver, "CUDA driver library for the cuda backend")
      ->capture_default_str();
  app.add_option("--nvml-library", nvmlLibrary,
                 "NVML library the cuda backend reads MIG identities and sensors from, and "
                 "--list-devices lists with")
      ->capture_default_str();
  app.add_option("--memory", memory, "emu: memory per device (e.g. 4GiB, 512MiB)")
      ->capture_default_str();
  app.add_option("--compute-capability", computeCapability,
                 "emu: compute capability as major*10+minor (PTX for compute_X loads if X <= this)")
      ->check(CLI::Range(30, 120))
      ->capture_default_str();
  app.add_option("--multiprocessors", multiprocessors, "emu: SM count to report")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--emu-threads", emuThreads,
                 "emu: interpreter threads per launch (0 = one per core, 1 = deterministic)")
      ->capture_default_str();
  app.add_flag("--emu-generic-path", emuGenericPath,
               "emu: run every instruction through the interpreter's generic code, not the "
               "routines specialized at load (slower; to check those against it)");
  app.add_option("--kernel-step-limit", stepLimit,
                 "emu: warp-instructions a launch may run before it fails (0 = no limit)")
      ->capture_default_str();
  app.add_option("--address-slot", addressSlot,
                 "emu: device address window 0-31; servers one client uses together need "
                 "different slots (default: from the process id)")
      ->check(CLI::Range(0u, server::emu::EmuMemory::kSlots - 1));
  app.add_flag("-v,--verbose", verbose, "Log sessions as they come and go");
  server::PoolServer::Limits limits;
  app.add_option(
         "--max-sessions", limits.maxSessions,
         "Most client sessions served at once; more are refused with a reason (0 = no limit)")
      ->capture_default_str();
  app.add_option("--max-modules-per-session", limits.maxModulesPerSession,
                 "Most modules one session may hold loaded (0 = no limit)")
      ->capture_default_str();
  auto* handshakeDeadline =
      app.add_option("--handshake-deadline-ms", limits.handshakeDeadlineMs,
                     "A connection that has not completed its Hello (and TLS handshake) this long "
                     "after it was accepted is closed")
          ->check(CLI::Range(1u, 3600u * 1000))
          ->capture_default_str();
  auto* maxUnauthenticated =
      app.add_option("--max-unauthenticated", limits.unauthenticated.total,
                     "Most connections that have not completed their handshake, at once; more are "
                     "closed at accept (0 = no limit)")
          ->capture_default_str();
  auto* maxUnauthenticatedPerSource =
      app.add_option("--max-unauthenticated-per-source", limits.unauthenticated.perSource,
                     "The same, from one address (0 = no limit)")
          ->capture_default_str();
  app.add_option("--client-heartbeat-ms", limits.clientHeartbeatMs,
                 "A client whose host answers no TCP heartbeat this long is gone: its session ends "
                 "and its memory is freed (0 = off)")
      ->check(CLI::Range(0u, 3600u * 1000))
      ->capture_default_str();
  unsigned workers = 0;
  app.add_option("--workers", workers,
                 "Threads that serve calls (an idle connection holds none); 0 = two per core, 8 "
                 "to 48")
      ->check(CLI::Range(0u, 4096u))
      ->capture_default_str();
  std::string eventLoop = "epoll";
  app.add_option("--event-loop", eventLoop,
                 "What the workers wait on for ready connections: epoll or io_uring "
                 "(docs/hardening.md compares them)")
      ->check(CLI::IsMember({"epoll", "io_uring"}))
      ->capture_default_str();
  std::string configPath, metricsListen;
  // The long-lived host ranges (device memory, staging) that backends and sessions note, for the
  // RDMA connections the listener accepts. Declared first: it outlives everything that notes.
  transport::PinnedMemory pinnedMemory;
  transport::ListenOptions listenOptions;
  listenOptions.pinnedMemory = &pinnedMemory;
  unsigned shmPollUs = static_cast<unsigned>(listenOptions.shmPollMax.count());
  app.add_option("--shm-poll-us", shmPollUs,
                 "How long a worker that just served an shm session spins for its next call "
                 "before returning it to the event loop (after 8 misses in a row only every 8th "
                 "time; 0 never spins; docs/shm.md)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  unsigned rdmaPollUs = static_cast<unsigned>(listenOptions.rdmaPollMax.count());
  app.add_option("--rdma-poll-us", rdmaPollUs,
                 "How long a worker that just served an RDMA session polls its completion queue "
                 "for the next call before arming it for the event loop (after 8 misses in a row "
                 "only every 8th time; 0 never polls; docs/rdma.md)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  app.add_option("--tls-cert", listenOptions.tlsCertificateChain,
                 "TLS certificate chain (PEM) for a tls://HOST:PORT --listen endpoint");
  app.add_option("--tls-key", listenOptions.tlsPrivateKey, "TLS private key (PEM) for --tls-cert");
  app.add_option("--config", configPath,
                 "Pool configuration (TOML): devices, tenants, tokens, quotas, priorities "
                 "(docs/pool.md). Its devices replace --backend/--devices/--memory; SIGHUP "
                 "reloads its tenants");
  app.add_option("--metrics-listen", metricsListen,
                 "Serve Prometheus metrics at http://HOST:PORT/metrics");
  std::string onDeviceFault = "exit";
  app.add_option("--on-device-fault", onDeviceFault,
                 "What a fatal device fault of the cuda backend does (a device-side assert, an "
                 "illegal address...: the driver's state in this process is then lost for every "
                 "session): exit (with status 75 after about a second of refusing calls, so that "
                 "the supervisor restarts gpupoold) or refuse (keep running, refusing every cuda "
                 "call with the fault's error until restarted; docs/architecture.md)")
      ->check(CLI::IsMember({"exit", "refuse"}))
      ->capture_default_str();
  bool listDevices = false;
  app.add_flag("--list-devices", listDevices,
               "Print the devices this machine could pool (GPUs and MIG instances, from NVML: "
               "uuid, name, memory, parent, profile) and exit");
  CLI11_PARSE(app, argc, argv);
  listenOptions.shmPollMax = std::chrono::microseconds(shmPollUs);
  listenOptions.rdmaPollMax = std::chrono::microseconds(rdmaPollUs);
  if (listDevices) return listPoolDevices(nvmlLibrary);

  std::optional<server::PoolConfig> poolConfig;
  if (!configPath.empty()) {
    try {
      poolConfig = server::loadPoolConfig(configPath);
    } catch (const server::PoolConfigError& e) {
      std::cerr << "gpupoold: " << e.what() << "\n";
      return 2;
    }
    // The configuration's [limits] apply where the command line does not say otherwise.
    const server::ConnectionLimits& configured = poolConfig->connectionLimits;
    if (configured.handshakeDeadlineMs && !handshakeDeadline->count())
      limits.handshakeDeadlineMs = *configured.handshakeDeadlineMs;
    if (configured.maxUnauthenticated && !maxUnauthenticated->count())
      limits.unauthenticated.total = *configured.maxUnauthenticated;
    if (configured.maxUnauthenticatedPerSource && !maxUnauthenticatedPerSource->count())
      limits.unauthenticated.perSource = *configured.maxUnauthenticatedPerSource;
    backendKind = poolConfig->devices.front().backend;
    devices = static_cast<unsigned>(poolConfig->devices.size());
    memory = std::to_string(poolConfig->devices.front().memoryBytes);
  } else {
    std::cerr << "gpupoold: no --config: serving without authentication; listening on loopback "
                 "only is recommended\n";
  }

  std::string error;
  auto endpoint = transport::parseEndpoint(listen, &error);
  if (!endpoint) {
    std::cerr << "gpupoold: " << error << "\n";
    return 2;
  }
  std::optional<transport::Endpoint> rdmaEndpoint;
  if (!rdmaListen.empty()) {
    rdmaEndpoint = transport::parseEndpoint(rdmaListen, &error);
    if (!rdmaEndpoint || rdmaEndpoint->scheme != "rdma") {
      std::cerr << "gpupoold: --rdma-listen: " << (rdmaEndpoint ? "expected rdma://IP:PORT" : error)
                << "\n";
      return 2;
    }
  }

  std::optional<transport::Endpoint> shmEndpoint;
  if (!shmListen.empty()) {
    shmEndpoint = transport::parseEndpoint(shmListen, &error);
    if (!shmEndpoint || shmEndpoint->scheme != "shm") {
      std::cerr << "gpupoold: --shm-listen: " << (shmEndpoint ? "expected shm:///PATH" : error)
                << "\n";
      return 2;
    }
  }

  std::unique_ptr<server::Backend> backend;
  try {
    if (backendKind == "emu") {
      server::emu::EmuBackendOptions options;
      options.devices = devices;
      if (!parseSize(memory, &options.device.memoryBytes) || options.device.memoryBytes == 0) {
        std::cerr << "gpupoold: --memory '" << memory
                  << "' is not a size (use e.g. 4GiB, 512MiB or a byte count)\n";
        return 2;
      }
      options.device.computeCapability = computeCapability;
      options.device.multiprocessors = multiprocessors;
      options.workerThreads = emuThreads;
      options.genericPathOnly = emuGenericPath;
      options.stepBudget = stepLimit;
      options.addressSlot = addressSlot;
      options.device.addressSlot = addressSlot;
      options.pinnedMemory = &pinnedMemory;
      if (devices > server::emu::EmuMemory::kDevicesPerSlot) {
        std::cerr << "gpupoold: the emu backend serves at most "
                  << server::emu::EmuMemory::kDevicesPerSlot << " devices per server\n";
        return 2;
      }
      backend = server::emu::makeEmuBackend(options);
    } else {
#ifdef GPUPOOL_HAVE_CUDA_BACKEND
      if (poolConfig) {
        std::vector<server::CudaDeviceSelection> selections;
        for (const auto& d : poolConfig->devices) selections.push_back({d.index, d.uuid});
        int failed = -1;
        backend = server::makeCudaBackend(driver, selections, &error, &failed, &pinnedMemory);
        if (!backend && failed >= 0) {
          const auto& d = poolConfig->devices[static_cast<size_t>(failed)];
          std::cerr << "gpupoold: "
                    << server::deviceConfigProblem(*poolConfig, static_cast<size_t>(failed),
                                                   !d.uuid.empty() ? "uuid"
                                                   : d.index       ? "index"
                                                                   : "backend",
                                                   error)
                    << "\n";
          return 2;
        }
      } else {
        backend = server::makeCudaBackend(driver, static_cast<int>(devices), &error, &pinnedMemory);
      }
      if (!backend) {
        std::cerr << "gpupoold: cuda backend: " << error << "\n";
        return 1;
      }
#else
      std::cerr << "gpupoold: this build has no cuda backend\n";
      return 1;
#endif
    }
  } catch (const std::exception& e) {
    std::cerr << "gpupoold: " << e.what() << "\n";
    return 1;
  }

  // Each connection costs one descriptor, and a pool server holds thousands.
  if (auto files = transport::raiseOpenFileLimit(); verbose && files.soft > files.before) {
    std::cerr << "gpupoold: open-file limit raised from " << files.before << " to " << files.soft
              << "\n";
  }
  // Writes to a vanished client must fail with EPIPE, not kill the server.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGHUP);  // reloads the configuration's tenants
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  if (poolConfig && backend->kind() == "cuda") {
    uint64_t capacity = 0;
    for (const auto& d : backend->devices()) capacity += d.totalMemory;
    if (std::string problem = server::quotaProblem(*poolConfig, capacity); !problem.empty()) {
      std::cerr << "gpupoold: " << configPath << ": tenant.memory_quota: " << problem << "\n";
      return 2;
    }
  }
  CudaDeviceViews views;
  if (backend->kind() == "cuda") {
    views = cudaDeviceViews(*backend, poolConfig ? &*poolConfig : nullptr, nvmlLibrary, verbose);
  }
  // A fatal device fault (cuda backend): every later cuda call is refused, and under `exit` the
  // server stops as on SIGTERM once in-flight calls had a moment to be answered, and exits with
  // kDeviceFaultExitStatus. `pool` outlives the thread: main waits for it before returning.
  std::atomic<bool> faultExit{false};
  std::thread faultStopper;
  std::mutex faultMutex;
  std::condition_variable faultSeen;
  bool serving = true;  // until serve() returns (under faultMutex)
  bool exitOnFault = onDeviceFault == "exit";
  backend->setDeviceFaultPolicy(
      exitOnFault ? "gpupoold is restarting"
                  : "gpupoold refuses cuda work until it is restarted (--on-device-fault refuse)",
      [&](const server::DeviceFault& fault) {
        std::cerr << "gpupoold: device fault: " << fault.description << "\n";
        if (!exitOnFault) {
          std::cerr << "gpupoold: --on-device-fault refuse: still serving; every cuda call is "
                       "refused with "
                    << fault.errorName << " until gpupoold is restarted\n";
          return;
        }
        std::cerr << "gpupoold: exiting with status " << kDeviceFaultExitStatus << " in "
                  << kDeviceFaultGrace.count() << " s (--on-device-fault exit)\n";
        std::lock_guard lock(faultMutex);
        faultExit = true;
        faultSeen.notify_all();
      });
  server::PoolServer pool(std::move(backend), verbose);
  pool.setLimits(limits);
  pool.setWorkers(workers);
  try {
    server::makeReadinessSet(eventLoop);  // fails here, not at the first connection
  } catch (const std::exception& e) {
    std::cerr << "gpupoold: --event-loop " << eventLoop << " cannot be used here: " << e.what()
              << " (--event-loop epoll works everywhere)\n";
    return 1;
  }
  pool.setEventLoop(eventLoop);
  pool.setPinnedMemory(&pinnedMemory);
  pool.setDeviceIdentities(std::move(views.identities));
  pool.setDeviceSensors(std::move(views.sensors));
  std::shared_ptr<server::TenantPool> tenants;
  std::unique_ptr<server::MetricsHttpServer> metrics;
  try {
    if (poolConfig) {
      tenants = std::make_shared<server::TenantPool>(*poolConfig, poolConfig->devices.size());
      pool.setTenantPool(tenants);
      std::cerr << "gpupoold: " << poolConfig->tenants.size() << " tenant(s) from " << configPath
                << "; usage in " << poolConfig->meteringDatabase << "\n";
    }
    if (!metricsListen.empty()) {
      metrics = std::make_unique<server::MetricsHttpServer>(
          metricsListen, [&pool] { return server::renderMetrics(pool); });
      std::cout << "metrics on " << metrics->url() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "gpupoold: " << e.what() << "\n";
    return 1;
  }
  std::unique_ptr<transport::Listener> listener;
  try {
    if (endpoint->scheme == "tls" &&
        (listenOptions.tlsCertificateChain.empty() || listenOptions.tlsPrivateKey.empty())) {
      std::cerr << "gpupoold: --listen tls://... needs --tls-cert and --tls-key\n";
      return 2;
    }
    listener = transport::listenEndpoint(*endpoint, listenOptions);
    if (rdmaEndpoint) {
      auto rdma = transport::listenEndpoint(*rdmaEndpoint, listenOptions);
      std::cout << "listening on " << rdma->url() << std::endl;
      pool.setRdmaEndpoint(rdma->url());
      listener = transport::listenOnBoth(std::move(listener), std::move(rdma));
    }
    if (shmEndpoint) {
      auto shm = transport::listenEndpoint(*shmEndpoint, listenOptions);
      std::cout << "listening on " << shm->url() << std::endl;
      pool.setShmEndpoint(shm->url());
      listener = transport::listenOnBoth(std::move(listener), std::move(shm));
    }
  } catch (const transport::TransportError& e) {
    std::cerr << "gpupoold: " << e.what() << "\n";
    return 1;
  }
  std::thread signals([&] {
    int sig = 0;
    while (sigwait(&stopSignals, &sig) == 0 && sig == SIGHUP) {
      std::string why;
      if (!tenants) {
        std::cerr << "gpupoold: SIGHUP ignored: no --config to reload\n";
      } else if (tenants->reload(&why)) {
        std::cerr << "gpupoold: reloaded " << configPath << "\n";
      } else {
        std::cerr << "gpupoold: reload failed, keeping the previous tenants: " << why << "\n";
      }
    }
    std::cerr << "gpupoold: stopping (signal " << sig << ")\n";
    pool.shutdown();
  });
  signals.detach();
  faultStopper = std::thread([&] {
    std::unique_lock lock(faultMutex);
    faultSeen.wait(lock, [&] { return faultExit.load() || !serving; });
    if (!faultExit) return;
    lock.unlock();
    std::this_thread::sleep_for(kDeviceFaultGrace);
    std::cerr << "gpupoold: stopping after a fatal device fault\n";
    pool.shutdown();  // as on SIGTERM: stops accepting, ends every session, serve() returns
  });
  pool.serve(std::move(listener));
  {
    std::lock_guard lock(faultMutex);
    serving = false;
    faultSeen.notify_all();
  }
  faultStopper.join();
  return faultExit ? kDeviceFaultExitStatus : 0;
}
