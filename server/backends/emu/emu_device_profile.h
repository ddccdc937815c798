// What the emu device reports about itself: a plausible Ampere-class GPU ("gpupool emu device")
// whose compute capability, SM count and memory size are configurable.
#pragma once

#include "server/backend.h"

namespace gpupool::server::emu {

struct EmuDeviceOptions {
  int computeCapability = 80;  // major*10 + minor
  int multiprocessors = 132;
  uint64_t memoryBytes = 4ull << 30;
  std::string name = "gpupool emu device";
  unsigned addressSlot = 0;  // also makes UUIDs and PCI domains differ between servers
};

DeviceDescription describeEmuDevice(unsigned index, const EmuDeviceOptions& options);

}  // namespace gpupool::server::emu
