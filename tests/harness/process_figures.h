// What /proc says about a process (a test's server): its threads, descriptors and memory.
#pragma once

#include <sys/types.h>

namespace gpupool::e2e {

struct ProcessFigures {
  long threads = -1;
  long deviceThreads = -1;  // of them, the emu device's stream queues (named "emu-stream")
  long descriptors = -1;
  long rssKiB = -1;
};

// -1 in the fields it could not read.
ProcessFigures figuresOf(pid_t pid);

}  // namespace gpupool::e2e
