#include "gpupool/image/cubin_params.h"

#include <algorithm>
#include <string_view>

#include "byte_reader.h"
#include "elf64_view.h"

namespace gpupool::image {
namespace {

using detail::invalidImage;
using detail::readLe;

// .nv.info record formats.
constexpr uint8_t kFormatNval = 0x01;  // no value
constexpr uint8_t kFormatBval = 0x02;  // value in the u16
constexpr uint8_t kFormatHval = 0x03;  // value in the u16
constexpr uint8_t kFormatSval = 0x04;  // u16 = size of the bytes that follow

constexpr std::string_view kInfoPrefix = ".nv.info.";

// Parses the records of one `.nv.info.<kernel>` section into `layout`.
Status readRecords(std::span<const uint8_t> info, KernelParamLayout& layout) {
  uint64_t at = 0;
  while (at < info.size()) {
    const auto format = readLe<uint8_t>(info, at);
    const auto attribute = readLe<uint8_t>(info, at + 1);
    const auto value = readLe<uint16_t>(info, at + 2);
    if (!value) {
      return invalidImage(layout.name + ": truncated .nv.info record");
    }
    at += 4;
    if (*format == kFormatNval || *format == kFormatBval || *format == kFormatHval) {
      if (*attribute == kEiattrCbankParamSize) layout.paramBytes = *value;
      continue;
    }
    if (*format != kFormatSval) {
      return invalidImage(layout.name + ": unknown .nv.info record format " +
                          std::to_string(*format));
    }
    auto data = detail::subspan(info, at, *value);
    if (!data) {
      return invalidImage(layout.name + ": .nv.info record runs past its section");
    }
    at += *value;
    if (*attribute == kEiattrKparamInfo) {
      // {u32 index, u16 ordinal, u16 offset, u32 (log2 align | space | cbank | size << 18)}
      if (data->size() < 12) {
        return invalidImage(layout.name + ": short EIATTR_KPARAM_INFO record");
      }
      KernelParam param;
      param.ordinal = *readLe<uint16_t>(*data, 4);
      param.offset = *readLe<uint16_t>(*data, 6);
      param.size = *readLe<uint32_t>(*data, 8) >> 18;
      layout.params.push_back(param);
    } else if (*attribute == kEiattrParamCbank && data->size() >= 8) {
      // {u32 symbol index of .nv.constant0, u16 offset, u16 size}
      layout.cbankOffset = *readLe<uint16_t>(*data, 4);
    }
  }
  // nvcc writes the records in descending ordinal order; callers want them by ordinal.
  std::sort(layout.params.begin(), layout.params.end(),
            [](const KernelParam& a, const KernelParam& b) { return a.ordinal < b.ordinal; });
  for (size_t i = 0; i < layout.params.size(); ++i) {
    if (layout.params[i].ordinal != i) {
      return invalidImage(layout.name + ": parameter ordinals have a gap or duplicate at " +
                          std::to_string(i));
    }
  }
  return Status::success();
}

}  // namespace

Result<std::vector<KernelParamLayout>> readKernelParams(std::span<const uint8_t> elf) {
  auto sections = detail::elfSections(elf);
  if (!sections) return sections.status();
  std::vector<KernelParamLayout> layouts;
  for (const auto& section : *sections) {
    if (!section.name.starts_with(kInfoPrefix) || section.name.size() == kInfoPrefix.size()) {
      continue;
    }
    KernelParamLayout layout;
    layout.name = std::string(section.name.substr(kInfoPrefix.size()));
    // elfSections() checked that every section's data lies inside `elf`.
    if (Status read = readRecords(*detail::subspan(elf, section.offset, section.size), layout);
        !read.ok()) {
      return read;
    }
    layouts.push_back(std::move(layout));
  }
  return layouts;
}

}  // namespace gpupool::image
