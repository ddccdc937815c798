// Modules, libraries, functions and kernels.
//
// An image travels to the server at most once per server: the client first names it by SHA-256 and
// sends the bytes only when the server does not have them cached. Libraries (cuLibrary*) are
// context-independent: their image stays here and is loaded into a context's server side the first
// time something of theirs is used in that context. A CUkernel is accepted wherever a CUfunction
// is.
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>

#include "client_log.h"
#include "context_hooks.h"
#include "device_address_reservations.h"
#include "driver_export.h"
#include "driver_state.h"
#include "gpupool/image/image_kind.h"
#include "host_function_fence.h"
#include "managed_memory.h"
#include "module_resolution.h"
#include "raw_enum.h"
#include "stream_capture.h"
#include "texture_references.h"

using namespace gpupool::client;
using gpupool::transport::ConstBuffer;

namespace gpupool::client {
namespace {

// The libraries loaded and not unloaded: a context's end removes its entries from each. Never
// destroyed: cudart unloads its libraries from exit handlers.
std::mutex liveLibrariesMutex;
std::set<LibraryObject*>& liveLibraries() {
  static auto* libraries = new std::set<LibraryObject*>();
  return *libraries;
}

CUresult loadRemote(ContextObject* ctx, const std::vector<uint8_t>& image,
                    const protocol::Sha256Digest& hash, uint64_t* module) {
  bool needImage = false;
  auto build = [&](bool withImage) {
    return [&, withImage](wire::Request::Builder b) {
      auto m = b.initModuleLoad();
      m.setContext(ctx->remote);
      m.setHash(kj::arrayPtr(hash.data(), hash.size()));
      m.setImageBytes(image.size());
      m.setHasImage(withImage);
    };
  };
  auto onReply = [&](wire::Response::Reader reply, ReplyBulk&) {
    if (reply.isNeedImage()) {
      needImage = true;
      return CUDA_SUCCESS;
    }
    *module = reply.getHandle();
    return CUDA_SUCCESS;
  };
  CUresult r = ctx->server->call("cuModuleLoad (cached)", build(false), {}, onReply);
  if (!needImage) return r;
  ConstBuffer bulk{image.data(), image.size()};
  return ctx->server->call("cuModuleLoad", build(true), std::span<const ConstBuffer>(&bulk, 1),
                           onReply);
}

CUresult snapshotImage(const void* image, std::shared_ptr<const std::vector<uint8_t>>* bytes,
                       protocol::Sha256Digest* hash) {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  auto span = gpupool::image::imageBytes(image);
  if (!span) return span.status().code;
  auto copy = std::make_shared<std::vector<uint8_t>>(span->begin(), span->end());
  *hash = protocol::Sha256::of(*copy);
  *bytes = std::move(copy);
  return CUDA_SUCCESS;
}

CUresult newModule(ContextObject* ctx, const std::vector<uint8_t>& image,
                   const protocol::Sha256Digest& hash, ModuleObject** out) {
  uint64_t remoteModule = 0;
  if (CUresult r = loadRemote(ctx, image, hash, &remoteModule); r != CUDA_SUCCESS) return r;
  auto* m = new ModuleObject();
  m->context = ctx;
  m->remote = remoteModule;
  registerObject(m);
  noteContextChild(ctx, m, Tag::kModule);
  *out = m;
  return CUDA_SUCCESS;
}

CUresult loadModule(CUmodule* out, const void* image) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  std::shared_ptr<const std::vector<uint8_t>> bytes;
  protocol::Sha256Digest hash;
  if (CUresult r = snapshotImage(image, &bytes, &hash); r != CUDA_SUCCESS) return r;
  ModuleObject* m = nullptr;
  if (CUresult r = newModule(ctx, *bytes, hash, &m); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

void forgetModule(ModuleObject* m) {
  forgetTextureReferences(m);
  dropManagedGlobalsOf(m);
  for (auto& [name, f] : m->functions) {
    unregisterObject(f);
    delete f;
  }
  {
    std::lock_guard lock(DriverState::get().mutex);
    for (auto& [name, g] : m->globals) DriverState::get().deviceAllocations.erase(g.first);
  }
  dropContextChild(m->context, m);
  unregisterObject(m);
  m->tag = Tag::kDead;
  delete m;
}

CUresult unloadModule(ModuleObject* m) {
  CUresult r = CUDA_SUCCESS;
  if (m->context->remote) {
    uint64_t context = m->context->remote, module = m->remote;
    // The unload waits for the device.
    auto fence = HostFunctionFence::hold(HostFunctionFence::Work::kCall, fenceScopeOf(m->context));
    dropManagedGlobalsOf(m);  // before the unload: no write of their pages may follow it
    r = m->context->server->post("cuModuleUnload", [&](wire::Request::Builder b) {
      auto u = b.initModuleUnload();
      u.setContext(context);
      u.setModule(module);
    });
  }
  forgetModule(m);
  return r;
}

CUresult readFile(const char* path, std::vector<uint8_t>* bytes) {
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream in(path, std::ios::binary);
  if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  bytes->push_back(0);  // PTX text files need their terminator
  return CUDA_SUCCESS;
}

}  // namespace

CUresult functionIn(ModuleObject* m, const std::string& name, FunctionObject** out) {
  if (auto it = m->functions.find(name); it != m->functions.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  if (CUresult r = DriverState::get().ensureRemote(m->context); r != CUDA_SUCCESS) return r;
  auto* f = new FunctionObject();
  f->module = m;
  f->name = name;
  uint64_t context = m->context->remote, module = m->remote;
  CUresult r = m->context->server->call(
      "cuModuleGetFunction",
      [&](wire::Request::Builder b) {
        auto g = b.initModuleGetFunction();
        g.setContext(context);
        g.setModule(module);
        g.setName(name);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        auto info = reply.getFunction();
        f->remote = info.getHandle();
        for (auto p : info.getParams()) f->params.emplace_back(p.getOffset(), p.getSize());
        for (int32_t a : info.getAttributes()) f->attributes.push_back(a);
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) {
    delete f;
    return r == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_NOT_FOUND : r;
  }
  registerObject(f);
  m->functions[name] = f;
  *out = f;
  return CUDA_SUCCESS;
}

CUresult globalIn(ModuleObject* m, const std::string& name, CUdeviceptr* address, size_t* bytes,
                  bool* managed = nullptr) {
  if (auto it = m->globals.find(name); it != m->globals.end()) {
    if (address) *address = it->second.first;
    if (bytes) *bytes = it->second.second;
    if (managed) *managed = m->managedGlobals[name];
    return CUDA_SUCCESS;
  }
  uint64_t context = m->context->remote, module = m->remote;
  CUdeviceptr a = 0;
  size_t n = 0;
  bool isManaged = false;
  CUresult r = m->context->server->call(
      "cuModuleGetGlobal",
      [&](wire::Request::Builder b) {
        auto g = b.initModuleGetGlobal();
        g.setContext(context);
        g.setModule(module);
        g.setName(name);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        a = reply.getGlobal().getAddress();
        n = reply.getGlobal().getBytes();
        isManaged = reply.getGlobal().getManaged();
        return CUDA_SUCCESS;
      });
  if (r != CUDA_SUCCESS) return r;
  if (isManaged) {
    // Managed memory: one address for host code and kernels, as on a GPU (the mirror registers it
    // as device memory too).
    if (CUresult ar = adoptManagedGlobal(m, name, a, n); ar != CUDA_SUCCESS) return ar;
  } else {
    // Globals are device memory too: unified copies and pointer queries must recognise them. The
    // module's placement is the server's: where it is host memory of this process as well, those
    // calls refuse pointers into it.
    DeviceAllocation global{std::max<size_t>(n, 1), m->context};
    global.hostMemoryToo = !keepFixedDeviceRangeApart(
        *m->context->server, "cuModuleGetGlobal(" + name + ")", a, global.size);
    std::lock_guard lock(DriverState::get().mutex);
    DriverState::get().deviceAllocations[a] = global;
  }
  m->globals[name] = {a, n};
  m->managedGlobals[name] = isManaged;
  if (address) *address = a;
  if (bytes) *bytes = n;
  if (managed) *managed = isManaged;
  return CUDA_SUCCESS;
}

CUresult libraryModuleIn(LibraryObject* lib, ContextObject* ctx, ModuleObject** out) {
  if (auto it = lib->modules.find(ctx);
      it != lib->modules.end() && asModule(reinterpret_cast<CUmodule>(it->second))) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
  ModuleObject* m = nullptr;
  if (CUresult r = newModule(ctx, *lib->image, lib->hash, &m); r != CUDA_SUCCESS) return r;
  lib->modules[ctx] = m;
  *out = m;
  return CUDA_SUCCESS;
}

CUresult contextForLibraryUse(ContextObject** ctx) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* c = DriverState::get().current();
  // cuLibrary* may be used with no current context; the primary context of device 0 serves then.
  if (!c) c = DriverState::get().primaryContext(0);
  if (CUresult r = DriverState::get().ensureRemote(c); r != CUDA_SUCCESS) return r;
  *ctx = c;
  return CUDA_SUCCESS;
}

CUresult kernelFunctionIn(KernelObject* k, ContextObject* ctx, FunctionObject** out) {
  if (auto it = k->functions.find(ctx);
      it != k->functions.end() && asFunction(reinterpret_cast<CUfunction>(it->second))) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  ModuleObject* m = nullptr;
  if (CUresult r = libraryModuleIn(k->library, ctx, &m); r != CUDA_SUCCESS) return r;
  FunctionObject* f = nullptr;
  if (CUresult r = functionIn(m, k->name, &f); r != CUDA_SUCCESS) return r;
  k->functions[ctx] = f;
  *out = f;
  return CUDA_SUCCESS;
}

CUresult resolveFunction(CUfunction h, ContextObject* ctx, FunctionObject** out) {
  if (FunctionObject* f = asFunction(h)) {
    *out = f;
    return CUDA_SUCCESS;
  }
  if (KernelObject* k = asKernel(reinterpret_cast<CUkernel>(h))) {
    if (!ctx) {
      if (CUresult r = contextForLibraryUse(&ctx); r != CUDA_SUCCESS) return r;
    }
    return kernelFunctionIn(k, ctx, out);
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

void forgetContextModules(CUcontext handle) {
  auto* ctx = reinterpret_cast<ContextObject*>(handle);
  {
    std::lock_guard lock(liveLibrariesMutex);
    for (LibraryObject* lib : liveLibraries()) {
      lib->modules.erase(ctx);
      for (auto& [name, k] : lib->kernels) k->functions.erase(ctx);
    }
  }
  for (const void* child : contextChildren(ctx, Tag::kModule)) {
    // The server's side went with its context.
    forgetModule(static_cast<ModuleObject*>(const_cast<void*>(child)));
  }
}

}  // namespace gpupool::client

// ---- Modules ----

GPUPOOL_DRIVER_API CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  return loadModule(module, image);
}

GPUPOOL_DRIVER_API CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                               unsigned int numOptions, CUjit_option* options,
                                               void** values) {
  // JIT options steer a compiler we do not run here; report empty logs to callers that ask.
  for (unsigned i = 0; options && values && i < numOptions; ++i) {
    if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
        options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      values[i] = nullptr;
    }
  }
  return loadModule(module, image);
}

GPUPOOL_DRIVER_API CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  return loadModule(module, fatCubin);
}

GPUPOOL_DRIVER_API CUresult cuModuleLoad(CUmodule* module, const char* path) {
  std::vector<uint8_t> bytes;
  if (CUresult r = readFile(path, &bytes); r != CUDA_SUCCESS) return r;
  return loadModule(module, bytes.data());
}

GPUPOOL_DRIVER_API CUresult cuModuleUnload(CUmodule h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ModuleObject* m = asModule(h);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  return unloadModule(m);
}

GPUPOOL_DRIVER_API CUresult cuModuleGetFunction(CUfunction* out, CUmodule h, const char* name) {
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ModuleObject* m = asModule(h);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  FunctionObject* f = nullptr;
  if (CUresult r = functionIn(m, name, &f); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuModuleGetGlobal_v2(CUdeviceptr* address, size_t* bytes, CUmodule h,
                                                 const char* name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ModuleObject* m = asModule(h);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  return globalIn(m, name, address, bytes);
}

// ---- Libraries and kernels ----

GPUPOOL_DRIVER_API CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*,
                                              void**, unsigned int, CUlibraryOption*, void**,
                                              unsigned int) {
  if (!library) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  auto* lib = new LibraryObject();
  if (CUresult r = snapshotImage(code, &lib->image, &lib->hash); r != CUDA_SUCCESS) {
    delete lib;
    return r;
  }
  registerObject(lib);
  {
    std::lock_guard lock(liveLibrariesMutex);
    liveLibraries().insert(lib);
  }
  *library = reinterpret_cast<CUlibrary>(lib);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* path,
                                                  CUjit_option* o, void** v, unsigned int n,
                                                  CUlibraryOption* lo, void** lv, unsigned int ln) {
  std::vector<uint8_t> bytes;
  if (CUresult r = readFile(path, &bytes); r != CUDA_SUCCESS) return r;
  return cuLibraryLoadData(library, bytes.data(), o, v, n, lo, lv, ln);
}

GPUPOOL_DRIVER_API CUresult cuLibraryUnload(CUlibrary h) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  LibraryObject* lib = asLibrary(h);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [ctx, m] : lib->modules) {
    if (asModule(reinterpret_cast<CUmodule>(m))) unloadModule(m);
  }
  for (auto& [name, k] : lib->kernels) {
    unregisterObject(k);
    delete k;
  }
  {
    std::lock_guard lock(liveLibrariesMutex);
    liveLibraries().erase(lib);
  }
  unregisterObject(lib);
  lib->tag = Tag::kDead;
  delete lib;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetKernel(CUkernel* out, CUlibrary h, const char* name) {
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  LibraryObject* lib = asLibrary(h);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  if (auto it = lib->kernels.find(name); it != lib->kernels.end()) {
    *out = reinterpret_cast<CUkernel>(it->second);
    return CUDA_SUCCESS;
  }
  auto* k = new KernelObject();
  k->library = lib;
  k->name = name;
  // Resolve now so a wrong name fails here, as on a real driver.
  ContextObject* ctx = nullptr;
  FunctionObject* f = nullptr;
  CUresult r = contextForLibraryUse(&ctx);
  if (r == CUDA_SUCCESS) r = kernelFunctionIn(k, ctx, &f);
  if (r != CUDA_SUCCESS) {
    delete k;
    return r;
  }
  registerObject(k);
  lib->kernels[name] = k;
  *out = reinterpret_cast<CUkernel>(k);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetModule(CUmodule* out, CUlibrary h) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  LibraryObject* lib = asLibrary(h);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  ContextObject* ctx = nullptr;
  if (CUresult r = contextForLibraryUse(&ctx); r != CUDA_SUCCESS) return r;
  ModuleObject* m = nullptr;
  if (CUresult r = libraryModuleIn(lib, ctx, &m); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetGlobal(CUdeviceptr* address, size_t* bytes, CUlibrary h,
                                               const char* name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  CUmodule m = nullptr;
  if (CUresult r = cuLibraryGetModule(&m, h); r != CUDA_SUCCESS) return r;
  return globalIn(asModule(m), name, address, bytes);
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetManaged(CUdeviceptr* address, size_t* bytes, CUlibrary h,
                                                const char* name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  CUmodule m = nullptr;
  if (CUresult r = cuLibraryGetModule(&m, h); r != CUDA_SUCCESS) return r;
  CUdeviceptr a = 0;
  size_t n = 0;
  bool managed = false;
  if (CUresult r = globalIn(asModule(m), name, &a, &n, &managed); r != CUDA_SUCCESS) return r;
  if (!managed) {
    return refuseCall(CUDA_ERROR_NOT_FOUND, std::string("cuLibraryGetManaged: '") + name +
                                                "' is a global, not a __managed__ variable");
  }
  if (address) *address = a;
  if (bytes) *bytes = n;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuKernelGetFunction(CUfunction* out, CUkernel h) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  KernelObject* k = asKernel(h);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  ContextObject* ctx = nullptr;
  if (CUresult r = contextForLibraryUse(&ctx); r != CUDA_SUCCESS) return r;
  FunctionObject* f = nullptr;
  if (CUresult r = kernelFunctionIn(k, ctx, &f); r != CUDA_SUCCESS) return r;
  *out = reinterpret_cast<CUfunction>(f);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuKernelGetLibrary(CUlibrary* out, CUkernel h) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  KernelObject* k = asKernel(h);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUlibrary>(k->library);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuKernelGetName(const char** name, CUkernel h) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  KernelObject* k = asKernel(h);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->name.c_str();
  return CUDA_SUCCESS;
}

// ---- Function and kernel attributes ----

namespace {

CUresult functionForDevice(CUfunction h, CUdevice dev, FunctionObject** f) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* ctx = nullptr;
  if (asKernel(reinterpret_cast<CUkernel>(h))) {
    ContextObject* current = DriverState::get().current();
    ctx = current && current->device == dev ? current : DriverState::get().primaryContext(dev);
    if (!ctx) return CUDA_ERROR_INVALID_DEVICE;
    if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
  }
  return resolveFunction(h, ctx, f);
}

CUresult getAttribute(int* value, CUfunction_attribute attribute, FunctionObject* f) {
  if (!value || attribute < 0 || attribute >= CU_FUNC_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  *value = static_cast<size_t>(attribute) < f->attributes.size() ? f->attributes[attribute] : 0;
  return CUDA_SUCCESS;
}

CUresult setAttribute(FunctionObject* f, CUfunction_attribute attribute, int value) {
  uint64_t context = f->module->context->remote, function = f->remote;
  CUresult r =
      f->module->context->server->call("cuFuncSetAttribute", [&](wire::Request::Builder b) {
        auto s = b.initFuncSetAttribute();
        s.setContext(context);
        s.setFunction(function);
        s.setAttribute(attribute);
        s.setValue(value);
      });
  if (r == CUDA_SUCCESS && static_cast<size_t>(attribute) < f->attributes.size()) {
    f->attributes[attribute] = value;
  }
  return r;
}

CUresult paramInfo(FunctionObject* f, size_t index, size_t* offset, size_t* size) {
  if (index >= f->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = f->params[index].first;
  if (size) *size = f->params[index].second;
  return CUDA_SUCCESS;
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute,
                                               CUfunction h) {
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  return getAttribute(value, attribute, f);
}

GPUPOOL_DRIVER_API CUresult cuFuncSetAttribute(CUfunction h, CUfunction_attribute attribute,
                                               int value) {
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  return setAttribute(f, attribute, value);
}

GPUPOOL_DRIVER_API CUresult cuKernelGetAttribute(int* value, CUfunction_attribute attribute,
                                                 CUkernel h, CUdevice dev) {
  FunctionObject* f = nullptr;
  if (CUresult r = functionForDevice(reinterpret_cast<CUfunction>(h), dev, &f); r != CUDA_SUCCESS) {
    return r;
  }
  return getAttribute(value, attribute, f);
}

GPUPOOL_DRIVER_API CUresult cuKernelSetAttribute(CUfunction_attribute attribute, int value,
                                                 CUkernel h, CUdevice dev) {
  FunctionObject* f = nullptr;
  if (CUresult r = functionForDevice(reinterpret_cast<CUfunction>(h), dev, &f); r != CUDA_SUCCESS) {
    return r;
  }
  return setAttribute(f, attribute, value);
}

GPUPOOL_DRIVER_API CUresult cuFuncSetCacheConfig(CUfunction h, CUfunc_cache) {
  FunctionObject* f = nullptr;
  return resolveFunction(h, nullptr, &f);  // a hint; nothing to configure remotely
}

GPUPOOL_DRIVER_API CUresult cuKernelSetCacheConfig(CUkernel h, CUfunc_cache, CUdevice dev) {
  FunctionObject* f = nullptr;
  return functionForDevice(reinterpret_cast<CUfunction>(h), dev, &f);
}

GPUPOOL_DRIVER_API CUresult cuFuncGetParamInfo(CUfunction h, size_t index, size_t* offset,
                                               size_t* size) {
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  return paramInfo(f, index, offset, size);
}

GPUPOOL_DRIVER_API CUresult cuKernelGetParamInfo(CUkernel h, size_t index, size_t* offset,
                                                 size_t* size) {
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(reinterpret_cast<CUfunction>(h), nullptr, &f);
      r != CUDA_SUCCESS) {
    return r;
  }
  return paramInfo(f, index, offset, size);
}

GPUPOOL_DRIVER_API CUresult cuFuncGetName(const char** name, CUfunction h) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  *name = f->name.c_str();
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuFuncGetModule(CUmodule* module, CUfunction h) {
  if (!module) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = asFunction(h);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *module = reinterpret_cast<CUmodule>(f->module);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction h) {
  if (!state) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuFuncLoad(CUfunction h) {
  FunctionObject* f = nullptr;
  return resolveFunction(h, nullptr, &f);
}

// ---- Occupancy ----

namespace {

CUresult occupancy(int* numBlocks, CUfunction h, int blockSize, size_t dynamicSharedBytes,
                   unsigned flags) {
  if (!numBlocks) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  uint64_t context = f->module->context->remote, function = f->remote;
  return f->module->context->server->call(
      "cuOccupancyMaxActiveBlocksPerMultiprocessor",
      [&](wire::Request::Builder b) {
        auto o = b.initOccupancy();
        o.setContext(context);
        o.setFunction(function);
        o.setBlockSize(blockSize);
        o.setDynamicSharedBytes(dynamicSharedBytes);
        o.setFlags(flags);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *numBlocks = static_cast<int>(reply.getValue());
        return CUDA_SUCCESS;
      });
}

// cuOccupancyMaxActiveClusters and cuOccupancyMaxPotentialClusterSize: the launch `config`
// describes, asked of the server's driver. A kernel handle's context is the stream's, else the
// current one, as the driver takes it.
CUresult clusterOccupancy(const char* call, wire::Request::OccupancyQuery query, int* value,
                          CUfunction h, const CUlaunchConfig* config) {
  if (!value || !config || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ContextObject* ctx = nullptr;
  if (config->hStream) {
    CaptureScope queryOnly;  // nothing is enqueued: a capturing stream is no obstacle
    uint64_t stream = 0;
    if (CUresult r = resolveStream(config->hStream, &ctx, &stream); r != CUDA_SUCCESS) return r;
  }
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, ctx, &f); r != CUDA_SUCCESS) return r;
  ContextObject* owner = f->module->context;
  if (!DriverState::get().device(owner->device)->attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH)) {
    return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                      std::string(call) +
                          ": thread-block clusters are not run by this device "
                          "(it reports CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH 0)");
  }
  CUlaunchAttributeValue cluster{};
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute& a = config->attrs[i];
    if (rawEnumValue(a.id) == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) cluster = a.value;
  }
  auto setDim = [](wire::Dim3::Builder d, unsigned x, unsigned y, unsigned z) {
    d.setX(x);
    d.setY(y);
    d.setZ(z);
  };
  return owner->server->call(
      call,
      [&](wire::Request::Builder b) {
        auto o = b.initOccupancy();
        o.setContext(owner->remote);
        o.setFunction(f->remote);
        o.setQuery(query);
        o.setDynamicSharedBytes(config->sharedMemBytes);
        setDim(o.initGrid(), config->gridDimX, config->gridDimY, config->gridDimZ);
        setDim(o.initBlock(), config->blockDimX, config->blockDimY, config->blockDimZ);
        setDim(o.initCluster(), cluster.clusterDim.x, cluster.clusterDim.y, cluster.clusterDim.z);
      },
      {},
      [&](wire::Response::Reader reply, ReplyBulk&) {
        *value = static_cast<int>(reply.getValue());
        return CUDA_SUCCESS;
      });
}

}  // namespace

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxActiveClusters(int* numClusters, CUfunction h,
                                                         const CUlaunchConfig* config) {
  return clusterOccupancy("cuOccupancyMaxActiveClusters",
                          wire::Request::OccupancyQuery::ACTIVE_CLUSTERS, numClusters, h, config);
}

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxPotentialClusterSize(int* clusterSize, CUfunction h,
                                                               const CUlaunchConfig* config) {
  return clusterOccupancy("cuOccupancyMaxPotentialClusterSize",
                          wire::Request::OccupancyQuery::POTENTIAL_CLUSTER_SIZE, clusterSize, h,
                          config);
}

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks,
                                                                        CUfunction h, int blockSize,
                                                                        size_t dynamicSmem) {
  return occupancy(numBlocks, h, blockSize, dynamicSmem, 0);
}

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* numBlocks, CUfunction h, int blockSize, size_t dynamicSmem, unsigned int flags) {
  return occupancy(numBlocks, h, blockSize, dynamicSmem, flags);
}

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int* minGridSize, int* blockSize, CUfunction h, CUoccupancyB2DSize blockSizeToDynamicSMemSize,
    size_t dynamicSMemSize, int blockSizeLimit, unsigned int flags) {
  if (!minGridSize || !blockSize) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  const DeviceSnapshot* d = DriverState::get().device(f->module->context->device);
  // cudaOccMaxPotentialOccupancyBlockSize (cuda_occupancy.h): from the largest block size down in
  // warp steps, keeping a size only when it holds strictly more threads, so that among the sizes
  // of the best occupancy the largest wins; stops once the multiprocessor is full.
  int limit = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (!f->attributes.empty()) {
    limit = std::min(limit, f->attributes[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK]);
  }
  if (blockSizeLimit > 0) limit = std::min(limit, blockSizeLimit);
  const int warp = std::max(1, d->attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE));
  const int fullOccupancy = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  int bestSize = 0, bestThreads = 0, bestBlocks = 0;
  for (int aligned = (limit + warp - 1) / warp * warp; aligned > 0 && bestThreads < fullOccupancy;
       aligned -= warp) {
    const int size = std::min(limit, aligned);
    size_t smem = blockSizeToDynamicSMemSize ? blockSizeToDynamicSMemSize(size) : dynamicSMemSize;
    int blocks = 0;
    if (CUresult r = occupancy(&blocks, h, size, smem, flags); r != CUDA_SUCCESS) return r;
    if (blocks * size > bestThreads) {
      bestThreads = blocks * size;
      bestSize = size;
      bestBlocks = blocks;
    }
  }
  *blockSize = bestSize;
  // A green context's kernels have its partition's SMs only.
  const unsigned greenSms = f->module->context->smCount;
  *minGridSize = bestBlocks * (greenSms ? static_cast<int>(greenSms)
                                        : d->attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize,
                                                             CUfunction h, CUoccupancyB2DSize b2d,
                                                             size_t dynamicSMemSize,
                                                             int blockSizeLimit) {
  return cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize, blockSize, h, b2d, dynamicSMemSize,
                                                   blockSizeLimit, 0);
}

GPUPOOL_DRIVER_API CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t* dynamicSmemSize,
                                                                    CUfunction h, int numBlocks,
                                                                    int blockSize) {
  if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
  FunctionObject* f = nullptr;
  if (CUresult r = resolveFunction(h, nullptr, &f); r != CUDA_SUCCESS) return r;
  const DeviceSnapshot* d = DriverState::get().device(f->module->context->device);
  int64_t perSm = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  int64_t reserved = d->attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
  int64_t staticBytes = f->attributes.size() > CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
                            ? f->attributes[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES]
                            : 0;
  int64_t optin = d->attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  int64_t available = perSm / numBlocks - reserved - staticBytes;
  available = std::min(available, optin - staticBytes);
  *dynamicSmemSize = static_cast<size_t>(std::max<int64_t>(available, 0));
  return CUDA_SUCCESS;
}
