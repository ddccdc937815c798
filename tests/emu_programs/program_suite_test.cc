// Runs every program of the suite in every flavour against a fresh emu server and checks its exit
// code and output. Most programs check themselves and end with PASS; a few end with a specific
// exit code (device assert, out-of-bounds access) or are checked here (device printf).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "emu_server.h"
#include "suite_lists.h"

namespace gpupool::emu_programs {
namespace {

using std::chrono::seconds;

// How a program must end when it does not simply print PASS and exit 0.
struct SpecialEnding {
  int exitCode;
  std::string requiredOutput;  // a line fragment its stdout must contain
};

const std::map<std::string, SpecialEnding>& specialEndings() {
  static const std::map<std::string, SpecialEnding> endings = {
      {"device_assert", {42, "cudaDeviceSynchronize after failing assert: cudaErrorAssert"}},
      {"out_of_bounds", {43, "cudaDeviceSynchronize after the bad store: cudaErrorIllegalAddress"}},
  };
  return endings;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    result.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return result;
}

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), pattern, args...);
  return buffer;
}

// device_printf's stdout, line by line: the device lines the host printf produces for the same
// formats and arguments, each group before the host line the program prints after synchronizing.
void checkPrintfOutput(const std::string& out) {
  const std::vector<std::string> got = lines(out);
  size_t at = 0;
  auto expectGroup = [&](std::vector<std::string> group, bool ordered) {
    std::vector<std::string> actual(got.begin() + std::min(at, got.size()),
                                    got.begin() + std::min(at + group.size(), got.size()));
    if (!ordered) {
      std::sort(group.begin(), group.end());
      std::sort(actual.begin(), actual.end());
    }
    EXPECT_EQ(actual, group) << "device printf lines starting at line " << at + 1
                             << "; the whole output:\n"
                             << out;
    at += group.size();
  };
  // hello<<<2, 2>>>: threads may print in any order.
  expectGroup({"launch 0 block 0 thread 0", "launch 0 block 0 thread 1",
               "launch 0 block 1 thread 0", "launch 0 block 1 thread 1"},
              false);
  expectGroup({"host: after launch 0"}, true);
  expectGroup(
      {format("ints: %d %i %u %x %X %o %lld %llu", -42, 7, 4000000000u, 0xbeefu, 0xcafeu, 8,
              -1234567890123ll, 18446744073709551615ull),
       format("chars: %c%c%c and string '%s' and %%", 'o', 'k', '!', "device text"),
       format("floats: %f %.3f %e %g %8.2f|%-8.1f|", 1.5, 3.14159, 12345.678, 0.0001, -2.25, 7.0),
       format("padding: [%5d] [%-5d] [%05d] [%+d]", 42, 42, 42, 42), "host: after formats"},
      true);
  std::vector<std::string> serial;
  for (int i = 0; i < 20; ++i) serial.push_back(format("serial %d of %d", i, 20));
  serial.push_back("host: after serial");
  serial.push_back("PASS");
  expectGroup(serial, true);
  EXPECT_EQ(at, got.size()) << "unexpected extra output:\n" << out;
}

// Runs `program` as built in `flavour` against a fresh emu server started with `serverArgs` and
// checks how it ended.
void runSuiteProgram(const std::string& program, const std::string& flavour,
                     const std::vector<std::string>& serverArgs) {
  e2e::ServerOptions options = emuServerOptions(computeCapabilityFor(flavour));
  options.extraArgs.insert(options.extraArgs.end(), serverArgs.begin(), serverArgs.end());
  GpupoolServer server(options);
  const ProgramResult result = runProgram(programPath(flavour, program), {},
                                          clientEnvironment(server.endpoint()), seconds(180));
  const auto special = specialEndings().find(program);
  if (special != specialEndings().end()) {
    ASSERT_TRUE(result.exited && result.exitCode == special->second.exitCode)
        << program << " (" << flavour << ") must exit with " << special->second.exitCode << "; it "
        << result.describe() << "\n--- server log ---\n"
        << server.log();
    EXPECT_NE(result.out.find(special->second.requiredOutput), std::string::npos)
        << result.describe();
  } else {
    ASSERT_TRUE(result.exited && result.exitCode == 0)
        << program << " (" << flavour << ") " << result.describe() << "\n--- server log ---\n"
        << server.log();
    const std::vector<std::string> outputLines = lines(result.out);
    ASSERT_FALSE(outputLines.empty());
    EXPECT_EQ(outputLines.back(), "PASS") << result.describe();
  }
  if (program == "device_printf") checkPrintfOutput(result.out);
  if (program == "out_of_bounds") {
    // The server names the kernel that made the bad access.
    EXPECT_NE(server.log().find("writeFar"), std::string::npos) << server.log();
  }
  EXPECT_TRUE(server.running()) << "the server died:\n" << server.log();
}

class ProgramSuite : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ProgramSuite, RunsOnEmu) {
  const auto& [program, flavour] = GetParam();
  runSuiteProgram(program, flavour, {});
}

INSTANTIATE_TEST_SUITE_P(
    Emu, ProgramSuite, testing::ValuesIn(inEveryFlavour(suitePrograms())),
    [](const testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param);
    });

// The same programs (default flavour) on the interpreter's generic path (gpupoold
// --emu-generic-path): every instruction through the generic code instead of the routines
// specialized at load. The programs check their results against the host's, so the two paths
// agree wherever a program looks.
class GenericPathSuite : public testing::TestWithParam<std::string> {};

TEST_P(GenericPathSuite, RunsOnEmu) {
  runSuiteProgram(GetParam(), "default", {"--emu-generic-path"});
}

INSTANTIATE_TEST_SUITE_P(GenericPath, GenericPathSuite, testing::ValuesIn(suitePrograms()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Hopper programs on the cuda backend, chained onto an emu server advertising compute capability
// 9.0: the cuda backend's driver (our libcuda, talking to that emu server) encodes the tensor maps
// and runs the bulk copies, as NVIDIA's would on an H100 or H200.
class ChainedSm90Suite : public testing::TestWithParam<std::string> {};

TEST_P(ChainedSm90Suite, RunsOnTheChainedCudaBackend) {
  const std::vector<std::string> built = flavours();
  if (std::find(built.begin(), built.end(), "sm90") == built.end()) {
    GTEST_SKIP() << "this build has no sm90 flavour (GPUPOOL_EMU_FLAVOURS)";
  }
  e2e::ChainedServers servers = e2e::startChainedServers({}, emuServerOptions(90));
  const ProgramResult result =
      runProgram(programPath("sm90", GetParam()), {}, clientEnvironment(servers.cuda->endpoint()),
                 seconds(180));
  ASSERT_TRUE(result.exited && result.exitCode == 0)
      << GetParam() << " (sm90, chained) " << result.describe() << "\n--- cuda server log ---\n"
      << servers.cuda->log() << "\n--- emu server log ---\n"
      << servers.emu->log();
  const std::vector<std::string> outputLines = lines(result.out);
  ASSERT_FALSE(outputLines.empty());
  EXPECT_EQ(outputLines.back(), "PASS") << result.describe();
}

INSTANTIATE_TEST_SUITE_P(Chained, ChainedSm90Suite,
                         testing::Values("tensor_map_copy", "tensor_map_im2col", "bulk_copy",
                                         "cuda_pipeline"));

}  // namespace
}  // namespace gpupool::emu_programs
