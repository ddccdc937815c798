// `gpupool top`: what `gpupool status` shows, redrawn live in a terminal.
#pragma once

#include <optional>
#include <string>

namespace gpupool::tools {

struct TopOptions {
  std::optional<std::string> endpoint;  // --endpoint; else the first of GPU_POOL_ENDPOINT
  double intervalSeconds = 1;           // --interval: seconds between frames
  bool once = false;                    // --once: one frame, no screen control
  std::optional<unsigned> iterations;   // --iterations: frames to draw, then exit
};

// Draws a frame per interval: the server, its devices (memory used/total, sessions, utilization,
// MIG profile and parent), its tenants (memory against quota, GPU-seconds, queueing delay:
// total and the average per launch since the previous frame) and its sessions. On a terminal it
// clears and redraws the screen (ANSI) and reads keys: q or Ctrl-C quits and restores the
// terminal. When stdout is not a terminal, or with --once, frames are plain text and, without
// --iterations, there is one. Exit codes as `gpupool status`: 0, 1 (server error), 2 (usage or
// connection; the message says what to check).
int topCommand(const TopOptions& options);

}  // namespace gpupool::tools
