// The emu program suite runs on the process harness (tests/harness): a `gpupoold --backend emu`
// per test and the programs as child processes with a deadline. This header adds what the suite
// needs on top: the server options for a compute capability, and program paths.
#pragma once

#include <string>

#include "child_process.h"
#include "gpupool_server.h"

namespace gpupool::emu_programs {

using e2e::clientEnvironment;
using e2e::EnvironmentChanges;
using e2e::GpupoolServer;
using e2e::ProgramResult;
using e2e::runProgram;

// A server advertising `computeCapability` (major*10+minor; 0 = the server's default).
e2e::ServerOptions emuServerOptions(int computeCapability = 0);

// A program of the suite as built in `flavour`.
std::string programPath(const std::string& flavour, const std::string& program);

}  // namespace gpupool::emu_programs
