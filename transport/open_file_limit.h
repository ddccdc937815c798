// The open-file limit of this process: a server holds one descriptor per connection, and a client
// holding many connections (the bench's idle clients, the scale test) as many.
#pragma once

#include <cstdint>

namespace gpupool::transport {

struct OpenFileLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft limit on open files to the hard limit, as far as the system lets this process.
// Zeros when the limits cannot be read.
OpenFileLimit raiseOpenFileLimit();

}  // namespace gpupool::transport
