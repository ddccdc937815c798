// nvmlInternalGetExportTable: the private entry point NVIDIA's nvidia-smi looks up right after
// nvmlInitWithFlags; without it nvidia-smi exits with "Mismatch in versions between nvidia-smi and
// NVML". Like cuGetExportTable, it returns a table of entry points for a 16-byte id. nvidia-smi
// 535 asks for one, {6C3EFEC4-8FC9-4E6C-A327-EE696E12F7C4}: its first word is its size in bytes,
// the others entry points, slot N at word N. No slot is documented, so every slot returns
// NVML_ERROR_NOT_SUPPORTED, logged with its number under GPU_POOL_LOG=1; nvidia-smi's table,
// -L, --query-gpu, -q and topo -m on one GPU need none of them (docs/nvml.md, "NVIDIA's
// nvidia-smi"). Slot 81, which NVIDIA's mock NVML for Kubernetes tests answers as a device lookup
// by index, is refused too: nvidia-smi 535 printed the same with it answered that way and refused.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "client/client_log.h"
#include "client/nvml/nvml_not_supported.h"

namespace {

constexpr unsigned char kSmiTableId[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                           0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
constexpr size_t kSlots = 256;  // word 0 (the size) and slots 1..255

nvmlReturn_t refuseSlot(size_t slot) {
  // reportNotSupported logs each name once and keeps a pointer to it.
  static const std::array<std::string, kSlots> names = [] {
    std::array<std::string, kSlots> made;
    for (size_t i = 0; i < kSlots; ++i) {
      made[i] = "nvmlInternalGetExportTable slot " + std::to_string(i) + " (undocumented)";
    }
    return made;
  }();
  return gpupool::nvml::reportNotSupported(names[slot].c_str());
}

// One entry point per slot, so that the log says which slot a call came through; none reads its
// arguments, whose number is unknown.
template <size_t Slot>
nvmlReturn_t slotEntry() {
  return refuseSlot(Slot);
}

template <size_t... Slots>
std::array<const void*, kSlots> makeTable(std::index_sequence<Slots...>) {
  return {(Slots == 0 ? reinterpret_cast<const void*>(kSlots * sizeof(void*))
                      : reinterpret_cast<const void*>(&slotEntry<Slots>))...};
}

const std::array<const void*, kSlots>& smiTable() {
  static const std::array<const void*, kSlots> table =
      makeTable(std::make_index_sequence<kSlots>());
  return table;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInternalGetExportTable(
    const void** table, const unsigned char* id) {
  if (!table || !id) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::memcmp(id, kSmiTableId, sizeof(kSmiTableId)) == 0) {
    *table = smiTable().data();
    return NVML_SUCCESS;
  }
  if (gpupool::client::logLevel() >= 1) {
    char text[40];
    for (size_t i = 0; i < 16; ++i) std::snprintf(text + 2 * i, 3, "%02x", id[i]);
    gpupool::client::logLine(std::string("nvmlInternalGetExportTable: no table for id ") + text +
                             " (bytes in memory order); returning NVML_ERROR_NOT_SUPPORTED");
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

}  // extern "C"
