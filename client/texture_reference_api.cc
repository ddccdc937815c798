// Texture and surface references, the API before texture objects: cuModuleGetTexRef /
// cuModuleGetSurfRef name a module's `.global .texref` / `.surfref`, cuTexRef* and cuSurfRef* set
// and get its state, cuTexRefCreate makes one outside any module. The state stays here; before a
// launch of a function of the module, the references whose state changed are bound on the server
// (bindTextureReferences), which holds each binding with the module for the launches that follow.
// The resource and sampler are checked as for texture objects (common/texture_descriptor.h).
//
// The mipmap filter mode, level bias and clamps and the maximum anisotropy act on a reference
// bound to a mipmapped array (cuTexRefSetMipmappedArray); on any other binding they are stored
// and read back as set, as the driver keeps them.
#include <cstring>
#include <mutex>
#include <string>

#include "array_objects.h"
#include "client_log.h"
#include "common/texture_descriptor.h"
#include "driver_export.h"
#include "raw_enum.h"
#include "texture_references.h"
#include "texture_request.h"

using namespace gpupool::client;
using gpupool::TextureDescription;

namespace gpupool::client {

struct TextureReferenceObject {
  Tag tag = Tag::kTextureReference;  // kSurfaceReference for a surface reference
  ModuleObject* module = nullptr;    // null: made by cuTexRefCreate (no kernel can read it)
  std::string name;
  // What the reference is bound to.
  enum class Binding { kNone, kArray, kMipmappedArray, kLinear, kPitch2D } binding = Binding::kNone;
  CUarray array = nullptr;
  CUmipmappedArray mipmapped = nullptr;
  CUdeviceptr address = 0;  // linear, pitch2D: the bound (aligned) address
  size_t bytes = 0, width = 0, height = 0, pitch = 0;
  // The sampler and element format (textures).
  CUarray_format format = CU_AD_FORMAT_FLOAT;
  int channels = 1;
  CUaddress_mode addressMode[3] = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_WRAP,
                                   CU_TR_ADDRESS_MODE_WRAP};
  CUfilter_mode filterMode = CU_TR_FILTER_MODE_POINT;
  unsigned flags = 0;
  float borderColor[4] = {};
  // Of a binding to a mipmapped array (see the note at the top).
  CUfilter_mode mipmapFilterMode = CU_TR_FILTER_MODE_POINT;
  float mipmapLevelBias = 0, minMipmapLevelClamp = 0, maxMipmapLevelClamp = 0;
  unsigned maxAnisotropy = 0;
  // Changed state since the last binding on the server.
  uint64_t version = 1, boundVersion = 0;
};

}  // namespace gpupool::client

namespace {

std::mutex referencesMutex;  // guards every reference's state and ModuleObject::textureReferences

TextureReferenceObject* asReference(const void* h, Tag tag) {
  if (!h || !isRegistered(h)) return nullptr;
  auto* r = static_cast<TextureReferenceObject*>(const_cast<void*>(h));
  return r->tag == tag ? r : nullptr;
}
TextureReferenceObject* asTexRef(CUtexref h) { return asReference(h, Tag::kTextureReference); }
TextureReferenceObject* asSurfRef(CUsurfref h) { return asReference(h, Tag::kSurfaceReference); }

// The resource and sampler of a reference's binding, as a texture object would describe them.
TextureDescription referenceDescription(const TextureReferenceObject& r) {
  TextureDescription d;
  d.surface = r.tag == Tag::kSurfaceReference;
  d.format = static_cast<unsigned>(rawEnumValue(r.format));
  d.channels = static_cast<unsigned>(r.channels);
  switch (r.binding) {
    case TextureReferenceObject::Binding::kLinear:
      d.resourceType = CU_RESOURCE_TYPE_LINEAR;
      d.handle = r.address;
      d.sizeBytes = r.bytes;
      break;
    case TextureReferenceObject::Binding::kPitch2D:
      d.resourceType = CU_RESOURCE_TYPE_PITCH2D;
      d.handle = r.address;
      d.width = r.width;
      d.height = r.height;
      d.pitchBytes = r.pitch;
      break;
    case TextureReferenceObject::Binding::kMipmappedArray:
      d.resourceType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
      d.mipmapFilterMode = static_cast<unsigned>(rawEnumValue(r.mipmapFilterMode));
      d.mipmapLevelBias = r.mipmapLevelBias;
      d.minMipmapLevelClamp = r.minMipmapLevelClamp;
      d.maxMipmapLevelClamp = r.maxMipmapLevelClamp;
      d.maxAnisotropy = r.maxAnisotropy;
      break;
    default:
      d.resourceType = CU_RESOURCE_TYPE_ARRAY;
      break;
  }
  for (int i = 0; i < 3; ++i) d.addressMode[i] = static_cast<unsigned>(r.addressMode[i]);
  d.filterMode = static_cast<unsigned>(r.filterMode);
  d.flags = r.flags;
  for (int i = 0; i < 4; ++i) d.borderColor[i] = r.borderColor[i];
  return d;
}

CUresult refuseValue(const std::string& why) { return refuseCall(CUDA_ERROR_INVALID_VALUE, why); }

// The checks of a new binding that concern the resource (format, alignment, extent; for an array,
// its shape): the sampler may still change before the launch, which checks the whole.
CUresult checkResource(const TextureReferenceObject& r, const char* what,
                       const gpupool::ArrayShape* shape) {
  TextureDescription d = referenceDescription(r);
  d.filterMode = CU_TR_FILTER_MODE_POINT;
  d.flags = 0;
  for (unsigned& m : d.addressMode) m = CU_TR_ADDRESS_MODE_CLAMP;
  std::string reason;
  CUresult c = gpupool::checkTextureDescription(d, &reason);
  if (c == CUDA_SUCCESS && shape) c = gpupool::checkTextureArray(d, *shape, &reason);
  return c == CUDA_SUCCESS ? c : refuseCall(c, std::string(what) + ": " + reason);
}

bool validFormat(const CUarray_format& f, int channels) {
  return gpupool::arrayFormatNamed(static_cast<unsigned>(rawEnumValue(f))) &&
         (channels == 1 || channels == 2 || channels == 4);
}

// Looks up (once; later calls answer the same handle, as the driver does) module `hmod`'s
// reference `name` of that kind.
CUresult moduleReference(const char* what, CUmodule hmod, const char* name, bool surface,
                         TextureReferenceObject** out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  ModuleObject* m = asModule(hmod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  const Tag tag = surface ? Tag::kSurfaceReference : Tag::kTextureReference;
  {
    std::lock_guard lock(referencesMutex);
    if (auto it = m->textureReferences.find(name); it != m->textureReferences.end()) {
      if (it->second->tag != tag) return CUDA_ERROR_NOT_FOUND;
      *out = it->second;
      return CUDA_SUCCESS;
    }
  }
  ContextObject* ctx = m->context;
  CUresult r = ctx->server->call(what, [&](wire::Request::Builder b) {
    auto t = b.initTextureOp();
    t.setContext(ctx->remote);
    t.setOp(wire::Request::TextureOpKind::FIND_REFERENCE);
    t.setSurface(surface);
    t.setModule(m->remote);
    t.setName(name);
  });
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(referencesMutex);
  TextureReferenceObject*& slot = m->textureReferences[name];
  m->hasTextureReferences.store(true, std::memory_order_release);
  if (!slot) {
    slot = new TextureReferenceObject;
    slot->tag = tag;
    slot->module = m;
    slot->name = name;
    registerObject(slot);
  }
  *out = slot;
  return CUDA_SUCCESS;
}

// Under referencesMutex: marks a texture reference's state changed.
CUresult stateChanged(TextureReferenceObject* r) {
  ++r->version;
  return CUDA_SUCCESS;
}

// A cuTexRefGet* / cuSurfRefGet*: once the handle `r` (null: not a reference of that kind) and the
// output `out` check out, `read` answers from the state under the lock.
template <typename Output, typename Read>
CUresult readReference(const TextureReferenceObject* r, Output* out, Read&& read) {
  if (CUresult c = requireInit(); c != CUDA_SUCCESS) return c;
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(referencesMutex);
  return read(*r);
}

// A cuTexRefSet*: once the handle checks out and `check` (the arguments) says CUDA_SUCCESS,
// `change` sets the state under the lock, and the next launch binds it.
template <typename Check, typename Change>
CUresult changeReference(CUtexref h, Check&& check, Change&& change) {
  if (CUresult c = requireInit(); c != CUDA_SUCCESS) return c;
  TextureReferenceObject* r = asTexRef(h);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult c = check(); c != CUDA_SUCCESS) return c;
  std::lock_guard lock(referencesMutex);
  change(*r);
  return stateChanged(r);
}

// A cuTexRefGet* that copies one field out.
template <typename Field>
CUresult readField(CUtexref h, Field* out, Field TextureReferenceObject::*field) {
  return readReference(asTexRef(h), out, [&](const TextureReferenceObject& r) {
    *out = r.*field;
    return CUDA_SUCCESS;
  });
}

// Binds `r` (a texture or surface reference) to `array` (hArray) or to the mipmapped array
// `array` (hMipmapped), whose format it takes, once the resource checks out.
CUresult bindArray(TextureReferenceObject* r, CUarray hArray, CUmipmappedArray hMipmapped,
                   const ArrayObject& array, const char* what) {
  std::lock_guard lock(referencesMutex);
  TextureReferenceObject next = *r;
  next.binding = hMipmapped ? TextureReferenceObject::Binding::kMipmappedArray
                            : TextureReferenceObject::Binding::kArray;
  next.array = hArray;
  next.mipmapped = hMipmapped;
  next.format = static_cast<CUarray_format>(array.shape.format);
  next.channels = static_cast<int>(array.shape.channels);
  if (CUresult c = checkResource(next, what, &array.shape); c != CUDA_SUCCESS) return c;
  *r = next;
  return stateChanged(r);
}

// Under referencesMutex: the array `r` is bound to, or INVALID_VALUE when it is bound to none.
CUresult boundArray(const TextureReferenceObject& r, CUarray* out) {
  if (r.binding != TextureReferenceObject::Binding::kArray) return CUDA_ERROR_INVALID_VALUE;
  *out = r.array;
  return CUDA_SUCCESS;
}

// (Enums by reference: a caller's out-of-range value is read as an int, never through its type.)
CUresult checkFilterMode(const CUfilter_mode& fm, const char* what) {
  const int mode = rawEnumValue(fm);
  if (mode < CU_TR_FILTER_MODE_POINT || mode > CU_TR_FILTER_MODE_LINEAR) {
    return refuseValue(std::string(what) + ": invalid filter mode");
  }
  return CUDA_SUCCESS;
}

CUresult bindPitch2D(TextureReferenceObject* r, const CUDA_ARRAY_DESCRIPTOR* desc, CUdeviceptr dptr,
                     size_t pitch) {
  if (!desc) return CUDA_ERROR_INVALID_VALUE;
  if (!validFormat(desc->Format, static_cast<int>(desc->NumChannels))) {
    return refuseValue("cuTexRefSetAddress2D: invalid format or channel count (1, 2 or 4)");
  }
  std::lock_guard lock(referencesMutex);
  TextureReferenceObject next = *r;
  next.binding = TextureReferenceObject::Binding::kPitch2D;
  next.address = dptr;
  next.width = desc->Width;
  next.height = desc->Height;
  next.pitch = pitch;
  next.format = desc->Format;
  next.channels = static_cast<int>(desc->NumChannels);
  if (CUresult c = checkResource(next, "cuTexRefSetAddress2D", nullptr); c != CUDA_SUCCESS) {
    return c;
  }
  *r = next;
  return stateChanged(r);
}

}  // namespace

namespace gpupool::client {

CUresult bindTextureReferences(FunctionObject* f) {
  ModuleObject* m = f->module;
  if (!m->hasTextureReferences.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  struct Pending {
    TextureReferenceObject* reference;
    uint64_t version;
    TextureDescription description;
  };
  std::vector<Pending> pending;
  bool check = false;
  {
    std::lock_guard lock(referencesMutex);
    // A module none of whose references was looked up: the launch itself checks.
    check = !m->textureReferences.empty() && !f->referencesBound;
    for (auto& [name, r] : m->textureReferences) {
      if (r->binding == TextureReferenceObject::Binding::kNone || r->version == r->boundVersion) {
        continue;
      }
      Pending p{r, r->version, referenceDescription(*r)};
      if (r->binding == TextureReferenceObject::Binding::kArray ||
          r->binding == TextureReferenceObject::Binding::kMipmappedArray) {
        const bool mipmapped = r->binding == TextureReferenceObject::Binding::kMipmappedArray;
        const ArrayObject* a = mipmapped ? asMipmappedArray(r->mipmapped) : asArray(r->array);
        if (!a) {
          return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                            std::string("launch: the ") +
                                (mipmapped ? "mipmapped array" : "array") +
                                " bound to reference '" + name + "' was destroyed");
        }
        p.description.handle = a->remote;
      }
      pending.push_back(p);
    }
  }
  ContextObject* ctx = m->context;
  for (const Pending& p : pending) {
    const TextureDescription& d = p.description;
    CUresult r = ctx->server->call("cuLaunchKernel (texture reference binding)",
                                   [&](wire::Request::Builder b) {
                                     auto t = b.initTextureOp();
                                     t.setContext(ctx->remote);
                                     t.setOp(wire::Request::TextureOpKind::BIND_REFERENCE);
                                     t.setModule(m->remote);
                                     t.setName(p.reference->name);
                                     setTextureDescription(t, d);
                                   });
    if (r != CUDA_SUCCESS) return r;
    std::lock_guard lock(referencesMutex);
    p.reference->boundVersion = p.version;
  }
  if (!check) return CUDA_SUCCESS;
  CUresult r =
      ctx->server->call("cuLaunchKernel (texture references)", [&](wire::Request::Builder b) {
        auto t = b.initTextureOp();
        t.setContext(ctx->remote);
        t.setOp(wire::Request::TextureOpKind::CHECK_BOUND);
        t.setHandle(f->remote);
      });
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(referencesMutex);
  f->referencesBound = true;
  return CUDA_SUCCESS;
}

bool textureReferenceModule(CUtexref h, ModuleObject** module) {
  TextureReferenceObject* r = asTexRef(h);
  if (!r) return false;
  *module = r->module;
  return true;
}

void forgetTextureReferences(ModuleObject* m) {
  std::lock_guard lock(referencesMutex);
  for (auto& [name, r] : m->textureReferences) {
    unregisterObject(r);
    r->tag = Tag::kDead;
    delete r;
  }
  m->textureReferences.clear();
}

}  // namespace gpupool::client

// ---- References of modules ----

GPUPOOL_DRIVER_API CUresult cuModuleGetTexRef(CUtexref* pTexRef, CUmodule hmod, const char* name) {
  TextureReferenceObject* r = nullptr;
  CUresult result = moduleReference("cuModuleGetTexRef", hmod, name, false, &r);
  if (result == CUDA_SUCCESS) *pTexRef = reinterpret_cast<CUtexref>(r);
  return result;
}

GPUPOOL_DRIVER_API CUresult cuModuleGetSurfRef(CUsurfref* pSurfRef, CUmodule hmod,
                                               const char* name) {
  TextureReferenceObject* r = nullptr;
  CUresult result = moduleReference("cuModuleGetSurfRef", hmod, name, true, &r);
  if (result == CUDA_SUCCESS) *pSurfRef = reinterpret_cast<CUsurfref>(r);
  return result;
}

// A reference made outside any module: it holds state, and no kernel reads it.
GPUPOOL_DRIVER_API CUresult cuTexRefCreate(CUtexref* pTexRef) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!pTexRef) return CUDA_ERROR_INVALID_VALUE;
  auto* r = new TextureReferenceObject;
  registerObject(r);
  *pTexRef = reinterpret_cast<CUtexref>(r);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuTexRefDestroy(CUtexref hTexRef) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asTexRef(hTexRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  if (r->module) {
    return refuseValue("cuTexRefDestroy: a module's texture reference lives as long as its module");
  }
  unregisterObject(r);
  r->tag = Tag::kDead;
  delete r;
  return CUDA_SUCCESS;
}

// ---- Binding ----

GPUPOOL_DRIVER_API CUresult cuTexRefSetArray(CUtexref hTexRef, CUarray hArray, unsigned int Flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asTexRef(hTexRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  const ArrayObject* a = asArray(hArray);
  if (!a) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags != CU_TRSA_OVERRIDE_FORMAT) {
    return refuseValue("cuTexRefSetArray: Flags must be CU_TRSA_OVERRIDE_FORMAT");
  }
  if (r->module && a->context != r->module->context) {
    return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                      "cuTexRefSetArray: the array belongs to another context than the module");
  }
  return bindArray(r, hArray, nullptr, *a, "cuTexRefSetArray");
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetMipmappedArray(CUtexref hTexRef,
                                                      CUmipmappedArray hMipmappedArray,
                                                      unsigned int Flags) {
  if (CUresult c = requireInit(); c != CUDA_SUCCESS) return c;
  TextureReferenceObject* r = asTexRef(hTexRef);
  const ArrayObject* a = asMipmappedArray(hMipmappedArray);
  if (!r || !a) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags != CU_TRSA_OVERRIDE_FORMAT) {
    return refuseValue("cuTexRefSetMipmappedArray: Flags must be CU_TRSA_OVERRIDE_FORMAT");
  }
  if (r->module && a->context != r->module->context) {
    return refuseCall(
        CUDA_ERROR_INVALID_HANDLE,
        "cuTexRefSetMipmappedArray: the mipmapped array belongs to another context than the "
        "module");
  }
  return bindArray(r, nullptr, hMipmappedArray, *a, "cuTexRefSetMipmappedArray");
}

namespace {

// Binds linear memory. As the driver does, an address off TEXTURE_ALIGNMENT (512 bytes) is bound
// from the aligned address below it, and *ByteOffset says how far the data starts from there.
CUresult bindLinear(size_t* ByteOffset, CUtexref hTexRef, CUdeviceptr dptr, size_t bytes) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asTexRef(hTexRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  const size_t offset = dptr % gpupool::kTextureAlignment;
  std::lock_guard lock(referencesMutex);
  TextureReferenceObject next = *r;
  next.binding = TextureReferenceObject::Binding::kLinear;
  next.address = dptr - offset;
  next.bytes = bytes + offset;
  if (CUresult c = checkResource(next, "cuTexRefSetAddress", nullptr); c != CUDA_SUCCESS) return c;
  *r = next;
  if (ByteOffset) *ByteOffset = offset;
  return stateChanged(r);
}

CUresult bindPitch2DOf(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR* desc, CUdeviceptr dptr,
                       size_t Pitch) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asTexRef(hTexRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  return bindPitch2D(r, desc, dptr, Pitch);
}

CUresult boundAddress(CUdeviceptr* pdptr, CUtexref hTexRef) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asTexRef(hTexRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(referencesMutex);
  if (r->binding != TextureReferenceObject::Binding::kLinear &&
      r->binding != TextureReferenceObject::Binding::kPitch2D) {
    return CUDA_ERROR_INVALID_VALUE;  // as the driver: not bound to device memory
  }
  *pdptr = r->address;
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuTexRefSetAddress_v2(size_t* ByteOffset, CUtexref hTexRef,
                                                  CUdeviceptr dptr, size_t bytes) {
  return bindLinear(ByteOffset, hTexRef, dptr, bytes);
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetAddress2D_v3(CUtexref hTexRef,
                                                    const CUDA_ARRAY_DESCRIPTOR* desc,
                                                    CUdeviceptr dptr, size_t Pitch) {
  return bindPitch2DOf(hTexRef, desc, dptr, Pitch);
}

// The CUDA 4.1 ABI of cuTexRefSetAddress2D: the same parameters.
GPUPOOL_DRIVER_API CUresult cuTexRefSetAddress2D_v2(CUtexref hTexRef,
                                                    const CUDA_ARRAY_DESCRIPTOR* desc,
                                                    CUdeviceptr dptr, size_t Pitch) {
  return bindPitch2DOf(hTexRef, desc, dptr, Pitch);
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetAddress_v2(CUdeviceptr* pdptr, CUtexref hTexRef) {
  return boundAddress(pdptr, hTexRef);
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetArray(CUarray* phArray, CUtexref hTexRef) {
  return readReference(asTexRef(hTexRef), phArray,
                       [&](const TextureReferenceObject& r) { return boundArray(r, phArray); });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetMipmappedArray(CUmipmappedArray* phMipmappedArray,
                                                      CUtexref hTexRef) {
  return readReference(asTexRef(hTexRef), phMipmappedArray, [&](const TextureReferenceObject& r) {
    if (r.binding != TextureReferenceObject::Binding::kMipmappedArray) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *phMipmappedArray = r.mipmapped;
    return CUDA_SUCCESS;
  });
}

// ---- The sampler and format ----

GPUPOOL_DRIVER_API CUresult cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt,
                                              int NumPackedComponents) {
  return changeReference(
      hTexRef,
      [&] {
        // Any format is taken, one cuda.h does not name too (observed on driver 580.159.04,
        // H200); it is checked where it matters: binding linear or pitched memory, and the
        // launch, refuse it (CUDA_ERROR_INVALID_VALUE), and an array binding takes the array's.
        return NumPackedComponents == 1 || NumPackedComponents == 2 || NumPackedComponents == 4
                   ? CUDA_SUCCESS
                   : refuseValue("cuTexRefSetFormat: invalid channel count (1, 2 or 4)");
      },
      [&](TextureReferenceObject& r) {
        r.format = fmt;
        r.channels = NumPackedComponents;
      });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetFormat(CUarray_format* pFormat, int* pNumChannels,
                                              CUtexref hTexRef) {
  // Either output may be null: the driver fills those given.
  return readReference(asTexRef(hTexRef), &pFormat, [&](const TextureReferenceObject& r) {
    if (pFormat) *pFormat = r.format;
    if (pNumChannels) *pNumChannels = r.channels;
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetAddressMode(CUtexref hTexRef, int dim, CUaddress_mode am) {
  return changeReference(
      hTexRef,
      [&] {
        if (dim < 0 || dim > 2) return refuseValue("cuTexRefSetAddressMode: dim must be 0, 1 or 2");
        const int mode = rawEnumValue(am);
        if (mode < CU_TR_ADDRESS_MODE_WRAP || mode > CU_TR_ADDRESS_MODE_BORDER) {
          return refuseValue("cuTexRefSetAddressMode: invalid address mode");
        }
        return CUDA_SUCCESS;
      },
      [&](TextureReferenceObject& r) { r.addressMode[dim] = am; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetAddressMode(CUaddress_mode* pam, CUtexref hTexRef, int dim) {
  return readReference(asTexRef(hTexRef), pam, [&](const TextureReferenceObject& r) {
    if (dim < 0 || dim > 2) return CUDA_ERROR_INVALID_VALUE;
    *pam = r.addressMode[dim];
    return CUDA_SUCCESS;
  });
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetFilterMode(CUtexref hTexRef, CUfilter_mode fm) {
  return changeReference(
      hTexRef, [&] { return checkFilterMode(fm, "cuTexRefSetFilterMode"); },
      [&](TextureReferenceObject& r) { r.filterMode = fm; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetFilterMode(CUfilter_mode* pfm, CUtexref hTexRef) {
  return readField(hTexRef, pfm, &TextureReferenceObject::filterMode);
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetFlags(CUtexref hTexRef, unsigned int Flags) {
  return changeReference(
      hTexRef,
      [&] {
        return (Flags & ~gpupool::kKnownTextureFlags)
                   ? refuseValue("cuTexRefSetFlags: unknown flags")
                   : CUDA_SUCCESS;
      },
      [&](TextureReferenceObject& r) { r.flags = Flags; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetFlags(unsigned int* pFlags, CUtexref hTexRef) {
  return readField(hTexRef, pFlags, &TextureReferenceObject::flags);
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetBorderColor(CUtexref hTexRef, float* pBorderColor) {
  return changeReference(
      hTexRef, [&] { return pBorderColor ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; },
      [&](TextureReferenceObject& r) {
        std::memcpy(r.borderColor, pBorderColor, sizeof r.borderColor);
      });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetBorderColor(float* pBorderColor, CUtexref hTexRef) {
  return readReference(asTexRef(hTexRef), pBorderColor, [&](const TextureReferenceObject& r) {
    std::memcpy(pBorderColor, r.borderColor, sizeof r.borderColor);
    return CUDA_SUCCESS;
  });
}

// ---- Of a binding to a mipmapped array (see the note at the top) ----

GPUPOOL_DRIVER_API CUresult cuTexRefSetMipmapFilterMode(CUtexref hTexRef, CUfilter_mode fm) {
  return changeReference(
      hTexRef, [&] { return checkFilterMode(fm, "cuTexRefSetMipmapFilterMode"); },
      [&](TextureReferenceObject& r) { r.mipmapFilterMode = fm; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetMipmapFilterMode(CUfilter_mode* pfm, CUtexref hTexRef) {
  return readField(hTexRef, pfm, &TextureReferenceObject::mipmapFilterMode);
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetMipmapLevelBias(CUtexref hTexRef, float bias) {
  return changeReference(
      hTexRef, [] { return CUDA_SUCCESS; },
      [&](TextureReferenceObject& r) { r.mipmapLevelBias = bias; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetMipmapLevelBias(float* pbias, CUtexref hTexRef) {
  return readField(hTexRef, pbias, &TextureReferenceObject::mipmapLevelBias);
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetMipmapLevelClamp(CUtexref hTexRef, float minMipmapLevelClamp,
                                                        float maxMipmapLevelClamp) {
  return changeReference(
      hTexRef, [] { return CUDA_SUCCESS; },
      [&](TextureReferenceObject& r) {
        r.minMipmapLevelClamp = minMipmapLevelClamp;
        r.maxMipmapLevelClamp = maxMipmapLevelClamp;
      });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetMipmapLevelClamp(float* pminMipmapLevelClamp,
                                                        float* pmaxMipmapLevelClamp,
                                                        CUtexref hTexRef) {
  return readReference(asTexRef(hTexRef), pminMipmapLevelClamp,
                       [&](const TextureReferenceObject& r) {
                         if (!pmaxMipmapLevelClamp) return CUDA_ERROR_INVALID_VALUE;
                         *pminMipmapLevelClamp = r.minMipmapLevelClamp;
                         *pmaxMipmapLevelClamp = r.maxMipmapLevelClamp;
                         return CUDA_SUCCESS;
                       });
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetMaxAnisotropy(CUtexref hTexRef, unsigned int maxAniso) {
  return changeReference(
      hTexRef, [] { return CUDA_SUCCESS; },
      [&](TextureReferenceObject& r) { r.maxAnisotropy = maxAniso; });
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetMaxAnisotropy(int* pmaxAniso, CUtexref hTexRef) {
  return readReference(asTexRef(hTexRef), pmaxAniso, [&](const TextureReferenceObject& r) {
    *pmaxAniso = static_cast<int>(r.maxAnisotropy);
    return CUDA_SUCCESS;
  });
}

// ---- Surface references ----

GPUPOOL_DRIVER_API CUresult cuSurfRefSetArray(CUsurfref hSurfRef, CUarray hArray,
                                              unsigned int Flags) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  TextureReferenceObject* r = asSurfRef(hSurfRef);
  if (!r) return CUDA_ERROR_INVALID_HANDLE;
  const ArrayObject* a = asArray(hArray);
  if (!a) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags != 0) return refuseValue("cuSurfRefSetArray: Flags must be 0");
  // cuda.h: "The CUDA_ARRAY3D_SURFACE_LDST flag must have been set for the CUDA array" (a surface
  // object does without it).
  if (!(a->shape.flags & CUDA_ARRAY3D_SURFACE_LDST)) {
    return refuseValue(
        "cuSurfRefSetArray: the array was created without CUDA_ARRAY3D_SURFACE_LDST");
  }
  if (a->context != r->module->context) {
    return refuseCall(CUDA_ERROR_INVALID_HANDLE,
                      "cuSurfRefSetArray: the array belongs to another context than the module");
  }
  return bindArray(r, hArray, nullptr, *a, "cuSurfRefSetArray");
}

GPUPOOL_DRIVER_API CUresult cuSurfRefGetArray(CUarray* phArray, CUsurfref hSurfRef) {
  return readReference(asSurfRef(hSurfRef), phArray,
                       [&](const TextureReferenceObject& r) { return boundArray(r, phArray); });
}

// ---- The device limit ----

// The widest 1D linear texture: the device's MAXIMUM_TEXTURE1D_LINEAR_WIDTH elements, for any
// element format (the limit checkTextureDescription applies).
GPUPOOL_DRIVER_API CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements,
                                                               CUarray_format format,
                                                               unsigned numChannels, CUdevice dev) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!maxWidthInElements) return CUDA_ERROR_INVALID_VALUE;
  int width = 0;
  if (CUresult r =
          cuDeviceGetAttribute(&width, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH, dev);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (!validFormat(format, static_cast<int>(numChannels))) {
    return refuseValue("cuDeviceGetTexture1DLinearMaxWidth: invalid format or channel count");
  }
  *maxWidthInElements = static_cast<size_t>(width);
  return CUDA_SUCCESS;
}

// ---- The 32-bit ABIs from before CUDA 3.2 ----
// Programs built against CUDA 3.1 call these names (cuda.h now maps them to the _v2/_v3 entry
// points above) with 32-bit addresses and sizes, served by widening. An address that needs more
// than 32 bits cannot be answered through them.
GPUPOOL_DRIVER_API CUresult cuTexRefSetAddress(unsigned int* ByteOffset, CUtexref hTexRef,
                                               CUdeviceptr_v1 dptr, unsigned int bytes) {
  size_t offset = 0;
  CUresult r = bindLinear(&offset, hTexRef, dptr, bytes);
  if (r == CUDA_SUCCESS && ByteOffset) *ByteOffset = static_cast<unsigned int>(offset);
  return r;
}

GPUPOOL_DRIVER_API CUresult cuTexRefGetAddress(CUdeviceptr_v1* pdptr, CUtexref hTexRef) {
  CUdeviceptr address = 0;
  CUresult r = boundAddress(&address, hTexRef);
  if (r != CUDA_SUCCESS) return r;
  if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
  if (address > 0xffffffffu) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      "cuTexRefGetAddress (32-bit ABI): the bound address needs 64 bits; call "
                      "cuTexRefGetAddress_v2");
  }
  *pdptr = static_cast<unsigned int>(address);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuTexRefSetAddress2D(CUtexref hTexRef,
                                                 const CUDA_ARRAY_DESCRIPTOR_v1* desc,
                                                 CUdeviceptr_v1 dptr, unsigned int Pitch) {
  if (!desc) return bindPitch2DOf(hTexRef, nullptr, dptr, Pitch);
  CUDA_ARRAY_DESCRIPTOR wide{};
  wide.Width = desc->Width;
  wide.Height = desc->Height;
  wide.Format = desc->Format;
  wide.NumChannels = desc->NumChannels;
  return bindPitch2DOf(hTexRef, &wide, dptr, Pitch);
}
