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

TEST(PoolConfigTest, ParsesByteSizes) {
  EXPECT_EQ(parseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(parseByteSize("2G"), 2ull << 30);
  EXPECT_EQ(parseByteSize("4096"), 4096u);
  EXPECT_FALSE(parseByteSize("12 parsecs"));
  EXPECT_FALSE(parseByteSize("99999999999999999999"));
}

}  // namespace
}  // namespace gpupool::server
