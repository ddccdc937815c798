// The tenant token a client sends in its Hello, for libcuda.so.1 and libnvidia-ml.so.1 alike:
// GPU_POOL_TOKEN, else the content of the file GPU_POOL_TOKEN_FILE names (how gpupool-device-plugin
// hands a pod its namespace's token, docs/device-plugin.md).
#pragma once

#include <optional>
#include <string>

namespace gpupool::client {

// The token; nullopt when neither variable is set, or (with *error saying why, naming the file)
// when GPU_POOL_TOKEN_FILE is set but cannot be read or holds nothing. White space around the
// file's content (a trailing newline) is not part of the token.
std::optional<std::string> poolToken(std::string* error);

// A token file's content without the white space around it (a Secret's value often ends with a
// newline). Empty, with *error saying why ("cannot be read (...)", "is empty"), when there is none.
std::string tokenFromFile(const std::string& path, std::string* error);

}  // namespace gpupool::client
