#include "gpupool/image/ptx_selection.h"

#include <algorithm>

#include "gpupool/image/image_kind.h"

namespace gpupool::image {

PtxSelection selectPtx(const Fatbin& fatbin, int deviceCapability) {
  PtxSelection selection;
  for (const auto& entry : fatbin.entries()) {
    if (!entry.isPtx() || static_cast<int64_t>(entry.arch) > deviceCapability) continue;
    if (selection.entry == nullptr || entry.arch > selection.entry->arch) selection.entry = &entry;
  }
  if (selection.entry != nullptr) {
    selection.status = CUDA_SUCCESS;
    return selection;
  }
  const bool hasPtx = std::any_of(fatbin.entries().begin(), fatbin.entries().end(),
                                  [](const FatbinEntry& e) { return e.isPtx(); });
  selection.message = std::string(hasPtx ? "image has PTX only for newer architectures than "
                                         : "image has no PTX to JIT for ") +
                      "compute_" + std::to_string(deviceCapability) +
                      "; it contains: " + fatbin.describeArchs();
  return selection;
}

PtxText ptxForDevice(std::span<const uint8_t> bytes, int deviceCapability) {
  PtxText result;
  switch (classify(bytes)) {
    case ImageKind::kPtx: {
      const auto nul = std::find(bytes.begin(), bytes.end(), uint8_t{0});
      if (nul == bytes.end()) {
        result.status = CUDA_ERROR_INVALID_PTX;
        result.message = "PTX text is not NUL-terminated";
        return result;
      }
      result.ptx.assign(bytes.begin(), nul);
      result.status = CUDA_SUCCESS;
      return result;
    }
    case ImageKind::kFatbin: {
      std::string error;
      auto fatbin = Fatbin::parse(bytes, &error);
      if (!fatbin) {
        result.message = "malformed fatbin: " + error;
        return result;
      }
      const PtxSelection selection = selectPtx(*fatbin, deviceCapability);
      if (selection.status != CUDA_SUCCESS) {
        result.status = selection.status;
        result.message = selection.message;
        return result;
      }
      auto text = fatbin->payload(*selection.entry, &error);
      if (!text) {
        result.message = selection.entry->archName() + " PTX is corrupt: " + error;
        return result;
      }
      result.ptx.assign(text->begin(), text->end());
      result.arch = selection.entry->arch;
      result.status = CUDA_SUCCESS;
      return result;
    }
    case ImageKind::kElf:
      result.status = CUDA_ERROR_NO_BINARY_FOR_GPU;
      result.message = "image is an ELF cubin (SASS only); no PTX to JIT";
      return result;
    case ImageKind::kFatbinWrapper:
      result.message = "fatbin wrapper received; the client must ship the fatbin it points to";
      return result;
    case ImageKind::kUnknown:
      break;
  }
  result.message = "not a CUDA module image (no fatbin, ELF or PTX signature)";
  return result;
}

}  // namespace gpupool::image
