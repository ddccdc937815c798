// Recognising a CUDA module image and finding how many bytes it occupies.
//
// The CUDA driver receives module images as bare pointers (cuModuleLoadData, cuLibraryLoadData,
// __cudaRegisterFatBinary). The client must classify such a pointer and ship exactly the bytes of
// the image to the server; the server classifies the received bytes again (with the span
// overloads, which never read outside the span).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace gpupool::image {

enum class ImageKind {
  kUnknown,
  kFatbinWrapper,  // __fatBinC_Wrapper_t, magic 0x466243B1 (version 1, or 2 for -rdc device links)
  kFatbin,         // fatbin container, magic 0xBA55ED50
  kElf,            // ELF cubin (SASS), "\x7fELF"
  kPtx,            // NUL-terminated PTX text
};

inline constexpr uint32_t kFatbinWrapperMagic = 0x466243B1;
inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;
// Sizes read from an image's own headers above this are taken as garbage rather than trusted.
// (How many bytes one request may carry to the server is a separate, lower limit.)
inline constexpr uint64_t kMaxPlausibleImageBytes = uint64_t{4} << 30;

const char* toString(ImageKind kind);

// Classifies the image at `p`. Reads at most the 4 magic bytes for binary formats; for text it
// reads leading whitespace and comments up to a NUL or a bounded length, so `p` must point at
// readable memory that is either a binary image or a NUL-terminated string. Null gives kUnknown.
ImageKind classify(const void* p);

// Same, for received bytes; never reads outside `bytes`. PTX need not be NUL-terminated here.
ImageKind classify(std::span<const uint8_t> bytes);

// The exact bytes the client must ship for the image at `p`:
//  - wrapper: the fatbin it points to (fatbin header + fatSize), not the wrapper itself;
//  - fatbin: header + fatSize;
//  - ELF: up to the furthest end of any section, segment or header table;
//  - PTX: the text including its terminating NUL.
// CUDA_ERROR_INVALID_IMAGE with the reason for unknown kinds, bad magic behind a wrapper,
// malformed ELF headers or sizes above kMaxPlausibleImageBytes. Like the driver it trusts `p` to
// point at a readable image of the classified kind; it cannot bounds-check a bare pointer.
Result<std::span<const uint8_t>> imageBytes(const void* p);

// The extent of an ELF image that lies inside `bytes`, computed the same way; an error when the
// headers or anything they describe fall outside `bytes`.
Result<uint64_t> elfExtent(std::span<const uint8_t> bytes);

// How many leading bytes of a received image a driver given its address would read, never
// reading outside `bytes`: what must be checked before handing the address to cuModuleLoadData,
// which takes no size.
//  - fatbin: header + fatSize, which must fit in `bytes`;
//  - ELF: elfExtent();
//  - fatbin wrapper: an error (it holds a host pointer, meaningless once received);
//  - anything else is read as text up to its first NUL, which must lie inside `bytes` (the driver
//    itself rejects text that is not PTX).
Result<uint64_t> imageExtent(std::span<const uint8_t> bytes);

}  // namespace gpupool::image
