#include <cstring>

#include "fast_steps.h"
#include "ir.h"
#include "ptx_launch.h"
#include "ptx_module.h"

namespace gpupool::ptx {

Module::Module(std::unique_ptr<ModuleImage> image) : image_(std::move(image)) {}
Module::~Module() = default;

Result<std::unique_ptr<Module>> Module::load(std::string_view ptx) {
  auto image = std::make_unique<ModuleImage>();
  if (Status built = buildModuleImage(ptx, image.get()); !built.ok()) return built;
  image->fastSteps.reserve(image->code.size());
  for (const Instr& in : image->code) image->fastSteps.push_back(execution::chooseFastStep(in));
  return std::unique_ptr<Module>(new Module(std::move(image)));
}

uint32_t Module::targetSm() const { return image_->targetSm; }
uint32_t Module::ptxVersion() const { return image_->ptxVersion; }
const std::vector<KernelInfo>& Module::kernels() const { return image_->kernels; }

const KernelInfo* Module::findKernel(std::string_view name) const {
  for (const auto& k : image_->kernels)
    if (k.name == name) return &k;
  return nullptr;
}

const std::vector<GlobalVariable>& Module::globals() const { return image_->globalList; }
const std::vector<TextureReference>& Module::references() const { return image_->references; }

void Module::bindGlobals(std::vector<uint64_t> addresses) {
  addresses.resize(image_->globals.size(), 0);
  image_->globalAddresses = std::move(addresses);
  image_->bound = true;
}

std::vector<uint8_t> Module::initialImage(size_t globalIndex) const {
  if (globalIndex >= image_->globals.size()) return {};
  const GlobalImage& g = image_->globals[globalIndex];
  std::vector<uint8_t> bytes = g.bytes;
  for (const Relocation& r : g.relocations) {
    uint64_t value = r.addend;
    if (r.target == SymbolKind::kFunction)
      value += kFunctionWindow + uint64_t{r.index} * 16;
    else if (image_->bound && r.index < image_->globalAddresses.size())
      value += image_->globalAddresses[r.index];
    std::memcpy(bytes.data() + r.offset, &value, r.size);
  }
  return bytes;
}

}  // namespace gpupool::ptx
