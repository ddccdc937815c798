// NVIDIA's own nvidia-smi (Debian's non-free package, 535; scripts/install-deps.sh unpacks it to
// /usr/local/libexec/gpupool, GPUPOOL_NVIDIA_SMI names another) run against our
// libnvidia-ml.so.1: its table, -L, --query-gpu CSV, -q and topo -m show the devices `gpupool
// status --json` shows, on the emu and the chained cuda backend, and nothing it asks for is
// missing ("Function Not Found"). dmon, pmon and the topology of two GPUs need undocumented entry
// points that the library refuses, and nvidia-smi says so (docs/nvml.md, "NVIDIA's nvidia-smi").
// Skipped where the binary is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "gpupool_server.h"
#include "harness_paths.h"
#include "status_json.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

std::string nvidiaSmiPath() {
  if (const char* path = std::getenv("GPUPOOL_NVIDIA_SMI")) return path;
  return "/usr/local/libexec/gpupool/nvidia-smi";
}

#define SKIP_WITHOUT_NVIDIA_SMI()                        \
  if (access(nvidiaSmiPath().c_str(), X_OK) != 0)        \
  GTEST_SKIP() << "no nvidia-smi at " << nvidiaSmiPath() \
               << " (scripts/install-deps.sh unpacks Debian's; GPUPOOL_NVIDIA_SMI names another)"

ProgramResult nvidiaSmi(const std::string& endpoint, const std::vector<std::string>& arguments) {
  return runProgram(nvidiaSmiPath(), arguments, clientEnvironment(endpoint), seconds(60));
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What nvidia-smi prints for the devices of `endpoint`, against its status.
void expectNvidiaSmiShowsTheDevices(const std::string& endpoint) {
  const nlohmann::json devices = statusOf(endpoint).at("devices");
  ASSERT_FALSE(devices.empty());

  ProgramResult table = nvidiaSmi(endpoint, {});
  ASSERT_EQ(table.exitCode, 0) << table.describe();
  for (const auto& device : devices) {
    EXPECT_NE(table.out.find(device.at("name").get<std::string>()), std::string::npos) << table.out;
  }
  EXPECT_NE(table.out.find("Processes:"), std::string::npos) << table.out;

  ProgramResult list = nvidiaSmi(endpoint, {"-L"});
  ASSERT_EQ(list.exitCode, 0) << list.describe();
  std::vector<std::string> listed = linesOf(list.out);
  ASSERT_EQ(listed.size(), devices.size()) << list.out;
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(listed[i], "GPU " + std::to_string(i) + ": " +
                             devices[i].at("name").get<std::string>() +
                             " (UUID: " + devices[i].at("uuid").get<std::string>() + ")");
  }

  ProgramResult query = nvidiaSmi(
      endpoint, {"--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader,nounits"});
  ASSERT_EQ(query.exitCode, 0) << query.describe();
  std::vector<std::string> rows = linesOf(query.out);
  ASSERT_EQ(rows.size(), devices.size()) << query.out;
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(rows[i], std::to_string(i) + ", " + devices[i].at("name").get<std::string>() + ", " +
                           devices[i].at("uuid").get<std::string>() + ", " +
                           std::to_string(devices[i].at("memory_total").get<uint64_t>() >> 20));
  }

  ProgramResult details = nvidiaSmi(endpoint, {"-q"});
  ASSERT_EQ(details.exitCode, 0) << details.describe();
  for (const auto& device : devices) {
    EXPECT_NE(details.out.find("GPU UUID                              : " +
                               device.at("uuid").get<std::string>()),
              std::string::npos)
        << details.out;
  }
  // Every function it looks up exists (newer than our nvml.h too), and what is refused is N/A.
  EXPECT_EQ(details.out.find("Function Not Found"), std::string::npos) << details.out;

  // The matrix asks an undocumented entry point how each pair of GPUs connects, which the library
  // refuses (the server's PCIe topology is not the client's to use): one GPU has no pair.
  ProgramResult topology = nvidiaSmi(endpoint, {"topo", "-m"});
  if (devices.size() == 1) {
    EXPECT_EQ(topology.exitCode, 0) << topology.describe();
    EXPECT_NE(topology.out.find("GPU0\t X"), std::string::npos) << topology.out;
  } else {
    EXPECT_NE(topology.exitCode, 0) << topology.describe();
    EXPECT_NE(topology.out.find("Failed to run topology matrix"), std::string::npos)
        << topology.describe();
  }

  // dmon's first call into the private table is refused, and nvidia-smi says it is not supported.
  ProgramResult monitor = nvidiaSmi(endpoint, {"dmon", "-c", "1"});
  EXPECT_NE(monitor.exitCode, 0) << monitor.describe();
  EXPECT_NE((monitor.out + monitor.err).find("Not supported"), std::string::npos)
      << monitor.describe();
}

TEST(NvidiaSmiTest, ShowsTheEmuDevicesAsStatusDoes) {
  SKIP_WITHOUT_NVIDIA_SMI();
  ServerOptions options;
  options.extraArgs = {"--devices", "2"};
  GpupoolServer server(options);
  expectNvidiaSmiShowsTheDevices(server.endpoint());
}

TEST(NvidiaSmiTest, ShowsTheChainedCudaBackendsDevicesAsStatusDoes) {
  SKIP_WITHOUT_NVIDIA_SMI();
  ChainedServers servers = startChainedServers();
  expectNvidiaSmiShowsTheDevices(servers.cuda->endpoint());
}

}  // namespace
}  // namespace gpupool::e2e
