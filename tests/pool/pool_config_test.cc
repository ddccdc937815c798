// The pool configuration: a good file is read completely; a bad one is refused with the file, line
// and key named.
#include "server/pool_config.h"

#include <gtest/gtest.h>

namespace gpupool::server {
namespace {

constexpr const char* kTwoByTwo = R"(
overcommit = 1.5
[scheduler]
starvation_ms = 250
[[device]]
backend = "emu"
memory = "1GiB"
[[device]]
backend = "emu"
memory = "1GiB"
[[tenant]]
name = "alice"
token = "a-token"
memory_quota = "256MiB"
priority = "high"
weight = 2
devices = [0, 1]
[[tenant]]
name = "bob"
token = "b-token"
priority = "low"
)";

std::string errorOf(const std::string& text) {
  try {
    parsePoolConfig(text, "/etc/gpupool/pool.toml");
  } catch (const PoolConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PoolConfigTest, ReadsDevicesTenantsAndPolicy) {
  PoolConfig c = parsePoolConfig(kTwoByTwo, "/etc/gpupool/pool.toml");
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[1].memoryBytes, 1ull << 30);
  ASSERT_EQ(c.tenants.size(), 2u);
  EXPECT_EQ(c.tenants[0].name, "alice");
  EXPECT_EQ(c.tenants[0].token, "a-token");
  EXPECT_EQ(c.tenants[0].memoryQuota, 256ull << 20);
  EXPECT_EQ(c.tenants[0].priority, PriorityClass::kHigh);
  EXPECT_DOUBLE_EQ(c.tenants[0].weight, 2);
  EXPECT_EQ(c.tenants[0].devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.tenants[1].priority, PriorityClass::kLow);
  EXPECT_EQ(c.tenants[1].memoryQuota, 0u);
  EXPECT_DOUBLE_EQ(c.overcommit, 1.5);
  EXPECT_EQ(c.starvationBound.count(), 250);
  EXPECT_EQ(c.meteringDatabase, "/etc/gpupool/pool.toml.usage.db");
}

TEST(PoolConfigTest, NamesFileLineAndKeyOfABadValue) {
  std::string text = kTwoByTwo;
  text.replace(text.find("priority = \"high\""), 17, "priority = \"urgent\"");
  std::string error = errorOf(text);
  EXPECT_NE(error.find("/etc/gpupool/pool.toml:15: tenant[0].priority"), std::string::npos)
      << error;
}

TEST(PoolConfigTest, RefusesUnknownKeysAndMissingTokens) {
  // TOML puts a key after [[tenant]] into that tenant's table.
  EXPECT_NE(
      errorOf(std::string(kTwoByTwo) + "colour = 1\n").find(":22: tenant[1].colour: unknown key"),
      std::string::npos)
      << errorOf(std::string(kTwoByTwo) + "colour = 1\n");
  EXPECT_NE(errorOf("colour = 1\n[[device]]\n").find(":1: colour: unknown key"), std::string::npos);
  std::string noToken = "[[device]]\n[[tenant]]\nname = \"x\"\n";
  EXPECT_NE(errorOf(noToken).find("needs a token"), std::string::npos) << errorOf(noToken);
}

TEST(PoolConfigTest, ReadsConnectionLimitsAndRefusesBadOnes) {
  PoolConfig unset = parsePoolConfig(kTwoByTwo, "/etc/gpupool/pool.toml");
  EXPECT_FALSE(unset.connectionLimits.handshakeDeadlineMs);
  EXPECT_FALSE(unset.connectionLimits.maxUnauthenticated);
  std::string limits =
      "[limits]\nhandshake_deadline_ms = 2500\nmax_unauthenticated = 0\n"
      "max_unauthenticated_per_source = 16\n[[device]]\n";
  PoolConfig c = parsePoolConfig(limits, "/etc/gpupool/pool.toml");
  EXPECT_EQ(c.connectionLimits.handshakeDeadlineMs, 2500u);
  EXPECT_EQ(c.connectionLimits.maxUnauthenticated, 0u);
  EXPECT_EQ(c.connectionLimits.maxUnauthenticatedPerSource, 16u);
  EXPECT_NE(errorOf("[limits]\nhandshake_deadline_ms = 0\n[[device]]\n")
                .find(":2: limits.handshake_deadline_ms: expected a positive number"),
            std::string::npos);
  EXPECT_NE(errorOf("[limits]\nmax_unauthenticated = -1\n[[device]]\n")
                .find(":2: limits.max_unauthenticated: expected a connection count"),
            std::string::npos);
  EXPECT_NE(errorOf("[limits]\nmax_strangers = 1\n[[device]]\n")
                .find("limits.max_strangers: unknown key"),
            std::string::npos);
}

TEST(PoolConfigTest, RefusesDuplicatesAndUnknownDevices) {
  std::string dupToken =
      "[[device]]\n[[tenant]]\nname = \"a\"\ntoken = \"t\"\n"
      "[[tenant]]\nname = \"b\"\ntoken = \"t\"\n";
  EXPECT_NE(errorOf(dupToken).find("reuses another tenant's token"), std::string::npos);
  std::string badDevice = "[[device]]\n[[tenant]]\nname = \"a\"\ntoken = \"t\"\ndevices = [3]\n";
  EXPECT_NE(errorOf(badDevice).find("no device 3"), std::string::npos) << errorOf(badDevice);
}

TEST(PoolConfigTest, QuotasMustFitTheOvercommittedPool) {
  std::string text =
      "[[device]]\nmemory = \"1GiB\"\n"
      "[[tenant]]\nname = \"a\"\ntoken = \"1\"\nmemory_quota = \"768MiB\"\n"
      "[[tenant]]\nname = \"b\"\ntoken = \"2\"\nmemory_quota = \"768MiB\"\n";
  EXPECT_NE(errorOf(text).find("raise overcommit"), std::string::npos) << errorOf(text);
  EXPECT_EQ(errorOf("overcommit = 1.5\n" + text), "");
}

TEST(PoolConfigTest, ReportsTomlSyntaxErrorsWithTheLine) {
  std::string error = errorOf("[[device]]\nmemory = \n");
  EXPECT_EQ(error.rfind("/etc/gpupool/pool.toml:2:", 0), 0u) << error;
}

TEST(PoolConfigTest, CudaDevicesAreSelectedByIndexOrUuidAndKnowTheirLines) {
  PoolConfig config = parsePoolConfig(
      "[[device]]\nbackend = \"cuda\"\nuuid = \"MIG-1a2b3c4d-0000-5e6f-8a9b-0c1d2e3f4a5b\"\n"
      "[[device]]\nbackend = \"cuda\"\n\nindex = 3\n"
      "[[device]]\nbackend = \"cuda\"\n",
      "/etc/gpupool/pool.toml");
  ASSERT_EQ(config.devices.size(), 3u);
  EXPECT_EQ(config.devices[0].uuid, "MIG-1a2b3c4d-0000-5e6f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(config.devices[1].index, 3);
  EXPECT_FALSE(config.devices[2].index);
  EXPECT_EQ(deviceConfigProblem(config, 0, "uuid", "no such device"),
            "/etc/gpupool/pool.toml:3: device[0].uuid: no such device");
  EXPECT_EQ(deviceConfigProblem(config, 1, "index", "no CUDA device 3"),
            "/etc/gpupool/pool.toml:7: device[1].index: no CUDA device 3");
  EXPECT_EQ(deviceConfigProblem(config, 2, "backend", "x"),
            "/etc/gpupool/pool.toml:8: device[2].backend: x");

  std::string malformed = errorOf("[[device]]\nbackend = \"cuda\"\nuuid = \"GPU-12zz\"\n");
  EXPECT_EQ(malformed.rfind("/etc/gpupool/pool.toml:3: device[0].uuid: expected", 0), 0u)
      << malformed;
  std::string both = errorOf(
      "[[device]]\nbackend = \"cuda\"\nindex = 0\n"
      "uuid = \"GPU-5c2a9d0e-7a36-2e1c-7d0b-0f1f5e3d8a11\"\n");
  EXPECT_EQ(both.rfind("/etc/gpupool/pool.toml:4: device[0].uuid: give index or uuid", 0), 0u)
      << both;
}

TEST(PoolConfigTest, ParsesByteSizes) {
  EXPECT_EQ(parseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(parseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(parseByteSize("4096"), 4096u);
  EXPECT_FALSE(parseByteSize("12 parsecs"));
  EXPECT_FALSE(parseByteSize("99999999999999999999"));
}

}  // namespace
}  // namespace gpupool::server
