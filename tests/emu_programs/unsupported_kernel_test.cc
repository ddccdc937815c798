// Kernels using instructions the emu device does not implement (Volta-layout mma, tex.grad.cube)
// must fail when their module loads, with cudaErrorNotSupported, and the log must name the
// instruction, instead of the kernel running wrongly.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "emu_server.h"
#include "suite_lists.h"

namespace gpupool::emu_programs {
namespace {

using std::chrono::seconds;

// The instruction each program's error message must name.
const std::map<std::string, std::string>& expectedInstruction() {
  static const std::map<std::string, std::string> instructions = {
      {"unsupported_mma", "mma.sync.m8n8k4 with .f16 inputs"},
      {"unsupported_texture_grad_cube", "tex.grad on a cube texture is not supported"},
  };
  return instructions;
}

class UnsupportedKernel : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(UnsupportedKernel, FailsAtLoadNamingTheInstruction) {
  const auto& [program, flavour] = GetParam();
  ASSERT_EQ(expectedInstruction().count(program), 1u) << "no expectation for " << program;
  GpupoolServer server(emuServerOptions(computeCapabilityFor(flavour)));
  EnvironmentChanges environment = clientEnvironment(server.endpoint());
  environment["GPU_POOL_LOG"] = "1";  // the client logs why a module load failed
  const ProgramResult result =
      runProgram(programPath(flavour, program), {}, environment, seconds(120));
  ASSERT_TRUE(result.exited && result.exitCode == 44) << result.describe();
  EXPECT_NE(result.out.find("cudaErrorNotSupported"), std::string::npos) << result.describe();
  const std::string& instruction = expectedInstruction().at(program);
  const std::string everything = result.err + result.out + server.log();
  EXPECT_NE(everything.find(instruction), std::string::npos)
      << "neither the client's GPU_POOL_LOG=1 output nor the server log names `" << instruction
      << "`:\n"
      << result.describe() << "\n--- server log ---\n"
      << server.log();
  EXPECT_TRUE(server.running());
}

INSTANTIATE_TEST_SUITE_P(
    Emu, UnsupportedKernel, testing::ValuesIn(inEveryFlavour(unsupportedPrograms())),
    [](const testing::TestParamInfo<std::tuple<std::string, std::string>>& info) {
      return std::get<0>(info.param) + "_" + std::get<1>(info.param);
    });

}  // namespace
}  // namespace gpupool::emu_programs
