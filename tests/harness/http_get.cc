#include "http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

namespace gpupool::e2e {

std::string httpGet(const std::string& url) {
  std::smatch m;
  if (!std::regex_search(url, m, std::regex(R"(http://([\d.]+):(\d+)(/\S*))"))) return "";
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(std::stoi(m[2])));
  ::inet_pton(AF_INET, std::string(m[1]).c_str(), &address.sin_addr);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
    std::string request = "GET " + std::string(m[3]) + " HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!::write(fd, request.data(), request.size());
    char buffer[4096];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) response.append(buffer, n);
  }
  ::close(fd);
  return response;
}

}  // namespace gpupool::e2e
