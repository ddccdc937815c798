// The client library's diagnostics on stderr. GPU_POOL_LOG selects how much: 0 only errors that
// stop the program from working (the default), 1 also every failed remote call with the server's
// reason, 2 also each remote call.
#pragma once

#include <string>

namespace gpupool::client {

int logLevel();
// Writes "gpupool: <message>\n" to stderr in one write.
void logLine(const std::string& message);

}  // namespace gpupool::client
