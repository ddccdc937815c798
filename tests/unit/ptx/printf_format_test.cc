#include "printf_format.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <vector>

namespace gpupool::ptx {
namespace {

// Packs arguments the way nvcc lays out vprintf's buffer: natural alignment.
class ArgBuffer {
 public:
  template <class T>
  ArgBuffer& add(T v) {
    size_t off = (bytes_.size() + sizeof(T) - 1) / sizeof(T) * sizeof(T);
    bytes_.resize(off + sizeof(T));
    std::memcpy(bytes_.data() + off, &v, sizeof(T));
    return *this;
  }
  PrintfArguments arguments(std::map<uint64_t, std::string> strings = {}) const {
    PrintfArguments a;
    a.read = [this](uint64_t off, void* out, uint64_t len) {
      if (off + len > bytes_.size()) return false;
      std::memcpy(out, bytes_.data() + off, len);
      return true;
    };
    a.readString = [strings](uint64_t addr, std::string* out) {
      auto it = strings.find(addr);
      if (it == strings.end()) return false;
      *out = it->second;
      return true;
    };
    return a;
  }

 private:
  std::vector<uint8_t> bytes_;
};

TEST(PrintfFormat, IntegersUseFourByteSlotsAndLongLongEight) {
  ArgBuffer b;
  b.add<int32_t>(-5).add<int64_t>(1ll << 40).add<uint32_t>(255).add<int32_t>('z');
  EXPECT_EQ(formatDevicePrintf("%d %lld %x %c", b.arguments()), "-5 1099511627776 ff z");
}

TEST(PrintfFormat, FlagsWidthPrecisionAndStrings) {
  ArgBuffer b;
  b.add<double>(3.14159)
      .add<int32_t>(42)
      .add<uint64_t>(0x1000)
      .add<double>(1e-5)
      .add<int32_t>(7)
      .add<uint64_t>(0);
  EXPECT_EQ(formatDevicePrintf("[%8.3f] [%-5d] [%s] [%g] [%+04d] [%s] 100%%",
                               b.arguments({{0x1000, "dev"}})),
            "[   3.142] [42   ] [dev] [1e-05] [+007] [(null)] 100%");
}

TEST(PrintfFormat, StarWidthAndPointer) {
  ArgBuffer b;
  b.add<int32_t>(6).add<int32_t>(12).add<uint64_t>(0xdeadbeef);
  EXPECT_EQ(formatDevicePrintf("[%*d] %p", b.arguments()), "[    12] 0xdeadbeef");
}

TEST(PrintfFormat, MissingArgumentsReadAsZero) {
  ArgBuffer b;
  EXPECT_EQ(formatDevicePrintf("%d %u %s", b.arguments()), "0 0 (null)");
}

}  // namespace
}  // namespace gpupool::ptx
