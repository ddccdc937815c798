#include "integrity_check.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>

#include "export_tables.h"
#include "fake_driver.h"
#include "hmac_md2_expected.h"

namespace {

using namespace gpupool::client;

CUuuid uuidFrom(std::uint8_t first) {
  CUuuid uuid;
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(first + i);
  return uuid;
}

// The same input hmac_md2_reference.py serializes with struct.pack.
IntegrityHeader referenceHeader() {
  return {13000,
          13002,
          4242,
          0xDEADBEEF,
          reinterpret_cast<const void*>(0x1111222233334444ULL),
          reinterpret_cast<const void*>(0x5555666677778888ULL),
          reinterpret_cast<const void*>(0x99990000AAAABBBBULL),
          1700000000};
}
std::vector<IntegrityDeviceRecord> referenceDevices() {
  return {{uuidFrom(0), 0, 0x41, 0}, {uuidFrom(16), 1, 0x82, 3}};
}

template <typename T>
T readAt(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

TEST(IntegrityMessage, LayoutIs48ByteHeaderThen28BytesPerDevice) {
  const auto message = integrityMessage(referenceHeader(), referenceDevices());
  ASSERT_EQ(message.size(), 48u + 2 * 28u);
  EXPECT_EQ(readAt<std::uint32_t>(message, 0), 13000u);
  EXPECT_EQ(readAt<std::uint32_t>(message, 4), 13002u);
  EXPECT_EQ(readAt<std::uint32_t>(message, 8), 4242u);
  EXPECT_EQ(readAt<std::uint32_t>(message, 12), 0xDEADBEEFu);
  EXPECT_EQ(readAt<std::uint64_t>(message, 16), 0x1111222233334444ULL);
  EXPECT_EQ(readAt<std::uint64_t>(message, 24), 0x5555666677778888ULL);
  EXPECT_EQ(readAt<std::uint64_t>(message, 32), 0x99990000AAAABBBBULL);
  EXPECT_EQ(readAt<std::uint64_t>(message, 40), 1700000000u);
  EXPECT_EQ(message[48], 0);                                // first UUID byte of device 0
  EXPECT_EQ(readAt<std::int32_t>(message, 48 + 20), 0x41);  // device 0 PCI bus
  EXPECT_EQ(message[76], 16);                               // first UUID byte of device 1
  EXPECT_EQ(readAt<std::int32_t>(message, 76 + 16), 1);     // device 1 PCI domain
  EXPECT_EQ(readAt<std::int32_t>(message, 76 + 24), 3);     // device 1 PCI device
}

TEST(IntegrityMessage, MatchesIndependentSerialization) {
  const auto message = integrityMessage(referenceHeader(), referenceDevices());
  ASSERT_EQ(message.size(), sizeof(reference::kIntegrityMessage));
  EXPECT_EQ(0, std::memcmp(message.data(), reference::kIntegrityMessage, message.size()));
}

TEST(IntegrityHash, MatchesIndependentHmacMd2) {
  const auto words = integrityHash(reference::kIntegrityMessage);
  EXPECT_EQ(words[0], reference::kIntegrityHash[0]);
  EXPECT_EQ(words[1], reference::kIntegrityHash[1]);
}

TEST(IntegrityCheck, Versions0And1ReturnTheFixedAnswers) {
  std::uint64_t out[2] = {};
  ASSERT_EQ(integrityCheck(13000, 1700000000, out), CUDA_SUCCESS);
  EXPECT_EQ(out[0], 0x3341181C03CB675CULL);
  EXPECT_EQ(out[1], 0x8ED383AA1F4CD1E8ULL);
  ASSERT_EQ(integrityCheck(13001, 1700000000, out), CUDA_SUCCESS);
  EXPECT_EQ(out[0], 0x1841181C03CB675CULL);
  EXPECT_EQ(out[1], 0x8ED383AA1F4CD1E8ULL);
}

class IntegrityCheckHash : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_driver::state() = {};
    fake_driver::state().driverVersion = 13000;
    fake_driver::state().devices = {{uuidFrom(0x40), 0, 0x17, 0}, {uuidFrom(0x80), 2, 0xc1, 5}};
  }

  // What cudart computes on its side for the state the fakes report.
  std::array<std::uint64_t, 2> expected(std::uint32_t version, std::uint64_t seconds) {
    std::vector<IntegrityDeviceRecord> devices;
    for (const auto& d : fake_driver::state().devices) {
      devices.push_back({d.uuid, d.pciDomain, d.pciBus, d.pciDevice});
    }
    const IntegrityHeader header{static_cast<std::uint32_t>(fake_driver::state().driverVersion),
                                 version,
                                 static_cast<std::uint32_t>(getpid()),
                                 static_cast<std::uint32_t>(pthread_self()),
                                 findExportTable(kCudartInterfaceId),
                                 integrityCheckTable(),
                                 integrityCheckTable()[1],
                                 seconds};
    return integrityHash(integrityMessage(header, devices));
  }
};

TEST_F(IntegrityCheckHash, Version2HashesProcessTablesAndDevices) {
  // Called the way cudart calls it: slot 1 of the table cuGetExportTable hands out.
  const void* table = nullptr;
  CUuuid id;
  std::memcpy(id.bytes, kIntegrityCheckId.data(), 16);
  ASSERT_EQ(cuGetExportTable(&table, &id), CUDA_SUCCESS);
  ASSERT_EQ(table, integrityCheckTable());
  using Slot1 = CUresult (*)(std::uint32_t, std::uint64_t, std::uint64_t*);
  const auto slot1 = reinterpret_cast<Slot1>(static_cast<const void* const*>(table)[1]);

  std::uint64_t out[2] = {};
  ASSERT_EQ(slot1(13002, 1712345678, out), CUDA_SUCCESS);
  const auto want = expected(13002, 1712345678);
  EXPECT_EQ(out[0], want[0]);
  EXPECT_EQ(out[1], want[1]);
}

TEST_F(IntegrityCheckHash, DependsOnDeviceFacts) {
  std::uint64_t before[2], after[2];
  ASSERT_EQ(integrityCheck(13002, 1, before), CUDA_SUCCESS);
  fake_driver::state().devices[1].pciBus ^= 1;
  ASSERT_EQ(integrityCheck(13002, 1, after), CUDA_SUCCESS);
  EXPECT_TRUE(before[0] != after[0] || before[1] != after[1]);
  const auto want = expected(13002, 1);
  EXPECT_EQ(after[0], want[0]);
  EXPECT_EQ(after[1], want[1]);
}

TEST_F(IntegrityCheckHash, PropagatesDriverErrors) {
  fake_driver::state().deviceGetCountResult = CUDA_ERROR_NOT_INITIALIZED;
  std::uint64_t out[2] = {};
  EXPECT_EQ(integrityCheck(13002, 1, out), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(integrityCheck(13002, 1, nullptr), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
