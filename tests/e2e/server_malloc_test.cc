// gpupoold's malloc (server/CMakeLists.txt, GPUPOOL_SERVER_ALLOCATOR): `gpupoold --version` asks
// the running process which malloc answers it, so a build meant to use mimalloc whose malloc is
// still the C library's (a link order gone wrong) fails here, and one that preloads another
// malloc says so.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "tests/harness/child_process.h"
#include "tests/harness/harness_paths.h"

#ifndef GPUPOOL_EXPECTED_SERVER_MALLOC
#error "GPUPOOL_EXPECTED_SERVER_MALLOC comes from tests/e2e/CMakeLists.txt"
#endif

namespace gpupool::e2e {
namespace {

using namespace std::chrono_literals;

ProgramResult version(EnvironmentChanges environment = {}) {
  ChildProcess::Options options;
  options.path = gpupooldPath();
  options.args = {"--version"};
  options.environment = std::move(environment);
  ChildProcess server(options);
  return server.finish(30s);
}

TEST(ServerMalloc, VersionNamesTheMallocTheBuildChose) {
  ProgramResult r = version();
  ASSERT_TRUE(r.passed()) << r.describe();
  const std::string expected = GPUPOOL_EXPECTED_SERVER_MALLOC;
  if (expected == "mimalloc") {
    EXPECT_NE(r.out.find("(malloc: mimalloc 2."), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("(malloc: the C library's)"), std::string::npos) << r.out;
  }
}

TEST(ServerMalloc, APreloadedMallocIsNotReportedAsMimalloc) {
  if (std::string(GPUPOOL_EXPECTED_SERVER_MALLOC) != "mimalloc")
    GTEST_SKIP() << "gpupoold is built with the C library's malloc";
  // The file this test's malloc comes from, the C library: preloaded, it answers gpupoold's calls
  // before mimalloc does.
  Dl_info where{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&std::malloc), &where), 0);
  ASSERT_NE(where.dli_fname, nullptr);
  ProgramResult r = version({{"LD_PRELOAD", std::string(where.dli_fname)}});
  ASSERT_TRUE(r.passed()) << r.describe();
  EXPECT_NE(r.out.find("(malloc: not mimalloc"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpupool::e2e
