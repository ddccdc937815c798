// One client, several servers: GPU_POOL_ENDPOINT=tcp://a,tcp://b shows the union of their devices
// in that order, CUDA_VISIBLE_DEVICES picks among them, copies cross servers, and a server that is
// down is named while the others keep serving.
#include <gtest/gtest.h>
#include <signal.h>

#include <sstream>

#include "build_paths.h"
#include "child_process.h"
#include "gpupool_server.h"

namespace gpupool::e2e {
namespace {

using std::chrono::seconds;

std::string valueOf(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind(key + "=", 0) == 0) return l.substr(key.size() + 1);
  }
  return "";
}

ServerOptions emuServer(int devices, int slot) {
  ServerOptions o;
  o.extraArgs = {"--devices", std::to_string(devices), "--address-slot", std::to_string(slot)};
  return o;
}

EnvironmentChanges poolEnvironment(const std::string& endpoints) {
  EnvironmentChanges env = clientEnvironment(endpoints);
  env["GPU_POOL_ENDPOINT"] = endpoints;
  env["CUDA_VISIBLE_DEVICES"] = std::nullopt;
  return env;
}

TEST(MultiServer, ShowsTheUnionOfDevicesInOrder) {
  GpupoolServer a(emuServer(1, 11));
  GpupoolServer b(emuServer(2, 12));
  auto env = poolEnvironment(a.endpoint() + "," + b.endpoint());
  ProgramResult r = runProgram(programPath("device_query"), {}, env, seconds(60));
  ASSERT_TRUE(r.passed()) << r.describe();
  EXPECT_EQ(valueOf(r.out, "device_count"), "3");
  // Server order, then each server's own order: a's device, then b's two (their PCI domains are
  // the servers' address slots, their buses 0x10 + the server's ordinal).
  EXPECT_EQ(valueOf(r.out, "device0.pci"), "000b:10:00");
  EXPECT_EQ(valueOf(r.out, "device1.pci"), "000c:10:00");
  EXPECT_EQ(valueOf(r.out, "device2.pci"), "000c:11:00");
}

TEST(MultiServer, CudaVisibleDevicesSelectsAndOrdersPoolDevices) {
  GpupoolServer a(emuServer(1, 13));
  GpupoolServer b(emuServer(2, 14));
  auto env = poolEnvironment(a.endpoint() + "," + b.endpoint());
  env["CUDA_VISIBLE_DEVICES"] = "2,0";
  ProgramResult r = runProgram(programPath("device_query"), {}, env, seconds(60));
  ASSERT_TRUE(r.passed()) << r.describe();
  EXPECT_EQ(valueOf(r.out, "device_count"), "2");
  EXPECT_EQ(valueOf(r.out, "device0.pci"), "000e:11:00");
  EXPECT_EQ(valueOf(r.out, "device1.pci"), "000d:10:00");
}

TEST(MultiServer, ComputesOnEveryDeviceAndCopiesAcrossServers) {
  GpupoolServer a(emuServer(1, 15));
  GpupoolServer b(emuServer(2, 16));
  auto env = poolEnvironment(a.endpoint() + "," + b.endpoint());
  for (const char* program : {"multi_device", "multi_device_shared"}) {
    ProgramResult r = runProgram(programPath(program), {}, env, seconds(180));
    ASSERT_TRUE(r.passed()) << program << ": " << r.describe();
    EXPECT_NE(r.out.find("device 0 -> device 1 copy ok"), std::string::npos) << r.out;
  }
}

TEST(MultiServer, AServerThatIsDownIsNamedAndTheOthersServe) {
  GpupoolServer a(emuServer(1, 17));
  GpupoolServer b(emuServer(1, 18));
  std::string downEndpoint = b.endpoint();
  b.signal(SIGKILL);
  for (int i = 0; i < 100 && b.running(); ++i) usleep(20000);
  auto env = poolEnvironment(a.endpoint() + "," + downEndpoint);
  ProgramResult r = runProgram(programPath("vector_add"), {}, env, seconds(120));
  ASSERT_TRUE(r.passed()) << r.describe();
  EXPECT_NE(r.err.find("cannot reach " + downEndpoint), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("its devices are left out"), std::string::npos) << r.err;
  ProgramResult q = runProgram(programPath("device_query"), {}, env, seconds(60));
  ASSERT_TRUE(q.passed()) << q.describe();
  EXPECT_EQ(valueOf(q.out, "device_count"), "1");
}

TEST(MultiServer, ServersSharingAnAddressWindowAreRefusedClearly) {
  GpupoolServer a(emuServer(1, 19));
  GpupoolServer b(emuServer(1, 19));
  auto env = poolEnvironment(a.endpoint() + "," + b.endpoint());
  ProgramResult r = runProgram(programPath("device_query"), {}, env, seconds(60));
  ASSERT_TRUE(r.passed()) << r.describe();
  EXPECT_EQ(valueOf(r.out, "device_count"), "1");
  EXPECT_NE(r.err.find("--address-slot"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpupool::e2e
