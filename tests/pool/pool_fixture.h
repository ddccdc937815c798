// Helpers for the pool's process tests, on the process harness (tests/harness): a gpupoold started
// the way these tests start it (flags or a --config file decide everything), and the tests' CUDA
// client run as a given tenant.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"
#include "gpupool_server.h"
#include "scratch_directory.h"

namespace gpupool::pooltest {

using e2e::ChainedServers;
using e2e::ChildProcess;
using e2e::EnvironmentChanges;
using e2e::GpupoolServer;
using e2e::ProgramResult;
using e2e::ScratchDirectory;
using e2e::ServerOptions;

// gpupoold with `args` (--config, --memory, --listen, --metrics-listen, ...), no backend or memory
// flags of the harness's own, --listen tcp://127.0.0.1:0 unless args has --listen, and one
// interpreter thread (deterministic, and light on the CI machine's shared cores).
ServerOptions poolServerOptions(std::vector<std::string> args, EnvironmentChanges environment = {});

// The environment of a CUDA program on our libcuda.so.1, talking to `endpoint` as `token` (none
// when empty).
EnvironmentChanges tenantEnvironment(const std::string& endpoint, const std::string& token);
std::string poolClientPath();
// Runs pool_client with `args` as the tenant holding `token`.
ProgramResult runClient(const std::string& endpoint, const std::string& token,
                        const std::vector<std::string>& args, int timeoutSeconds = 60);
// A pool on the cuda backend without a GPU (e2e::startChainedServers): an emu gpupoold started
// with `emuArgs`, and a gpupoold configured by `config` (which must exist before) whose CUDA driver
// is our libcuda.so.1 talking to it.
ChainedServers startChainedPool(const std::string& config, std::vector<std::string> emuArgs = {});

// `gpupool status --json` against the server.
nlohmann::json queryStatus(const std::string& endpoint);
const nlohmann::json& tenantIn(const nlohmann::json& status, const std::string& name);
// The integer after `key ` in a program's output (e.g. "ALLOC 2"); -1 when absent.
long long valueAfter(const std::string& output, const std::string& key);

}  // namespace gpupool::pooltest
