// The INTEGRITY_CHECK export table: cudart's check that the driver is genuine. Slot 1 returns
// fixed constants for version % 10 == 0 or 1, and otherwise an HMAC-MD2 over process, table and
// device facts that cudart recomputes and verifies (driver-interposition.md §5, §5.1).
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace gpupool::client {

// The 48-byte message header, in message order.
struct IntegrityHeader {
  std::uint32_t driverVersion;  // what cuDriverGetVersion reports
  std::uint32_t version;        // slot 1's version argument
  std::uint32_t processId;
  std::uint32_t threadId;  // (uint32_t)pthread_self()
  const void* cudartInterfaceTable;
  const void* integrityCheckTable;
  const void* integrityCheckFunction;  // slot 1 of the INTEGRITY_CHECK table
  std::uint64_t unixSeconds;
};

// One 28-byte record per device, in cuDeviceGetCount order.
struct IntegrityDeviceRecord {
  CUuuid uuid;
  std::int32_t pciDomainId;
  std::int32_t pciBusId;
  std::int32_t pciDeviceId;
};

// Serializes header (48 bytes, native endianness) followed by one 28-byte record per device.
std::vector<std::uint8_t> integrityMessage(const IntegrityHeader& header,
                                           std::span<const IntegrityDeviceRecord> devices);

// HMAC-MD2 of message with the integrity key, as two native-endian u64.
std::array<std::uint64_t, 2> integrityHash(std::span<const std::uint8_t> message);

// Slot 1: (version, unixSeconds, out[2]). Gathers the header and device records by calling
// this library's exported cuDriverGetVersion, cuDeviceGetCount, cuDeviceGetUuid_v2 and
// cuDeviceGetAttribute (devices are ordinals 0..count-1), so it hashes what cudart saw.
// Returns the first failing call's error, CUDA_ERROR_INVALID_VALUE for a null out.
CUresult integrityCheck(std::uint32_t version, std::uint64_t unixSeconds, std::uint64_t* out);

// The INTEGRITY_CHECK table (3 slots: size, integrityCheck, no-op).
const void* const* integrityCheckTable();

}  // namespace gpupool::client
