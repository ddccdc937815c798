// A fatal device fault on the cuda backend (docs/architecture.md, "Fatal device faults"). On
// NVIDIA's driver a device-side assert in one session poisons the CUDA state of the whole gpupoold
// process, so the cuda backend contains it: it refuses every later call with the fault's error and
// a message naming it, and by default gpupoold exits with status 75 so that its supervisor
// restarts it.
//
// Chained (gpupoold --backend cuda over our libcuda.so.1 and an emu server), the cuda backend sees
// CUDA_ERROR_ASSERT exactly as on a GPU, but our driver does not poison later sessions: without
// the containment they would succeed, so these tests see the containment, not the driver.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "http_get.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kDeviceFaultExitStatus = 75;  // gpupoold --on-device-fault exit

// device_assert (tests/emu_programs/programs) fails its assert and exits 42 once it saw
// cudaErrorAssert at the synchronization and at the copy after it.
void runDeviceAssert(const GpupoolServer& cuda) {
  ProgramResult result = runProgram(e2eProgramPath("device_assert"), {},
                                    clientEnvironment(cuda.endpoint()), seconds(120));
  ASSERT_TRUE(result.exited && result.exitCode == 42) << result.describe();
  EXPECT_NE(result.out.find("cudaDeviceSynchronize after failing assert: cudaErrorAssert"),
            std::string::npos)
      << result.describe();
  EXPECT_NE(result.out.find("later cudaMemcpy: cudaErrorAssert"), std::string::npos)
      << result.describe();
}

TEST(DeviceFaultTest, ByDefaultTheCudaServerExitsWithStatus75) {
  ChainedServers servers = startChainedServers();
  runDeviceAssert(*servers.cuda);
  auto deadline = steady_clock::now() + seconds(10);
  while (servers.cuda->running() && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ProgramResult ended = servers.cuda->stop();  // the exit status it already ended with
  std::string log = servers.cuda->log();
  EXPECT_FALSE(ended.timedOut) << log;
  EXPECT_TRUE(ended.exited && ended.exitCode == kDeviceFaultExitStatus) << ended.describe() << "\n"
                                                                        << log;
  EXPECT_NE(log.find("gpupoold: FATAL DEVICE FAULT: cuCtxSynchronize returned CUDA_ERROR_ASSERT"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("in session "), std::string::npos) << log;
  EXPECT_NE(log.find("exiting with status 75"), std::string::npos) << log;
  // The emu server behind it is unaffected.
  EXPECT_TRUE(servers.emu->running());
}

TEST(DeviceFaultTest, UnderRefuseLaterSessionsFailNamingTheFaultAndTheServerStaysUp) {
  ServerOptions cudaOptions;
  cudaOptions.extraArgs = {"--on-device-fault", "refuse", "--metrics-listen", "127.0.0.1:0"};
  ChainedServers servers = startChainedServers(cudaOptions);
  runDeviceAssert(*servers.cuda);

  // The client logs the server's reason for a failed call under GPU_POOL_LOG=1.
  EnvironmentChanges environment = clientEnvironment(servers.cuda->endpoint());
  environment["GPU_POOL_LOG"] = "1";
  ProgramResult later = runProgram(programPath("vector_add"), {}, environment, seconds(120));
  EXPECT_FALSE(later.timedOut) << later.describe();
  EXPECT_TRUE(later.exited && later.exitCode != 0) << later.describe();
  EXPECT_NE(later.out.find("returned cudaErrorAssert"), std::string::npos) << later.describe();
  EXPECT_NE((later.out + later.err).find("lost to a fatal fault (CUDA_ERROR_ASSERT"),
            std::string::npos)
      << later.describe() << "\n"
      << servers.cuda->log();

  std::this_thread::sleep_for(seconds(2));  // longer than the grace an exiting server takes
  EXPECT_TRUE(servers.cuda->running()) << servers.cuda->log();
  std::string log = servers.cuda->log();
  EXPECT_NE(log.find("gpupoold: FATAL DEVICE FAULT: cuCtxSynchronize returned CUDA_ERROR_ASSERT"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("--on-device-fault refuse: still serving"), std::string::npos) << log;
  std::string metrics = httpGet(servers.cuda->metricsUrl());
  EXPECT_NE(metrics.find("gpupool_device_faulted{device=\"0\"} 1"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace gpupool::e2e
