// Endpoint URL parsing: what is accepted, what is refused, and that refusals say why.
#include "transport/endpoint.h"

#include <gtest/gtest.h>

namespace gpupool::transport {
namespace {

Endpoint parseOk(const std::string& text) {
  std::string error;
  auto endpoint = parseEndpoint(text, &error);
  EXPECT_TRUE(endpoint.has_value()) << text << ": " << error;
  return endpoint.value_or(Endpoint{});
}

// Returns the error message for a URL that must be refused.
std::string parseError(const std::string& text) {
  std::string error;
  auto endpoint = parseEndpoint(text, &error);
  EXPECT_FALSE(endpoint.has_value()) << text << " was accepted as " << endpoint->url();
  return error;
}

TEST(EndpointTest, ParsesTcpIpv4) {
  Endpoint e = parseOk("tcp://127.0.0.1:7000");
  EXPECT_EQ(e.scheme, "tcp");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.url(), "tcp://127.0.0.1:7000");
}

TEST(EndpointTest, ParsesHostNameAndRdma) {
  Endpoint e = parseOk("rdma://gpu-host.example:18515");
  EXPECT_EQ(e.scheme, "rdma");
  EXPECT_EQ(e.host, "gpu-host.example");
  EXPECT_EQ(e.port, 18515);
}

TEST(EndpointTest, ParsesBracketedIpv6AndPrintsBracketsBack) {
  Endpoint e = parseOk("tcp://[::1]:7000");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.url(), "tcp://[::1]:7000");

  Endpoint full = parseOk("tcp://[fe80::1:2:3]:65535");
  EXPECT_EQ(full.host, "fe80::1:2:3");
  EXPECT_EQ(full.port, 65535);
}

TEST(EndpointTest, PortZeroMeansPickOne) {
  Endpoint e = parseOk("tcp://127.0.0.1:0");
  EXPECT_EQ(e.port, 0);
}

TEST(EndpointTest, RefusalsNameTheProblem) {
  struct Case {
    const char* text;
    const char* reason;
  };
  const Case cases[] = {
      {"127.0.0.1:7000", "missing scheme"}, {"http://127.0.0.1:7000", "unknown scheme 'http'"},
      {"tcp://127.0.0.1", "missing port"},  {"tcp://127.0.0.1:", "missing port"},
      {"tcp://:7000", "missing host"},      {"tcp://[::1:7000", "unterminated '['"},
      {"tcp://[::1]7000", "missing port"},  {"tcp://h:70000", "port '70000'"},
      {"tcp://h:-1", "port '-1'"},          {"tcp://h:12ab", "port '12ab'"},
  };
  for (const auto& c : cases) {
    std::string error = parseError(c.text);
    EXPECT_NE(error.find(c.text), std::string::npos) << "error does not quote the input: " << error;
    EXPECT_NE(error.find(c.reason), std::string::npos)
        << c.text << ": expected '" << c.reason << "' in: " << error;
    // Every refusal shows what a valid endpoint looks like.
    EXPECT_NE(error.find("tcp://HOST:PORT"), std::string::npos) << error;
  }
}

TEST(EndpointTest, ParsesShmSocketPathAndPrintsItBack) {
  Endpoint e = parseOk("shm:///run/gpupool/s.sock");
  EXPECT_EQ(e.scheme, "shm");
  EXPECT_EQ(e.host, "/run/gpupool/s.sock");
  EXPECT_EQ(e.url(), "shm:///run/gpupool/s.sock");
  EXPECT_NE(parseError("shm://relative.sock").find("absolute socket path"), std::string::npos);
  EXPECT_NE(parseError("shm://").find("absolute socket path"), std::string::npos);
  EXPECT_NE(parseError("shm:///" + std::string(107, 'x')).find("longer than 107"),
            std::string::npos);
}

TEST(EndpointTest, ParsesCommaSeparatedList) {
  std::string error;
  auto list = parseEndpointList("tcp://a:1,tcp://[::1]:2,rdma://c:3", &error);
  ASSERT_TRUE(list.has_value()) << error;
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].host, "a");
  EXPECT_EQ((*list)[0].port, 1);
  EXPECT_EQ((*list)[1].host, "::1");
  EXPECT_EQ((*list)[1].port, 2);
  EXPECT_EQ((*list)[2].scheme, "rdma");
}

TEST(EndpointTest, SingleItemList) {
  std::string error;
  auto list = parseEndpointList("tcp://a:1", &error);
  ASSERT_TRUE(list.has_value()) << error;
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].url(), "tcp://a:1");
}

TEST(EndpointTest, ListWithABadItemNamesThatItem) {
  std::string error;
  EXPECT_FALSE(parseEndpointList("tcp://a:1,bogus:2", &error).has_value());
  EXPECT_NE(error.find("'bogus:2'"), std::string::npos) << error;

  error.clear();
  EXPECT_FALSE(parseEndpointList("tcp://a:1,", &error).has_value()) << "empty trailing item";
  EXPECT_FALSE(error.empty());

  error.clear();
  EXPECT_FALSE(parseEndpointList("", &error).has_value()) << "empty list";
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace gpupool::transport
