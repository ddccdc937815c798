#include "transport/endpoint.h"

#include <charconv>

namespace gpupool::transport {

std::string Endpoint::url() const {
  if (scheme == "shm") return "shm://" + host;
  bool ipv6 = host.find(':') != std::string::npos;
  return scheme + "://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::optional<Endpoint> parseEndpoint(const std::string& text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Endpoint> {
    *error = "invalid endpoint '" + text + "': " + why +
             " (expected tcp://HOST:PORT, tls://HOST:PORT, rdma://HOST:PORT or shm:///SOCKET/PATH, "
             "e.g. tcp://127.0.0.1:7000)";
    return std::nullopt;
  };
  auto sep = text.find("://");
  if (sep == std::string::npos) return fail("missing scheme");
  Endpoint e;
  e.scheme = text.substr(0, sep);
  if (e.scheme != "tcp" && e.scheme != "rdma" && e.scheme != "tls" && e.scheme != "shm") {
    return fail("unknown scheme '" + e.scheme + "'");
  }
  std::string rest = text.substr(sep + 3);
  if (e.scheme == "shm") {
    // sockaddr_un holds 108 bytes with the terminating NUL.
    if (rest.empty() || rest[0] != '/') return fail("shm:// needs an absolute socket path");
    if (rest.size() > 107) return fail("socket path longer than 107 bytes");
    e.host = rest;
    return e;
  }
  std::string portText;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos) return fail("unterminated '[' in IPv6 address");
    e.host = rest.substr(1, close - 1);
    if (close + 1 >= rest.size() || rest[close + 1] != ':') return fail("missing port");
    portText = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string::npos) return fail("missing port");
    e.host = rest.substr(0, colon);
    portText = rest.substr(colon + 1);
  }
  if (e.host.empty()) return fail("missing host");
  if (portText.empty()) return fail("missing port");
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (ec != std::errc() || ptr != portText.data() + portText.size() || port > 65535) {
    return fail("port '" + portText + "' is not a number from 0 to 65535");
  }
  e.port = static_cast<uint16_t>(port);
  return e;
}

std::optional<std::vector<Endpoint>> parseEndpointList(const std::string& text,
                                                       std::string* error) {
  std::vector<Endpoint> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto e = parseEndpoint(item, error);
    if (!e) return std::nullopt;
    out.push_back(*e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace gpupool::transport
