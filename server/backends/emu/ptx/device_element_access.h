// Loads and stores of device memory elements (1-8 bytes) as the interpreter makes them, for the
// ordinary ld/st instructions (instruction_semantics.cc) and the surface ones
// (texture_instructions.cc) alike.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpupool::ptx::execution {

// Device memory is shared by blocks that run at once on host threads (all of a cooperative
// launch's). A naturally aligned load or store of 1-8 bytes is one host access with acquire or
// release order (a plain move on x86), so a grid barrier's ld.acquire that sees another block's
// atom.release also sees what that block stored before it, in the host's memory model too.
inline uint64_t loadDeviceElement(const uint8_t* p, unsigned bytes) {
  uint64_t v = 0;
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    std::memcpy(&v, p, bytes);
    return v;
  }
  switch (bytes) {
    case 1:
      return __atomic_load_n(p, __ATOMIC_ACQUIRE);
    case 2:
      return __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_ACQUIRE);
    case 4:
      return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE);
    case 8:
      return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
    default:
      std::memcpy(&v, p, bytes);
      return v;
  }
}

inline void storeDeviceElement(uint8_t* p, unsigned bytes, uint64_t v) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    std::memcpy(p, &v, bytes);
    return;
  }
  switch (bytes) {
    case 1:
      __atomic_store_n(p, static_cast<uint8_t>(v), __ATOMIC_RELEASE);
      return;
    case 2:
      __atomic_store_n(reinterpret_cast<uint16_t*>(p), static_cast<uint16_t>(v), __ATOMIC_RELEASE);
      return;
    case 4:
      __atomic_store_n(reinterpret_cast<uint32_t*>(p), static_cast<uint32_t>(v), __ATOMIC_RELEASE);
      return;
    case 8:
      __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
      return;
    default:
      std::memcpy(p, &v, bytes);
  }
}

// The same for an element of EB bytes at an address already known to be EB-aligned (a warp's
// accesses checked at once): no alignment test and no size switch per element.
template <unsigned EB>
[[gnu::always_inline]] inline uint64_t loadAlignedElement(const uint8_t* p) {
  if constexpr (EB == 1) return __atomic_load_n(p, __ATOMIC_ACQUIRE);
  if constexpr (EB == 2)
    return __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_ACQUIRE);
  if constexpr (EB == 4)
    return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_ACQUIRE);
  if constexpr (EB == 8)
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
  if constexpr (EB != 1 && EB != 2 && EB != 4 && EB != 8) return loadDeviceElement(p, EB);
}

template <unsigned EB>
[[gnu::always_inline]] inline void storeAlignedElement(uint8_t* p, uint64_t v) {
  if constexpr (EB == 1) __atomic_store_n(p, static_cast<uint8_t>(v), __ATOMIC_RELEASE);
  if constexpr (EB == 2)
    __atomic_store_n(reinterpret_cast<uint16_t*>(p), static_cast<uint16_t>(v), __ATOMIC_RELEASE);
  if constexpr (EB == 4)
    __atomic_store_n(reinterpret_cast<uint32_t*>(p), static_cast<uint32_t>(v), __ATOMIC_RELEASE);
  if constexpr (EB == 8) __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
  if constexpr (EB != 1 && EB != 2 && EB != 4 && EB != 8) storeDeviceElement(p, EB, v);
}

}  // namespace gpupool::ptx::execution
