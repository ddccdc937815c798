// Public API of the PTX interpreter, part 1: loading a PTX module.
//
// A Module is parsed, resolved and validated once (Module::load) and is then immutable apart from
// bindGlobals(), which the backend calls once after placing the module's global variables in device
// memory. A loaded Module may be launched from several threads at once.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpupool::ptx {

struct KernelParam {
  uint32_t offset, size, align;
};

struct KernelInfo {
  std::string name;                 // mangled entry name
  std::vector<KernelParam> params;  // from the .entry .param list (structs: .align N .b8 name[M])
  uint32_t paramBytes = 0;          // total size of the param block
  uint32_t staticSharedBytes = 0;
  uint32_t localBytesPerThread = 0;  // the entry's own .local frame (callees' frames come on top)
  uint32_t numRegs = 0;              // PTX virtual registers the interpreter keeps per thread
  // Registers per thread a GPU would allocate: an estimate from register liveness
  // (register_estimate.h), what cuFuncGetAttribute(NUM_REGS) and the occupancy calculator use.
  uint32_t allocatedRegs = 16;
  uint32_t maxThreadsPerBlock = 1024;  // .maxntid / .reqntid product, or 1024
  // Thread-block clusters: the shape .reqnctapercluster fixes (0s when the kernel fixes none),
  // whether the kernel must run in a cluster (.explicitcluster or a fixed shape), and the most
  // CTAs .maxclusterrank allows in one (0: no bound of its own).
  uint32_t requiredCluster[3] = {0, 0, 0};
  bool explicitCluster = false;
  uint32_t maxClusterRank = 0;
  // The module's texture and surface references (Module::references() indices) that the kernel
  // and the functions it can call read or write: each must be bound before a launch.
  std::vector<uint32_t> references;
};

// A module-scope `.global .texref name;` or `.global .surfref name;`. tex/suld/sust name it
// instead of a handle register; the instruction then asks the launch's TextureTable for
// textureReferenceHandle(index), which the backend answers with the reference's current binding.
struct TextureReference {
  std::string name;
  bool surface = false;
};

struct GlobalVariable {
  std::string name;
  uint64_t size = 0;
  uint32_t align = 1;
  bool isConst = false;    // declared in .const space
  bool isManaged = false;  // .attribute(.managed): a __managed__ variable, managed memory
};

struct ModuleImage;  // the resolved program; defined in ir.h

class Module {
 public:
  // Parses + validates PTX text. Unsupported instruction -> CUDA_ERROR_NOT_SUPPORTED; syntax error
  // or undefined symbol -> CUDA_ERROR_INVALID_PTX, with a message naming the offending instruction
  // and its line. Never throws, never crashes on bad input.
  static Result<std::unique_ptr<Module>> load(std::string_view ptx);
  ~Module();

  uint32_t targetSm() const;    // from `.target sm_XX`
  uint32_t ptxVersion() const;  // e.g. 90 for `.version 9.0`
  const std::vector<KernelInfo>& kernels() const;
  const KernelInfo* findKernel(std::string_view name) const;
  const std::vector<GlobalVariable>& globals() const;  // .global and .const module-scope variables
  const std::vector<TextureReference>& references() const;  // .texref and .surfref variables

  // The backend allocates device memory for each global (addresses[i] for globals()[i]) and must
  // call this once before any launch; initialImage(i) then gives the bytes to write there
  // (initializers, with the addresses of other globals and functions patched in; zeros where
  // uninitialized).
  void bindGlobals(std::vector<uint64_t> addresses);
  std::vector<uint8_t> initialImage(size_t globalIndex) const;

  // Interpreter-internal view of the resolved program.
  const ModuleImage& image() const { return *image_; }

 private:
  explicit Module(std::unique_ptr<ModuleImage> image);
  std::unique_ptr<ModuleImage> image_;
};

}  // namespace gpupool::ptx
