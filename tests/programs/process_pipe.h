// Whole-buffer pipe transfers for the test programs that fork a second process (CUDA IPC): the
// handles and the go-ahead signals travel over pipes.
#pragma once

#include <unistd.h>

#include <cstddef>

#include "self_check.h"

inline void writeAll(int fd, const void* data, size_t bytes) {
  CHECK(write(fd, data, bytes) == static_cast<ssize_t>(bytes), "pipe write failed");
}

inline void readAll(int fd, void* data, size_t bytes) {
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = read(fd, static_cast<char*>(data) + got, bytes - got);
    CHECK(n > 0, "pipe read failed (the other process ended?)");
    got += static_cast<size_t>(n);
  }
}
