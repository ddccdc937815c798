// The emu program suite runs on the end-to-end harness (tests/e2e): a `gpupoold --backend emu`
// per test and the programs as child processes with a deadline. This header adds what the suite
// needs on top: the server options for a flavour, the client environment, and program paths.
#pragma once

#include <string>

#include "child_process.h"
#include "gpupool_server.h"

namespace gpupool::emu_programs {

using e2e::EnvironmentChanges;
using e2e::GpupoolServer;
using e2e::ProgramResult;
using e2e::runProgram;

// A server advertising `computeCapability` (major*10+minor; 0 = the server's default).
e2e::ServerOptions emuServerOptions(int computeCapability = 0);

// The environment that sends a CUDA program to `endpoint` through our libcuda.so.1, with the
// client settings of the caller's shell that would change what the tests observe removed.
EnvironmentChanges clientEnvironment(const std::string& endpoint);

// A program of the suite as built in `flavour`.
std::string programPath(const std::string& flavour, const std::string& program);

}  // namespace gpupool::emu_programs
