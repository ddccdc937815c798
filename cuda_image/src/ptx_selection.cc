#include "gpupool/image/ptx_selection.h"

#include <algorithm>

#include "gpupool/image/image_kind.h"

namespace gpupool::image {

Result<const FatbinEntry*> selectPtx(const Fatbin& fatbin, int deviceCapability) {
  const FatbinEntry* best = nullptr;
  for (const auto& entry : fatbin.entries()) {
    if (!entry.isPtx() || static_cast<int64_t>(entry.arch) > deviceCapability) continue;
    if (best == nullptr || entry.arch > best->arch) best = &entry;
  }
  if (best != nullptr) return best;
  const bool hasPtx = std::any_of(fatbin.entries().begin(), fatbin.entries().end(),
                                  [](const FatbinEntry& e) { return e.isPtx(); });
  return Status::error(CUDA_ERROR_NO_BINARY_FOR_GPU,
                       std::string(hasPtx ? "image has PTX only for newer architectures than "
                                          : "image has no PTX to JIT for ") +
                           "compute_" + std::to_string(deviceCapability) +
                           "; it contains: " + fatbin.describeArchs());
}

Result<PtxText> ptxForDevice(std::span<const uint8_t> bytes, int deviceCapability) {
  switch (classify(bytes)) {
    case ImageKind::kPtx: {
      const auto nul = std::find(bytes.begin(), bytes.end(), uint8_t{0});
      if (nul == bytes.end()) {
        return Status::error(CUDA_ERROR_INVALID_PTX, "PTX text is not NUL-terminated");
      }
      return PtxText{std::string(bytes.begin(), nul), 0};
    }
    case ImageKind::kFatbin: {
      auto fatbin = Fatbin::parse(bytes);
      if (!fatbin) {
        return Status::error(CUDA_ERROR_INVALID_IMAGE,
                             "malformed fatbin: " + fatbin.status().message);
      }
      auto selected = selectPtx(*fatbin, deviceCapability);
      if (!selected) return selected.status();
      const FatbinEntry& entry = **selected;
      auto text = fatbin->payload(entry);
      if (!text) {
        return Status::error(CUDA_ERROR_INVALID_IMAGE,
                             entry.archName() + " PTX is corrupt: " + text.status().message);
      }
      return PtxText{std::string(text->begin(), text->end()), entry.arch};
    }
    case ImageKind::kElf:
      return Status::error(CUDA_ERROR_NO_BINARY_FOR_GPU,
                           "image is an ELF cubin (SASS only); no PTX to JIT");
    case ImageKind::kFatbinWrapper:
      return Status::error(CUDA_ERROR_INVALID_IMAGE,
                           "fatbin wrapper received; the client must ship the fatbin it points to");
    case ImageKind::kUnknown:
      break;
  }
  return Status::error(CUDA_ERROR_INVALID_IMAGE,
                       "not a CUDA module image (no fatbin, ELF or PTX signature)");
}

}  // namespace gpupool::image
