// The cuda backend driving our own libcuda.so.1, which talks to an emu server: programs must
// behave exactly as they do against the emu server directly.
#include <gtest/gtest.h>

#include <sstream>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"
#include "test_programs.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

class ChainedProgramTest : public ::testing::TestWithParam<ProgramFlavour> {};

TEST_P(ChainedProgramTest, Runs) {
  ChainedServers servers = startChainedServers();
  ProgramResult result = runProgram(programPath(GetParam().binary()), {},
                                    clientEnvironment(servers.cuda->endpoint()), seconds(240));
  ASSERT_TRUE(result.passed()) << result.describe();
  EXPECT_NE(result.out.find("PASS"), std::string::npos) << result.describe();
  // Both hops saw a session: the program's, and the cuda backend's own driver session.
  EXPECT_NE(servers.cuda->log().find("gpupoold: session "), std::string::npos);
  EXPECT_NE(servers.emu->log().find("gpupoold: session "), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Chained, ChainedProgramTest,
                         ::testing::ValuesIn(cudaBackendProgramFlavours()),
                         [](const auto& info) { return info.param.testName(); });

// Programs start beside one that places host functions as fast as it can while another of its
// threads mallocs and frees (host_func_order). The cuda backend's driver, our libcuda, once made
// each new program's context on the emu server under the lock that placing a host function takes,
// waiting there (the host-function fence) for every session's pending functions: the placing
// session's thread stopped before it could read the release of its own function, and its gates
// broke (docs/hardening.md).
TEST(ChainedHostFunctionTest, ProgramsStartingBesideHostFunctionsLeaveThemRunning) {
  ChainedServers servers = startChainedServers();
  const EnvironmentChanges environment = clientEnvironment(servers.cuda->endpoint());
  ChildProcess placing({programPath("host_func_order"), {}, environment, std::nullopt});
  int started = 0;
  while (!placing.ended()) {
    ProgramResult other = runProgram(programPath("vector_add"), {}, environment, seconds(60));
    ASSERT_TRUE(other.passed()) << other.describe();
    ++started;
  }
  ProgramResult result = placing.finish(seconds(120));
  EXPECT_TRUE(result.passed()) << result.describe();
  EXPECT_EQ(servers.cuda->log().find("let go unrun"), std::string::npos) << servers.cuda->log();
  EXPECT_GT(started, 0);
}

// The cuda backend builds an executable graph as one CUgraph of its driver and launches it with
// cuGraphLaunch (here our libcuda, which logs each remote call at GPU_POOL_LOG=2), instead of
// replaying its nodes one call at a time. Batch memory operation nodes are built too, waits
// included (only under a pool's scheduler is a graph with a wait replayed: cuda_graphs.cc).
TEST(ChainedGraphTest, GraphsReachTheDriverAsGraphs) {
  ServerOptions cudaOptions;
  cudaOptions.environment["GPU_POOL_LOG"] = "2";
  ChainedServers servers = startChainedServers(cudaOptions);
  ProgramResult built = runProgram(programPath("graph_driver"), {},
                                   clientEnvironment(servers.cuda->endpoint()), seconds(240));
  ASSERT_TRUE(built.passed()) << built.describe();
  std::string log = servers.cuda->log();
  EXPECT_NE(log.find("gpupool: call cuGraphInstantiate"), std::string::npos) << log;
  EXPECT_NE(log.find("gpupool: post cuGraphLaunch"), std::string::npos) << log;
  EXPECT_EQ(log.find("gpupool: post cuLaunchKernel"), std::string::npos) << log;

  // graph_batch_memop_driver launches eight graphs: five of writes, one whose wait node holds its
  // stream until another stream writes, one captured from a write, a wait and a batch, and one of
  // an empty batch node. All eight reach the driver as graph launches.
  size_t before = servers.cuda->log().size();
  ProgramResult memOps = runProgram(programPath("graph_batch_memop_driver"), {},
                                    clientEnvironment(servers.cuda->endpoint()), seconds(240));
  ASSERT_TRUE(memOps.passed()) << memOps.describe();
  std::string later = servers.cuda->log().substr(before);
  EXPECT_NE(later.find("gpupool: call cuGraphInstantiate"), std::string::npos) << later;
  size_t graphLaunches = 0;
  for (size_t at = later.find("gpupool: post cuGraphLaunch"); at != std::string::npos;
       at = later.find("gpupool: post cuGraphLaunch", at + 1)) {
    ++graphLaunches;
  }
  EXPECT_EQ(graphLaunches, 8u) << later;
}

// At compute capability 9.0 the emu device runs thread-block clusters, so the cuda backend's own
// cluster paths run end to end: cuLaunchKernelEx with the cluster attribute, cluster occupancy,
// and a kernel node with CLUSTER_DIMENSION built into a CUgraph of the driver.
TEST(ChainedClusterTest, ClusterLaunchesAndClusteredKernelNodesReachTheDriver) {
  ServerOptions emuOptions;
  emuOptions.extraArgs = {"--compute-capability", "90"};
  ServerOptions cudaOptions;
  cudaOptions.environment["GPU_POOL_LOG"] = "2";
  ChainedServers servers = startChainedServers(cudaOptions, emuOptions);
  for (const char* program : {"cluster_launch_driver", "cluster_launch_driver_shared"}) {
    ProgramResult result = runProgram(programPath(program), {},
                                      clientEnvironment(servers.cuda->endpoint()), seconds(240));
    ASSERT_TRUE(result.passed()) << result.describe();
    EXPECT_NE(result.out.find("a kernel node in clusters of 4: every block saw its cluster"),
              std::string::npos)
        << result.describe();
  }
  const std::string log = servers.cuda->log();
  EXPECT_NE(log.find("gpupool: call cuLaunchKernelEx"), std::string::npos) << log;
  EXPECT_NE(log.find("gpupool: call cuOccupancyMaxActiveClusters"), std::string::npos) << log;
  // The node's cluster travels in the graph (our libcuda builds graphs on the client).
  EXPECT_NE(log.find("gpupool: call cuGraphInstantiate"), std::string::npos) << log;
  EXPECT_NE(log.find("gpupool: post cuGraphLaunch"), std::string::npos) << log;
}

TEST(ChainedDeviceQueryTest, MatchesTheDirectEmuServer) {
  ChainedServers servers = startChainedServers();
  ProgramResult direct =
      runProgram(programPath("device_query"), {}, clientEnvironment(servers.emu->endpoint()));
  ProgramResult chained =
      runProgram(programPath("device_query"), {}, clientEnvironment(servers.cuda->endpoint()));
  ASSERT_TRUE(direct.passed()) << direct.describe();
  ASSERT_TRUE(chained.passed()) << chained.describe();
  auto directLines = keyValueLines(direct.out);
  EXPECT_FALSE(directLines.empty());
  EXPECT_EQ(directLines, keyValueLines(chained.out));
}

// The cuda backend announces no device address window (the real driver's addresses are
// gpupoold's), so the client keeps each device range it is given out of its own address space
// (client/device_address_reservations.h). device_address_apart_driver puts host memory where the
// next allocation would land: the client must see it and ask the server for another address, for
// cuMemAlloc, cuMemAllocAsync, cuMemAddressReserve and graph allocation nodes alike. A module
// variable's address cannot be asked again: put on host memory, it must be refused to the calls
// that go by the address alone, and serve kernels and explicit copies.
TEST(ChainedAddressTest, DeviceAddressesNeverLandOnHostMemory) {
  ChainedServers servers = startChainedServers();
  EnvironmentChanges environment = clientEnvironment(servers.cuda->endpoint());
  environment["GPU_POOL_LOG"] = "1";
  for (const char* program :
       {"device_address_apart_driver", "device_address_apart_driver_shared"}) {
    ProgramResult result = runProgram(programPath(program), {}, environment, seconds(120));
    ASSERT_TRUE(result.passed()) << result.describe();
    EXPECT_NE(result.out.find("cuModuleGetGlobal: the variable lies on host memory put at"),
              std::string::npos)
        << "the program could not put host memory under the module variable\n"
        << result.describe();
    EXPECT_NE(result.err.find("gpupool: cuMemcpy: 0x"), std::string::npos)
        << "the refusal of cuMemcpy is not named\n"
        << result.describe();
    for (const char* call :
         {"cuMemAlloc", "cuMemAllocAsync", "cuMemAddressReserve", "cuGraphAddMemAllocNode"}) {
      EXPECT_NE(result.out.find(std::string(call) + ": host memory put at the next address"),
                std::string::npos)
          << call << ": the program could not put host memory there\n"
          << result.describe();
      EXPECT_NE(result.err.find(std::string("gpupool: ") + call + ": the device range "),
                std::string::npos)
          << call << ": the client did not see the overlap\n"
          << result.describe();
    }
  }
}

}  // namespace
}  // namespace gpupool::e2e
