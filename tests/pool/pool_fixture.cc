#include "pool_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "build_paths.h"

namespace gpupool::pooltest {

using std::chrono::seconds;

ServerOptions poolServerOptions(std::vector<std::string> args, EnvironmentChanges environment) {
  ServerOptions options;
  options.backend.clear();
  options.emuThreads = 1;
  if (std::find(args.begin(), args.end(), "--listen") != args.end()) options.listen.clear();
  options.extraArgs = std::move(args);
  options.environment = std::move(environment);
  return options;
}

EnvironmentChanges tenantEnvironment(const std::string& endpoint, const std::string& token) {
  EnvironmentChanges env = e2e::clientEnvironment(endpoint);
  if (!token.empty()) env["GPU_POOL_TOKEN"] = token;
  return env;
}

std::string poolClientPath() { return e2e::e2eProgramPath("pool_client"); }

ProgramResult runClient(const std::string& endpoint, const std::string& token,
                        const std::vector<std::string>& args, int timeoutSeconds) {
  return e2e::runProgram(poolClientPath(), args, tenantEnvironment(endpoint, token),
                         seconds(timeoutSeconds));
}

ChainedServers startChainedPool(const std::string& config, std::vector<std::string> emuArgs) {
  return e2e::startChainedServers(poolServerOptions({"--config", config}),
                                  poolServerOptions(std::move(emuArgs)));
}

nlohmann::json queryStatus(const std::string& endpoint) {
  ProgramResult r =
      e2e::runProgram(e2e::gpupoolCliPath(), {"status", "--json", "--endpoint", endpoint},
                      {{"GPU_POOL_ENDPOINT", std::nullopt}}, seconds(30));
  if (!r.passed()) {
    ADD_FAILURE() << "gpupool status failed: " << r.describe();
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& tenantIn(const nlohmann::json& status, const std::string& name) {
  for (const auto& t : status.at("tenants")) {
    if (t.at("name") == name) return t;
  }
  throw std::runtime_error("no tenant " + name + " in " + status.dump(2));
}

long long valueAfter(const std::string& output, const std::string& key) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex(key + " (-?\\d+)"))) return std::stoll(m[1]);
  return -1;
}

}  // namespace gpupool::pooltest
