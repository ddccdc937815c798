// tls:// endpoints: a server with a self-signed certificate (made here with openssl) serves a
// client that trusts it; a client that does not trust it, or speaks plain TCP, gets nothing.
#include <gtest/gtest.h>

#include "build_paths.h"
#include "pool_fixture.h"

namespace gpupool::pooltest {
namespace {

using std::chrono::seconds;

TEST(TlsTest, TrustedClientsGetInOthersDoNot) {
  ScratchDirectory dir;
  ASSERT_TRUE(e2e::makeSelfSignedCertificate(dir, "server"));
  ASSERT_TRUE(e2e::makeSelfSignedCertificate(dir, "stranger"));
  dir.write("pool.toml",
            "[[device]]\nmemory = \"64MiB\"\n"
            "[[tenant]]\nname = \"alice\"\ntoken = \"a\"\n");
  GpupoolServer server(
      poolServerOptions({"--listen", "tls://127.0.0.1:0", "--tls-cert", dir.file("server.pem"),
                         "--tls-key", dir.file("server.key"), "--config", dir.file("pool.toml")}));
  ASSERT_EQ(server.endpoint().rfind("tls://", 0), 0u) << server.endpoint();

  EnvironmentChanges trusted = tenantEnvironment(server.endpoint(), "a");
  trusted["GPU_POOL_TLS_CA"] = dir.file("server.pem");
  ProgramResult ok = e2e::runProgram(poolClientPath(), {"try", "8"}, trusted, seconds(60));
  EXPECT_EQ(valueAfter(ok.out, "ALLOC"), 0) << ok.describe();
  EXPECT_NE(ok.out.find("MEMINFO"), std::string::npos) << ok.describe();

  EnvironmentChanges untrusted = trusted;
  untrusted["GPU_POOL_TLS_CA"] = dir.file("stranger.pem");
  ProgramResult refused = e2e::runProgram(poolClientPath(), {"init"}, untrusted, seconds(60));
  EXPECT_NE(valueAfter(refused.out, "CUINIT"), 0) << refused.describe();
  EXPECT_NE(refused.err.find("certificate"), std::string::npos) << refused.describe();

  // Plain TCP to the TLS port is not a session.
  std::string plain = "tcp" + server.endpoint().substr(3);
  ProgramResult tcp = runClient(plain, "a", {"init"}, 30);
  EXPECT_NE(valueAfter(tcp.out, "CUINIT"), 0) << tcp.describe();

  // `gpupool status` speaks tls:// too.
  ProgramResult status = e2e::runProgram(
      e2e::gpupoolCliPath(), {"status", "--json", "--endpoint", server.endpoint()},
      {{"GPU_POOL_TLS_CA", dir.file("server.pem")}, {"GPU_POOL_ENDPOINT", std::nullopt}},
      seconds(30));
  EXPECT_TRUE(status.passed()) << status.describe();
  EXPECT_NE(status.out.find("\"alice\""), std::string::npos) << status.out;
}

}  // namespace
}  // namespace gpupool::pooltest
