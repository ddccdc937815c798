// A bad memory access in one session's kernel breaks only that session: while the out-of-bounds
// program runs (several times), a correct longer program runs on the same server and passes; a
// new session afterwards works too.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>

#include "emu_server.h"
#include "suite_lists.h"

namespace gpupool::emu_programs {
namespace {

using std::chrono::seconds;

TEST(SessionIsolation, IllegalAddressBreaksOnlyItsOwnSession) {
  GpupoolServer server(emuServerOptions());
  const EnvironmentChanges environment = clientEnvironment(server.endpoint());
  // The debug flavour of streams_events runs long enough (many launches on several streams) to
  // overlap with the faulting sessions; builds without it (sanitizer builds) use the default one.
  const std::vector<std::string> built = flavours();
  const bool haveDebug = std::find(built.begin(), built.end(), "debug") != built.end();
  auto correct = std::async(std::launch::async, [&] {
    return runProgram(programPath(haveDebug ? "debug" : "default", "streams_events"), {},
                      environment, seconds(300));
  });
  // Faulting sessions keep coming while the correct one runs (at least three of them), so they
  // overlap whatever the machine's speed.
  int faults = 0;
  do {
    const ProgramResult bad =
        runProgram(programPath("default", "out_of_bounds"), {}, environment, seconds(120));
    ASSERT_TRUE(bad.exited && bad.exitCode == 43)
        << "out_of_bounds run " << faults << " " << bad.describe();
    ++faults;
  } while (
      faults < 3 ||
      (correct.wait_for(std::chrono::seconds(0)) == std::future_status::timeout && faults < 50));
  const ProgramResult good = correct.get();
  ASSERT_TRUE(good.exited && good.exitCode == 0) << good.describe() << "\n--- server log ---\n"
                                                 << server.log();
  EXPECT_NE(good.out.find("PASS"), std::string::npos) << good.describe();

  const ProgramResult after =
      runProgram(programPath("default", "vector_add"), {}, environment, seconds(120));
  EXPECT_TRUE(after.exited && after.exitCode == 0) << after.describe();
  EXPECT_TRUE(server.running()) << server.log();
  EXPECT_NE(server.log().find("illegal address"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace gpupool::emu_programs
