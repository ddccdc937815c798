// Strong test definitions of the few driver entry points the surface calls back into
// (they override the generated weak stubs); every other entry point keeps its stub.
#pragma once

#include <cuda.h>

#include <vector>

namespace fake_driver {

struct FakeDevice {
  CUuuid uuid;
  int pciDomain;
  int pciBus;
  int pciDevice;
};

// What the fakes report; tests set these before calling into the surface.
struct State {
  int driverVersion = 13000;
  std::vector<FakeDevice> devices;
  CUresult deviceGetCountResult = CUDA_SUCCESS;
  CUcontext currentContext = nullptr;
  CUcontext primaryContext = nullptr;  // what primaryContextHandle reports for every device
  CUdevice lastPrimaryContextDevice = -1;
  const void* lastFatbinLoaded = nullptr;  // argument of the last cuModuleLoadFatBinary
  CUmodule moduleToReturn = nullptr;
};

State& state();

}  // namespace fake_driver
