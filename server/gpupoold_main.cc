// gpupoold: the GPU pool server.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "server/backends/emu/emu_backend.h"
#include "server/pool_server.h"
#include "transport/endpoint.h"
#include "transport/tcp_transport.h"
#ifdef GPUPOOL_HAVE_CUDA_BACKEND
#include "server/backends/cuda/cuda_backend.h"
#endif

namespace {

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
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB" || unit == "K") scale = 1ull << 10;
  else if (unit == "MiB" || unit == "M") scale = 1ull << 20;
  else if (unit == "GiB" || unit == "G") scale = 1ull << 30;
  else if (unit == "TiB" || unit == "T") scale = 1ull << 40;
  else return false;
  *out = value * scale;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpupool;
  CLI::App app{"gpupoold: serves pooled GPUs to gpupool clients (libcuda.so.1)", "gpupoold"};
  app.set_version_flag("--version", server::PoolServer::version());
  std::string listen = "tcp://127.0.0.1:7000";
  std::string backendKind = "emu";
  unsigned devices = 1;
  std::string driver = "libcuda.so.1";
  std::string memory = "4GiB";
  int computeCapability = 80;
  int multiprocessors = 132;
  unsigned emuThreads = 0;
  uint64_t stepLimit = 0;
  bool verbose = false;
  app.add_option("--listen", listen, "Endpoint to listen on (tcp://HOST:PORT; port 0 picks one)")
      ->capture_default_str();
  app.add_option("--backend", backendKind, "Device backend")
      ->check(CLI::IsMember({"emu", "cuda"}))
      ->capture_default_str();
  app.add_option("--devices", devices, "Number of devices to serve (emu: how many to create)")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--driver", driver, "CUDA driver library for the cuda backend")
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
  app.add_option("--kernel-step-limit", stepLimit,
                 "emu: warp-instructions a launch may run before it fails (0 = no limit)")
      ->capture_default_str();
  app.add_flag("-v,--verbose", verbose, "Log sessions as they come and go");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  auto endpoint = transport::parseEndpoint(listen, &error);
  if (!endpoint) {
    std::cerr << "gpupoold: " << error << "\n";
    return 2;
  }
  if (endpoint->scheme != "tcp") {
    std::cerr << "gpupoold: " << endpoint->scheme
              << ":// listening is not available in this build; use tcp://HOST:PORT\n";
    return 2;
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
      options.stepBudget = stepLimit;
      backend = server::emu::makeEmuBackend(options);
    } else {
#ifdef GPUPOOL_HAVE_CUDA_BACKEND
      backend = server::makeCudaBackend(driver, static_cast<int>(devices), &error);
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

  // Writes to a vanished client must fail with EPIPE, not kill the server.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  server::PoolServer pool(std::move(backend), verbose);
  std::unique_ptr<transport::Listener> listener;
  try {
    listener = transport::tcpListen(*endpoint);
  } catch (const transport::TransportError& e) {
    std::cerr << "gpupoold: " << e.what() << "\n";
    return 1;
  }
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stopSignals, &sig);
    std::cerr << "gpupoold: stopping (signal " << sig << ")\n";
    pool.shutdown();
  });
  signals.detach();
  pool.serve(std::move(listener));
  return 0;
}
