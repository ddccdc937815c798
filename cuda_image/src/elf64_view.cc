#include "elf64_view.h"

#include <elf.h>

#include <algorithm>

#include "byte_reader.h"

namespace gpupool::image::detail {
namespace {

Result<Elf64_Ehdr> readHeader(std::span<const uint8_t> bytes) {
  auto header = readLe<Elf64_Ehdr>(bytes, 0);
  if (!header) {
    return invalidImage("ELF image shorter than its 64-byte header");
  }
  if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0) {
    return invalidImage("not an ELF image");
  }
  if (header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_ident[EI_DATA] != ELFDATA2LSB) {
    return invalidImage("ELF image is not little-endian ELF64 (cubins always are)");
  }
  if (header->e_shnum != 0 && header->e_shentsize != sizeof(Elf64_Shdr)) {
    return invalidImage("ELF section header size is not 64");
  }
  if (header->e_phnum != 0 && header->e_phentsize != sizeof(Elf64_Phdr)) {
    return invalidImage("ELF program header size is not 56");
  }
  if (header->e_shnum == 0 && header->e_shoff != 0) {
    // Extended numbering keeps the count in section 0; cubins never need that many sections.
    return invalidImage("ELF extended section numbering is not supported");
  }
  return *header;
}

// End of a table of `count` entries of `entrySize` at `offset`; offsets are 64-bit and come
// from the image, so guard the arithmetic against overflow.
std::optional<uint64_t> tableEnd(uint64_t offset, uint64_t count, uint64_t entrySize) {
  if (count == 0) return 0;
  const uint64_t size = count * entrySize;  // both are u16 values: no overflow
  if (offset > UINT64_MAX - size) return std::nullopt;
  return offset + size;
}

}  // namespace

Result<uint64_t> elfHeaderTablesEnd(std::span<const uint8_t> header) {
  auto ehdr = readHeader(header);
  if (!ehdr) return ehdr.status();
  auto sections = tableEnd(ehdr->e_shoff, ehdr->e_shnum, sizeof(Elf64_Shdr));
  auto segments = tableEnd(ehdr->e_phoff, ehdr->e_phnum, sizeof(Elf64_Phdr));
  if (!sections || !segments) {
    return invalidImage("ELF header table offsets overflow");
  }
  return std::max<uint64_t>({sizeof(Elf64_Ehdr), *sections, *segments});
}

Result<uint64_t> elfDeclaredEnd(std::span<const uint8_t> tables) {
  auto tablesEnd = elfHeaderTablesEnd(tables);
  if (!tablesEnd) return tablesEnd.status();
  if (*tablesEnd > tables.size()) {
    return invalidImage("ELF header tables extend past the end of the image");
  }
  const auto ehdr = *readLe<Elf64_Ehdr>(tables, 0);
  uint64_t end = *tablesEnd;
  for (uint32_t i = 0; i < ehdr.e_shnum; ++i) {
    const auto shdr = *readLe<Elf64_Shdr>(tables, ehdr.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr));
    if (shdr.sh_type == SHT_NOBITS) continue;
    if (shdr.sh_offset > UINT64_MAX - shdr.sh_size) {
      return invalidImage("ELF section " + std::to_string(i) + " extent overflows");
    }
    end = std::max(end, shdr.sh_offset + shdr.sh_size);
  }
  for (uint32_t i = 0; i < ehdr.e_phnum; ++i) {
    const auto phdr = *readLe<Elf64_Phdr>(tables, ehdr.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr));
    if (phdr.p_offset > UINT64_MAX - phdr.p_filesz) {
      return invalidImage("ELF segment " + std::to_string(i) + " extent overflows");
    }
    end = std::max(end, phdr.p_offset + phdr.p_filesz);
  }
  return end;
}

Result<uint64_t> elfContentEnd(std::span<const uint8_t> bytes) {
  auto end = elfDeclaredEnd(bytes);
  if (!end) return end.status();
  if (*end > bytes.size()) {
    return invalidImage("ELF sections or segments extend past the end of the image (" +
                        std::to_string(*end) + " > " + std::to_string(bytes.size()) + " bytes)");
  }
  return end;
}

Result<std::vector<ElfSection>> elfSections(std::span<const uint8_t> bytes) {
  if (auto end = elfContentEnd(bytes); !end) return end.status();
  const auto ehdr = *readLe<Elf64_Ehdr>(bytes, 0);
  std::vector<ElfSection> sections;
  sections.reserve(ehdr.e_shnum);
  std::span<const uint8_t> names;
  if (ehdr.e_shstrndx != SHN_UNDEF) {
    if (ehdr.e_shstrndx >= ehdr.e_shnum) {
      return invalidImage("ELF section-name table index out of range");
    }
    const auto strtab =
        *readLe<Elf64_Shdr>(bytes, ehdr.e_shoff + uint64_t{ehdr.e_shstrndx} * sizeof(Elf64_Shdr));
    if (strtab.sh_type == SHT_NOBITS) {
      return invalidImage("ELF section-name table has no data");
    }
    names = *subspan(bytes, strtab.sh_offset, strtab.sh_size);  // checked by elfContentEnd
  }
  for (uint32_t i = 0; i < ehdr.e_shnum; ++i) {
    const auto shdr = *readLe<Elf64_Shdr>(bytes, ehdr.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr));
    ElfSection section;
    section.type = shdr.sh_type;
    section.offset = shdr.sh_offset;
    section.size = shdr.sh_type == SHT_NOBITS ? 0 : shdr.sh_size;
    section.link = shdr.sh_link;
    section.info = shdr.sh_info;
    if (!names.empty()) {
      if (shdr.sh_name >= names.size()) {
        return invalidImage("ELF section " + std::to_string(i) + " name is outside the name table");
      }
      const auto* start = reinterpret_cast<const char*>(names.data()) + shdr.sh_name;
      const size_t room = names.size() - shdr.sh_name;
      // A name without a terminating NUL inside the table is malformed.
      const size_t length = strnlen(start, room);
      if (length == room) {
        return invalidImage("ELF section " + std::to_string(i) + " name is not terminated");
      }
      section.name = std::string_view(start, length);
    }
    sections.push_back(section);
  }
  return sections;
}

}  // namespace gpupool::image::detail
