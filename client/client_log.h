// The client library's diagnostics on stderr. GPU_POOL_LOG selects how much: 0 only errors that
// stop the program from working (the default), 1 also every failed remote call with the server's
// reason, 2 also each remote call.
#pragma once

#include <cuda.h>

#include <string>

namespace gpupool::client {

int logLevel();
// Writes "gpupool: <message>\n" to stderr in one write.
void logLine(const std::string& message);
// How a call that does not do what was asked says why: logs `why` at GPU_POOL_LOG >= 1 and returns
// `code`, so the caller gets an error and the user can find its reason.
CUresult refuseCall(CUresult code, const std::string& why);

}  // namespace gpupool::client
