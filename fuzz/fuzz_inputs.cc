#include "fuzz/fuzz_inputs.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/memory_connection.h"
#include "gpupool/image/fatbin.h"
#include "gpupool/image/image_kind.h"
#include "gpupool/image/ptx_selection.h"
#include "server/backends/emu/emu_backend.h"
#include "server/backends/emu/ptx/ptx_module.h"
#include "server/module_cache.h"
#include "server/pool_server.h"
#include "server/session.h"

namespace gpupool::fuzz {
namespace {

// The PoolServer only answers status requests here; the emu device window is process-wide, so it
// gets a backend with no devices instead of a second emu backend.
class NoDevicesBackend final : public server::Backend {
 public:
  std::string kind() const override { return "none"; }
  int driverVersion() const override { return 0; }
  const std::vector<server::DeviceDescription>& devices() const override { return devices_; }
  server::Status createContext(int, unsigned, std::unique_ptr<server::BackendContext>*) override {
    return server::Status::error(CUDA_ERROR_INVALID_DEVICE, "no devices");
  }
  uint64_t deviceMemoryUsed(int) const override { return 0; }
  std::pair<uint64_t, uint64_t> deviceAddressWindow() const override { return {0, 0}; }

 private:
  std::vector<server::DeviceDescription> devices_;
};

// One small emu server shared by every input, like the sessions of one gpupoold.
struct EmuServer {
  std::unique_ptr<server::Backend> backend;
  server::ModuleCache modules{16u << 20};
  server::RequestTable requests;
  std::unique_ptr<server::PoolServer> pool;

  EmuServer() {
    server::emu::EmuBackendOptions options;
    // Small and deterministic: one interpreter thread, and a step budget so a looping kernel ends
    // with an error instead of a timeout.
    options.device.memoryBytes = 64u << 20;
    options.workerThreads = 1;
    options.stepBudget = 200000;
    backend = server::emu::makeEmuBackend(options);
    pool = std::make_unique<server::PoolServer>(std::make_unique<NoDevicesBackend>(), false);
  }
};

}  // namespace

void consumePtx(std::span<const uint8_t> input) {
  auto loaded = ptx::Module::load(
      std::string_view(reinterpret_cast<const char*>(input.data()), input.size()));
  if (!loaded) {
    // A refusal must say why.
    if (loaded.status().ok() || loaded.status().message.empty()) __builtin_trap();
    return;
  }
  const std::unique_ptr<ptx::Module>& module = *loaded;
  std::vector<uint64_t> addresses;
  uint64_t next = 0x10000;
  for (const auto& g : module->globals()) {
    if (g.size > (1u << 20)) return;  // bound what a fuzzed declaration makes us allocate
    addresses.push_back(next);
    next += g.size + 256;
  }
  module->bindGlobals(addresses);
  for (size_t i = 0; i < module->globals().size(); ++i) (void)module->initialImage(i);
  for (const auto& k : module->kernels()) {
    if (module->findKernel(k.name) == nullptr) __builtin_trap();
  }
}

void consumeImage(std::span<const uint8_t> input) {
  using namespace gpupool::image;
  (void)classify(input);
  (void)elfExtent(input);
  (void)imageExtent(input);
  if (auto fatbin = Fatbin::parse(input)) {
    (void)fatbin->describeArchs();
    for (const auto& entry : fatbin->entries()) {
      // Every entry must lie inside the input.
      if (!entry.stored.empty() &&
          (entry.stored.data() < input.data() ||
           entry.stored.data() + entry.stored.size() > input.data() + input.size())) {
        __builtin_trap();
      }
      (void)entry.archName();
      (void)fatbin->payload(entry);
    }
    (void)selectPtx(*fatbin, 80);
  }
  (void)ptxForDevice(input, 80);
}

void consumeServerSession(std::span<const uint8_t> input) {
  static EmuServer* s = new EmuServer();  // lives for the process, like gpupoold's backend
  {
    server::Session session(1, std::make_unique<MemoryConnection>(input), {}, *s->backend,
                            s->modules, s->requests, *s->pool);
    session.run();
  }
  // Everything the input allocated went with its session.
  if (s->backend->deviceMemoryUsed(0) != 0) __builtin_trap();
}

}  // namespace gpupool::fuzz
