// cuGetExportTable, the driver's private tables. The ones cudart cannot start without must be
// there; they answer with a table, and an unknown id is an error with no table.
// For the tables NVIDIA's own libraries ask for (seen on an H200: cuBLAS's tensor-core GEMM,
// cuBLAS and cuDNN under PyTorch, cuFFT), it prints `export_table.<id>=present|missing`: the GPU
// check compares those lines between NVIDIA's driver and the pool, so a table the real driver has
// and ours lacks fails there. It also prints each present table's first slot, a size in bytes
// where the table has one, for whoever implements it.
#include <cuda.h>

#include <cstdint>
#include <cstdio>

#include "driver_check.h"

namespace {

struct TableId {
  const char* name;
  unsigned char bytes[16];
};

// The bytes as the GUID string spells them ({6BD5FB6C-5BF4-E74A-...} is 6b d5 fb 6c 5b f4 e7 4a).
constexpr TableId kNeededByCudart[] = {
    {"6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9 (CUDART_INTERFACE)",
     {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d,
      0xf9}},
    {"A094798C-2E74-2E74-93F2-0800200C0A66 (TOOLS_RUNTIME_CALLBACK_HOOKS)",
     {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a,
      0x66}},
    {"42D85A81-23F6-CB47-8298-F6E78A3AECDC (TOOLS_TLS)",
     {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec,
      0xdc}},
    {"C693336E-1121-DF11-A8C3-68F355D89593 (CONTEXT_LOCAL_STORAGE)",
     {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95,
      0x93}},
    {"263E8860-7CD2-6143-92F6-BBD5006DFA7E (CONTEXT_CHECKS)",
     {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa,
      0x7e}},
    {"D4082055-BDE6-704B-8D34-BA123C66E1F2 (INTEGRITY_CHECK)",
     {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1,
      0xf2}},
};

constexpr TableId kAskedForByLibraries[] = {
    {"21318C60-9714-3248-8CA6-41FF7324C8F2",
     {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8,
      0xf2}},
    {"1734DC26-800D-4745-8726-C0F1E7DD8BCA",
     {0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b,
      0xca}},
    {"69A28E9F-2449-8B47-B030-C5DA330EA4E9",
     {0x69, 0xa2, 0x8e, 0x9f, 0x24, 0x49, 0x8b, 0x47, 0xb0, 0x30, 0xc5, 0xda, 0x33, 0x0e, 0xa4,
      0xe9}},
    {"6E163FBE-B958-444D-835C-E182AFF1991E",
     {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99,
      0x1e}},
};

CUuuid uuidOf(const TableId& id) {
  CUuuid uuid;
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(id.bytes[i]);
  return uuid;
}

}  // namespace

int main() {
  CHECK_CU(cuInit(0));

  for (const TableId& id : kNeededByCudart) {
    const CUuuid uuid = uuidOf(id);
    const void* table = nullptr;
    CHECK_CU(cuGetExportTable(&table, &uuid));
    CHECK(table != nullptr, "cuGetExportTable(%s) answered no table", id.name);
  }
  std::printf("the six tables cudart needs are there\n");

  const CUuuid unknown = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
  const void* none = &unknown;
  // Which error is not known for NVIDIA's driver (ours and ZLUDA's: CUDA_ERROR_INVALID_VALUE).
  const CUresult refused = cuGetExportTable(&none, &unknown);
  CHECK(refused != CUDA_SUCCESS && none == nullptr,
        "cuGetExportTable(an unknown id) returned %s and %s table", cuErrorName(refused),
        none == nullptr ? "no" : "a");
  std::printf("an unknown id is refused\n");

  for (const TableId& id : kAskedForByLibraries) {
    const CUuuid uuid = uuidOf(id);
    const void* table = nullptr;
    const CUresult status = cuGetExportTable(&table, &uuid);
    const bool present = status == CUDA_SUCCESS && table != nullptr;
    std::printf("export_table.%s=%s\n", id.name, present ? "present" : "missing");
    if (present) {
      std::printf("  its first slot: %#llx\n",
                  static_cast<unsigned long long>(*static_cast<const uintptr_t*>(table)));
    }
  }
  std::printf("PASS\n");
  return 0;
}
