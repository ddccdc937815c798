// The client side of what the device plugin hands a container: CUDA_VISIBLE_DEVICES naming pool
// devices by UUID ("GPU-…" and "MIG-…") across the servers of GPU_POOL_ENDPOINT, and the token read
// from GPU_POOL_TOKEN_FILE.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "client/pool_token.h"
#include "client/visible_devices.h"

namespace gpupool::client {
namespace {

DeviceUuid uuidEndingIn(unsigned char last) {
  DeviceUuid u{};
  u[0] = 0xab;
  u[15] = last;
  return u;
}

TEST(VisibleDevicesTest, GpuAndMigUuidsSelectDevicesOfEveryServer) {
  // Two devices of a first server, then a MIG instance and a GPU of a second, in pool order.
  std::vector<DeviceUuid> pool = {uuidEndingIn(1), uuidEndingIn(2), uuidEndingIn(3),
                                  uuidEndingIn(4)};
  std::string mig = "MIG-" + uuidHex(pool[2]).substr(0, 8) + "-" + uuidHex(pool[2]).substr(8);
  std::string gpu = "GPU-" + uuidHex(pool[1]);
  EXPECT_EQ(visibleDeviceIndices((mig + "," + gpu).c_str(), pool), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(visibleDeviceIndices("3,0", pool), (std::vector<size_t>{3, 0}));
  // The list ends at the first entry naming no device.
  EXPECT_EQ(visibleDeviceIndices((gpu + ",MIG-ffff," + mig).c_str(), pool), std::vector<size_t>{1});
  EXPECT_TRUE(visibleDeviceIndices("", pool).empty());
}

// A temporary directory of token files (no process harness: this is a unit test).
class TokenDirectory {
 public:
  TokenDirectory() {
    char name[] = "/tmp/gpupool-token-XXXXXX";
    path_ = ::mkdtemp(name) ? name : "";
  }
  ~TokenDirectory() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name)) << text;
  }

 private:
  std::string path_;
};

class PoolTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GPU_POOL_TOKEN");
    ::unsetenv("GPU_POOL_TOKEN_FILE");
  }
  void TearDown() override { SetUp(); }
  TokenDirectory dir_;
};

TEST_F(PoolTokenTest, TheFileIsReadWhenGpuPoolTokenIsUnset) {
  std::string error;
  EXPECT_FALSE(poolToken(&error));
  EXPECT_TRUE(error.empty());

  dir_.write("token", "team-a-secret\n");
  ::setenv("GPU_POOL_TOKEN_FILE", dir_.file("token").c_str(), 1);
  EXPECT_EQ(poolToken(&error), "team-a-secret");
  ::setenv("GPU_POOL_TOKEN", "from-the-variable", 1);
  EXPECT_EQ(poolToken(&error), "from-the-variable");
}

TEST_F(PoolTokenTest, AnUnreadableOrEmptyFileIsAnErrorNamingIt) {
  std::string error;
  ::setenv("GPU_POOL_TOKEN_FILE", dir_.file("missing").c_str(), 1);
  EXPECT_FALSE(poolToken(&error));
  EXPECT_NE(error.find("GPU_POOL_TOKEN_FILE=" + dir_.file("missing")), std::string::npos) << error;
  dir_.write("empty", "\n");
  ::setenv("GPU_POOL_TOKEN_FILE", dir_.file("empty").c_str(), 1);
  EXPECT_FALSE(poolToken(&error));
  EXPECT_NE(error.find("is empty"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpupool::client
