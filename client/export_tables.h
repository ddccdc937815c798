// cuGetExportTable: the private ("dark API") tables cudart and cuBLAS require, all served
// locally (see docs: driver-interposition.md §4).
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>

namespace gpupool::client {

// A table id: the 16 bytes exactly as they appear in the GUID string.
using ExportTableId = std::array<std::uint8_t, 16>;

// {6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}, 13 slots.
inline constexpr ExportTableId kCudartInterfaceId = {
    0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
// {A094798C-2E74-2E74-93F2-0800200C0A66}, 7 slots.
inline constexpr ExportTableId kToolsRuntimeCallbackHooksId = {
    0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66};
// {42D85A81-23F6-CB47-8298-F6E78A3AECDC}, 4 slots.
inline constexpr ExportTableId kToolsTlsId = {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                              0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc};
// {C693336E-1121-DF11-A8C3-68F355D89593}, 4 function slots, no size slot.
inline constexpr ExportTableId kContextLocalStorageId = {
    0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};
// {263E8860-7CD2-6143-92F6-BBD5006DFA7E}, 4 slots.
inline constexpr ExportTableId kContextChecksId = {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
                                                   0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e};
// {D4082055-BDE6-704B-8D34-BA123C66E1F2}, 3 slots.
inline constexpr ExportTableId kIntegrityCheckId = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                                    0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
// {21318C60-9714-3248-8CA6-41FF7324C8F2}, 95 slots (needed by cuBLAS).
inline constexpr ExportTableId kToolsContextId = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                                  0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
// {F8CFF951-2146-8B4E-B9E2-FB469E7C0DD9}: deliberately refused (cudart works without it).
inline constexpr ExportTableId kRefusedF8cff951Id = {
    0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};

// The table served for id, or nullptr for refused and unknown ids. Slot 0 of every table but
// CONTEXT_LOCAL_STORAGE holds the table size in bytes. Tables live for the whole process.
const void* const* findExportTable(const ExportTableId& id);

}  // namespace gpupool::client

// cuGetExportTable (declared by cuda.h) is defined in export_tables.cc: *ppExportTable = the
// table and CUDA_SUCCESS; for refused and unknown ids *ppExportTable = NULL and
// CUDA_ERROR_INVALID_VALUE (each unknown id is logged once to stderr).
