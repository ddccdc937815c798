// Loads and stores of device memory elements (1-8 bytes) as the interpreter makes them, for the
// ordinary ld/st instructions (instruction_semantics.cc) and the surface ones
// (texture_instructions.cc) alike.
#pragma once

#include <emmintrin.h>

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

// A vector access (ld/st .v2, .v4) of up to 16 bytes, naturally aligned, is one host access,
// because code relies on a GPU making it one transaction. CUB's decoupled look-back packs a
// tile's status and its value into one `st.relaxed.gpu.v2.u32` and reads them back with one
// `ld.relaxed.gpu.v2.u32` from another block; made element by element, a reader on another host
// thread could see the new status with the old value. 16 bytes go through one aligned SSE move
// (MOVDQA), which Intel and AMD guarantee atomic on every processor with AVX; under
// ThreadSanitizer through a 16-byte atomic, so that it sees what the program synchronizes. Larger
// vectors (.v8, 32 bytes) and misaligned ones go element by element.
inline bool wholeVectorAccess(const uint8_t* p, unsigned bytes) {
  return (bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16) &&
         reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Loads `count` elements of `elementBytes` each from p into out[0..count), zero-extended.
inline void loadDeviceVector(const uint8_t* p, unsigned elementBytes, unsigned count,
                             uint64_t* out) {
  const unsigned bytes = elementBytes * count;
  if (!wholeVectorAccess(p, bytes)) {
    for (unsigned k = 0; k < count; ++k)
      out[k] = loadDeviceElement(p + k * elementBytes, elementBytes);
    return;
  }
  alignas(16) uint8_t snapshot[16];
  if (bytes == 16) {
#if defined(__SANITIZE_THREAD__)
    const unsigned __int128 v =
        __atomic_load_n(reinterpret_cast<const unsigned __int128*>(p), __ATOMIC_ACQUIRE);
    std::memcpy(snapshot, &v, 16);
#else
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
    // Later accesses stay after this one, as after an acquire.
    asm volatile("" ::: "memory");
    _mm_store_si128(reinterpret_cast<__m128i*>(snapshot), v);
#endif
  } else {
    const uint64_t v = loadDeviceElement(p, bytes);
    std::memcpy(snapshot, &v, bytes);
  }
  for (unsigned k = 0; k < count; ++k) {
    uint64_t v = 0;
    std::memcpy(&v, snapshot + k * elementBytes, elementBytes);
    out[k] = v;
  }
}

// Stores in[0..count), each truncated to `elementBytes`, at p.
inline void storeDeviceVector(uint8_t* p, unsigned elementBytes, unsigned count,
                              const uint64_t* in) {
  const unsigned bytes = elementBytes * count;
  if (!wholeVectorAccess(p, bytes)) {
    for (unsigned k = 0; k < count; ++k)
      storeDeviceElement(p + k * elementBytes, elementBytes, in[k]);
    return;
  }
  alignas(16) uint8_t packed[16];
  for (unsigned k = 0; k < count; ++k) std::memcpy(packed + k * elementBytes, &in[k], elementBytes);
  if (bytes == 16) {
#if defined(__SANITIZE_THREAD__)
    unsigned __int128 v;
    std::memcpy(&v, packed, 16);
    __atomic_store_n(reinterpret_cast<unsigned __int128*>(p), v, __ATOMIC_RELEASE);
#else
    const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(packed));
    // Earlier accesses stay before this one, as before a release.
    asm volatile("" ::: "memory");
    _mm_store_si128(reinterpret_cast<__m128i*>(p), v);
#endif
  } else {
    uint64_t v = 0;
    std::memcpy(&v, packed, bytes);
    storeDeviceElement(p, bytes, v);
  }
}

}  // namespace gpupool::ptx::execution
