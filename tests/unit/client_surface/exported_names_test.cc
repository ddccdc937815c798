// Checks the shared library built from the surface alone (SURFACE_PROBE_LIBRARY) against the
// names the toolkit's stub libcuda.so exports (STUB_LIBCUDA), and which ABIs the real
// libcuda.so.1 (LIBCUDA_LIBRARY) implements.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "not_supported.h"
#include "proc_address.h"

namespace {

// Name -> type letter (T: a strong definition, W: a weak one) of every symbol
// `nm -D --defined-only` lists for library.
std::map<std::string, char> definedDynamicSymbolTypes(const std::string& library) {
  const std::string command = "nm -D --defined-only '" + library + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::map<std::string, char> types;
  if (!pipe) return types;
  char line[1024];
  while (std::fgets(line, sizeof(line), pipe.get()) != nullptr) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (fields >> address >> type >> name) types[name] = type[0];
  }
  return types;
}

std::set<std::string> definedDynamicSymbols(const std::string& library) {
  std::set<std::string> names;
  for (const auto& [name, type] : definedDynamicSymbolTypes(library)) names.insert(name);
  return names;
}

TEST(ExportedNames, CoverEveryNameOfTheStubLibrary) {
  const auto stub = definedDynamicSymbols(STUB_LIBCUDA);
  const auto ours = definedDynamicSymbols(SURFACE_PROBE_LIBRARY);
  ASSERT_GE(stub.size(), 600u) << "could not list " << STUB_LIBCUDA;
  std::string missing;
  for (const auto& name : stub) {
    if (!ours.contains(name)) missing += name + " ";
  }
  EXPECT_TRUE(missing.empty()) << "missing: " << missing;
}

TEST(ExportedNames, OnlyDriverNamesAreExported) {
  const auto ours = definedDynamicSymbols(SURFACE_PROBE_LIBRARY);
  ASSERT_FALSE(ours.empty());
  for (const auto& name : ours) EXPECT_TRUE(name.starts_with("cu")) << name;
}

TEST(ExportedNames, EveryStubNameResolvesWithDlsym) {
  void* library = dlopen(SURFACE_PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  for (const auto& name : definedDynamicSymbols(STUB_LIBCUDA)) {
    EXPECT_NE(dlsym(library, name.c_str()), nullptr) << name;
  }
  dlclose(library);
}

// No caller reaches a stub of a function that libcuda.so.1 implements under another ABI: every
// symbol cuGetProcAddress hands out from CUDA 3.2 on (64-bit device pointers) is a strong
// definition whenever one of its function's symbols is. Only the 32-bit ABIs stay stubs.
TEST(ExportedNames, EveryCurrentAbiOfAnImplementedFunctionIsImplemented) {
  auto types = definedDynamicSymbolTypes(LIBCUDA_LIBRARY);
  ASSERT_GE(types.size(), 600u) << "could not list " << LIBCUDA_LIBRARY;
  std::set<std::string> implemented;
  for (const auto& entry : gpupool::client::procAddressTable()) {
    if (types[entry.symbol] == 'T') implemented.insert(entry.name);
  }
  ASSERT_GT(implemented.size(), 100u);
  for (const auto& entry : gpupool::client::procAddressTable()) {
    if (entry.version < 3020 || !implemented.contains(entry.name)) continue;
    EXPECT_EQ(types[entry.symbol], 'T')
        << entry.symbol << " (" << entry.name << "@" << entry.version << ") is a stub";
  }
}

TEST(NotSupported, ReportsOncePerNameAndReturnsNotSupported) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(gpupool::client::reportNotSupported("cuTestOnlyName"), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(gpupool::client::reportNotSupported("cuTestOnlyName"), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(gpupool::client::reportNotSupported("cuOtherTestOnlyName"), CUDA_ERROR_NOT_SUPPORTED);
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string line =
      "gpupool: cuTestOnlyName is not supported (returning CUDA_ERROR_NOT_SUPPORTED)\n";
  const auto first = log.find(line);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << log;
  EXPECT_NE(log.find("cuOtherTestOnlyName"), std::string::npos) << log;
}

TEST(NotSupported, GeneratedStubsReport) {
  ::testing::internal::CaptureStderr();
  CUdeviceptr pointer = 0;
  EXPECT_EQ(cuMemAllocManaged(&pointer, 16, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_NOT_SUPPORTED);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("gpupool: cuMemAllocManaged is not supported"), std::string::npos) << log;
}

}  // namespace
