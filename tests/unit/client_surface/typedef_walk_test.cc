// Walks every PFN_cuX_vNNNN[_ptds|_ptsz] typedef of the toolkit's cudaTypedefs.h and
// cudaProfilerTypedefs.h (read here, independently of the generator) and checks that
// cuGetProcAddress hands out, for exactly that name, version and stream class, an exported
// symbol of that function that dlsym finds.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "proc_address.h"

namespace {

using gpupool::client::lookupProcAddress;

struct Pfn {
  std::string typedefName;      // PFN_cuMemAlloc_v3020
  std::string name;             // cuMemAlloc
  int version = 0;              // 3020
  std::string perThreadSuffix;  // "", "_ptds" or "_ptsz"
};

// Every PFN typedef of a header, whatever #if surrounds it (the legacy ABIs under
// __CUDA_API_VERSION_INTERNAL are exported too).
std::vector<Pfn> pfnTypedefs(const std::string& header) {
  std::ifstream in(std::string(CUDA_INCLUDE_DIR) + "/" + header);
  std::stringstream text;
  text << in.rdbuf();
  static const std::regex kTypedef(
      R"(typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*(PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?)\s*\))");
  std::vector<Pfn> found;
  const std::string source = text.str();
  for (std::sregex_iterator it(source.begin(), source.end(), kTypedef), end; it != end; ++it) {
    found.push_back({(*it)[1], (*it)[2], std::stoi((*it)[3]), (*it)[4]});
  }
  return found;
}

TEST(CudaTypedefs, EveryVersionedEntryPointResolves) {
  std::vector<Pfn> pfns = pfnTypedefs("cudaTypedefs.h");
  const std::vector<Pfn> profiler = pfnTypedefs("cudaProfilerTypedefs.h");
  ASSERT_GT(pfns.size(), 600u) << "could not read " << CUDA_INCLUDE_DIR << "/cudaTypedefs.h";
  ASSERT_EQ(profiler.size(), 3u);
  pfns.insert(pfns.end(), profiler.begin(), profiler.end());

  for (const Pfn& pfn : pfns) {
    SCOPED_TRACE(pfn.typedefName);
    const bool perThread = !pfn.perThreadSuffix.empty();
    const cuuint64_t flags = perThread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                       : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    void* function = nullptr;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    ASSERT_EQ(cuGetProcAddress_v2(pfn.name.c_str(), &function, pfn.version, flags, &status),
              CUDA_SUCCESS);
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
    const auto found = lookupProcAddress(pfn.name, pfn.version, flags);
    ASSERT_NE(found.entry, nullptr);
    const std::string symbol = found.entry->symbol;
    EXPECT_EQ(function, dlsym(RTLD_DEFAULT, symbol.c_str())) << symbol;
    EXPECT_TRUE(symbol.starts_with(pfn.name)) << symbol;
    if (perThread) {
      // The per-thread ABI of whichever version the request selects.
      EXPECT_LE(found.entry->version, pfn.version);
      EXPECT_TRUE(symbol.ends_with(pfn.perThreadSuffix)) << symbol;
    } else {
      // Each legacy typedef announces an ABI at exactly its version.
      EXPECT_EQ(found.entry->version, pfn.version) << symbol;
    }
  }
}

}  // namespace
