#include "client/pool_token.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpupool::client {

std::string tokenFromFile(const std::string& path, std::string* error) {
  error->clear();
  std::ifstream in(path);
  if (!in) {
    *error = "cannot be read (" + std::string(std::strerror(errno)) + ")";
    return {};
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const char* space = " \t\r\n";
  token.erase(0, token.find_first_not_of(space));
  auto last = token.find_last_not_of(space);
  token.erase(last == std::string::npos ? 0 : last + 1);
  if (token.empty()) *error = "is empty";
  return token;
}

std::optional<std::string> poolToken(std::string* error) {
  error->clear();
  if (const char* token = std::getenv("GPU_POOL_TOKEN")) return std::string(token);
  const char* path = std::getenv("GPU_POOL_TOKEN_FILE");
  if (!path || !*path) return std::nullopt;
  std::string why;
  std::string token = tokenFromFile(path, &why);
  if (!why.empty()) {
    *error = "GPU_POOL_TOKEN_FILE=" + std::string(path) + " " + why +
             (why == "is empty" ? "; it must hold your tenant's token"
                                : "; point it at a file holding your tenant's token");
    return std::nullopt;
  }
  return token;
}

}  // namespace gpupool::client
