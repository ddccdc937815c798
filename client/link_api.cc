// Linking (cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkDestroy) and module
// introspection (cuModuleGetFunctionCount, cuModuleEnumerateFunctions, cuLibraryGetKernelCount,
// cuLibraryEnumerateKernels).
//
// A link state gathers its inputs here; cuLinkComplete sends them all to the server, whose backend
// links them (the emu merges their PTX into one module, the cuda backend runs the driver's
// linker) and answers with the image and the logs. The image stays with the link state until
// cuLinkDestroy, as the driver's does, and loads through cuModuleLoadData on the same server.
// Options the caller passes as pointers (the log buffers and their sizes, the wall time) are
// served here: the logs are written into the caller's buffers and the sizes written back into
// its option values, as the driver does.
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "client_log.h"
#include "driver_export.h"
#include "driver_state.h"
#include "module_resolution.h"

using namespace gpupool::client;
using gpupool::transport::ConstBuffer;

namespace gpupool::client {
namespace {

struct LinkInputCopy {
  CUjitInputType type = CU_JIT_INPUT_PTX;
  std::string name;
  std::vector<uint8_t> bytes;
};

struct LinkStateObject {
  Tag tag = Tag::kLinkState;
  ContextObject* context = nullptr;
  // The caller's option arrays: outputs are written back into `values` at cuLinkComplete.
  std::vector<CUjit_option> keys;
  void** values = nullptr;
  char* infoLog = nullptr;
  size_t infoLogCapacity = 0;
  char* errorLog = nullptr;
  size_t errorLogCapacity = 0;
  std::vector<std::pair<CUjit_option, uint64_t>> scalarOptions;  // sent to the server
  std::vector<LinkInputCopy> inputs;
  std::vector<uint8_t> image;  // cuLinkComplete's result, valid until cuLinkDestroy
};

LinkStateObject* asLinkState(CUlinkState h) {
  if (!h || !isRegistered(h)) return nullptr;
  auto* state = reinterpret_cast<LinkStateObject*>(h);
  return state->tag == Tag::kLinkState ? state : nullptr;
}

// Options with a plain value the backend's linker takes as given.
bool isScalarOption(CUjit_option o) {
  switch (o) {
    case CU_JIT_MAX_REGISTERS:
    case CU_JIT_THREADS_PER_BLOCK:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET:
    case CU_JIT_FALLBACK_STRATEGY:
    case CU_JIT_GENERATE_DEBUG_INFO:
    case CU_JIT_LOG_VERBOSE:
    case CU_JIT_GENERATE_LINE_INFO:
    case CU_JIT_CACHE_MODE:
    case CU_JIT_POSITION_INDEPENDENT_CODE:
    case CU_JIT_MIN_CTA_PER_SM:
    case CU_JIT_MAX_THREADS_PER_BLOCK:
    case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
      return true;
    default:
      return false;
  }
}

CUresult readOptions(LinkStateObject* state, unsigned count, CUjit_option* keys, void** values) {
  if (count && (!keys || !values)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    CUjit_option o = keys[i];
    auto value = reinterpret_cast<uintptr_t>(values[i]);
    switch (o) {
      case CU_JIT_INFO_LOG_BUFFER:
        state->infoLog = static_cast<char*>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        state->infoLogCapacity = static_cast<unsigned>(value);
        break;
      case CU_JIT_ERROR_LOG_BUFFER:
        state->errorLog = static_cast<char*>(values[i]);
        break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        state->errorLogCapacity = static_cast<unsigned>(value);
        break;
      case CU_JIT_WALL_TIME:              // an output, written at cuLinkComplete
      case CU_JIT_TARGET_FROM_CUCONTEXT:  // the default: the link targets the context's device
        break;
      case CU_JIT_GLOBAL_SYMBOL_NAMES:
      case CU_JIT_GLOBAL_SYMBOL_ADDRESSES:
      case CU_JIT_GLOBAL_SYMBOL_COUNT:
        return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                          "cuLinkCreate: CU_JIT_GLOBAL_SYMBOL_* (resolving externs to given "
                          "addresses) is not supported by gpupool");
      case CU_JIT_LTO:
        return refuseCall(CUDA_ERROR_NOT_SUPPORTED,
                          "cuLinkCreate: CU_JIT_LTO (link-time optimization of NVVM IR) is not "
                          "supported by gpupool; link PTX or cubins");
      case CU_JIT_FTZ:
      case CU_JIT_PREC_DIV:
      case CU_JIT_PREC_SQRT:
      case CU_JIT_FMA:
      case CU_JIT_REFERENCED_KERNEL_NAMES:
      case CU_JIT_REFERENCED_KERNEL_COUNT:
      case CU_JIT_REFERENCED_VARIABLE_NAMES:
      case CU_JIT_REFERENCED_VARIABLE_COUNT:
      case CU_JIT_OPTIMIZE_UNUSED_DEVICE_VARIABLES:
        break;  // LTO-only and deprecated: the driver ignores them without CU_JIT_LTO
      default:
        if (!isScalarOption(o)) {
          return refuseCall(CUDA_ERROR_INVALID_VALUE,
                            "cuLinkCreate: unknown CUjit_option " + std::to_string(o));
        }
        state->scalarOptions.emplace_back(o, value);
    }
  }
  return CUDA_SUCCESS;
}

// Writes `log` into the caller's buffer (NUL-terminated, cut to fit) and the bytes written,
// terminator included, back into the size option's value.
void deliverLog(LinkStateObject* state, const std::string& log, char* buffer, size_t capacity,
                CUjit_option sizeOption) {
  size_t written = 0;
  if (buffer && capacity) {
    size_t n = std::min(log.size(), capacity - 1);
    std::memcpy(buffer, log.data(), n);
    buffer[n] = '\0';
    written = n ? n + 1 : 0;
  }
  for (size_t i = 0; i < state->keys.size(); ++i) {
    if (state->keys[i] == sizeOption) {
      state->values[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(written));
    }
  }
}

void deliverWallTime(LinkStateObject* state, float milliseconds) {
  for (size_t i = 0; i < state->keys.size(); ++i) {
    if (state->keys[i] == CU_JIT_WALL_TIME) {
      state->values[i] = nullptr;
      std::memcpy(&state->values[i], &milliseconds, sizeof milliseconds);
    }
  }
}

struct LinkReply {
  CUresult result = CUDA_SUCCESS;
  std::string infoLog, errorLog;
};

// Sends `inputs` to be linked (cuLinkComplete; the image goes to state->image) or, with
// checkOnly, the one input cuLinkAddData adds to be checked.
CUresult linkOnServer(LinkStateObject* state, std::span<const LinkInputCopy> inputs, bool checkOnly,
                      LinkReply* out) {
  ContextObject* ctx = state->context;
  if (CUresult r = DriverState::get().ensureRemote(ctx); r != CUDA_SUCCESS) return r;
  std::vector<ConstBuffer> bulk;
  for (const auto& in : inputs) bulk.push_back({in.bytes.data(), in.bytes.size()});
  std::vector<uint8_t> image;
  CUresult r = ctx->server->call(
      checkOnly ? "cuLinkAddData" : "cuLinkComplete",
      [&](wire::Request::Builder b) {
        auto l = b.initModuleLink();
        l.setContext(ctx->remote);
        auto job = checkOnly ? l.initAddInput() : l.initLink();
        auto wireInputs = job.initInputs(static_cast<unsigned>(inputs.size()));
        for (unsigned i = 0; i < inputs.size(); ++i) {
          wireInputs[i].setType(inputs[i].type);
          wireInputs[i].setName(inputs[i].name);
          wireInputs[i].setBytes(inputs[i].bytes.size());
        }
        auto options = job.initOptions(static_cast<unsigned>(state->scalarOptions.size()));
        for (unsigned i = 0; i < state->scalarOptions.size(); ++i) {
          options[i].setOption(state->scalarOptions[i].first);
          options[i].setValue(state->scalarOptions[i].second);
        }
      },
      bulk,
      [&](wire::Response::Reader reply, ReplyBulk& replyBulk) {
        uint64_t sizes[3] = {};
        if (!replyBulk.read(sizes, sizeof sizes) ||
            sizes[0] + sizes[1] + sizes[2] != replyBulk.remaining()) {
          return CUDA_ERROR_UNKNOWN;
        }
        out->infoLog.resize(sizes[0]);
        out->errorLog.resize(sizes[1]);
        image.resize(sizes[2]);
        if ((sizes[0] && !replyBulk.read(out->infoLog.data(), sizes[0])) ||
            (sizes[1] && !replyBulk.read(out->errorLog.data(), sizes[1])) ||
            (sizes[2] && !replyBulk.read(image.data(), sizes[2]))) {
          return CUDA_ERROR_UNKNOWN;
        }
        out->result = static_cast<CUresult>(reply.getValue());
        return CUDA_SUCCESS;
      });
  if (r == CUDA_SUCCESS && !checkOnly) state->image = std::move(image);
  return r;
}

// Hands the logs to the caller's buffers, as the driver does after each step of a link.
void deliverLogs(LinkStateObject* state, const LinkReply& reply) {
  deliverLog(state, reply.infoLog, state->infoLog, state->infoLogCapacity,
             CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
  deliverLog(state, reply.errorLog, state->errorLog, state->errorLogCapacity,
             CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
}

// Keeps a copy of the input once the server found that it compiles on its own (the driver
// compiles PTX as it is added, so its errors come from cuLinkAddData).
CUresult addInput(LinkStateObject* state, CUjitInputType type, const uint8_t* data, size_t size,
                  const char* name, unsigned numOptions, CUjit_option* options,
                  void** optionValues) {
  if (!data || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (type < CU_JIT_INPUT_CUBIN || type >= CU_JIT_NUM_INPUT_TYPES) return CUDA_ERROR_INVALID_VALUE;
  if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
  LinkInputCopy in;
  in.type = type;
  in.name = name ? name : "";
  in.bytes.assign(data, data + size);
  if (type == CU_JIT_INPUT_PTX && in.bytes.back() != 0) in.bytes.push_back(0);
  LinkReply reply;
  if (CUresult r = linkOnServer(state, std::span<const LinkInputCopy>(&in, 1), true, &reply);
      r != CUDA_SUCCESS) {
    return r;
  }
  deliverLogs(state, reply);
  if (reply.result != CUDA_SUCCESS) {
    if (logLevel() >= 1) logLine("cuLinkAddData(" + in.name + ") failed: " + reply.errorLog);
    return reply.result;
  }
  state->inputs.push_back(std::move(in));
  return CUDA_SUCCESS;
}

// The kernels of module m, by name, from the server.
CUresult kernelNames(ModuleObject* m, std::vector<std::string>* names) {
  if (CUresult r = DriverState::get().ensureRemote(m->context); r != CUDA_SUCCESS) return r;
  uint64_t context = m->context->remote, module = m->remote;
  return m->context->server->call(
      "cuModuleEnumerateFunctions",
      [&](wire::Request::Builder b) {
        auto l = b.initModuleLink();
        l.setContext(context);
        l.setFunctionNames(module);
      },
      {},
      [&](wire::Response::Reader, ReplyBulk& bulk) {
        std::string all(bulk.remaining(), '\0');
        if (!bulk.read(all.data(), all.size())) return CUDA_ERROR_UNKNOWN;
        for (size_t at = 0; at < all.size();) {
          size_t end = all.find('\0', at);
          if (end == std::string::npos) end = all.size();
          names->push_back(all.substr(at, end - at));
          at = end + 1;
        }
        return CUDA_SUCCESS;
      });
}

CUresult libraryKernelNames(CUlibrary h, std::vector<std::string>* names) {
  CUmodule m = nullptr;  // the library's module in the context it is used in
  if (CUresult r = cuLibraryGetModule(&m, h); r != CUDA_SUCCESS) return r;
  return kernelNames(reinterpret_cast<ModuleObject*>(m), names);
}

}  // namespace
}  // namespace gpupool::client

// ---- Linking ----

GPUPOOL_DRIVER_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option* options,
                                            void** optionValues, CUlinkState* stateOut) {
  if (!stateOut) return CUDA_ERROR_INVALID_VALUE;
  ContextObject* ctx = nullptr;
  if (CUresult r = currentRemoteContext(&ctx); r != CUDA_SUCCESS) return r;
  auto* state = new LinkStateObject();
  state->context = ctx;
  if (CUresult r = readOptions(state, numOptions, options, optionValues); r != CUDA_SUCCESS) {
    delete state;
    return r;
  }
  if (numOptions) state->keys.assign(options, options + numOptions);
  state->values = optionValues;
  registerObject(state);
  *stateOut = reinterpret_cast<CUlinkState>(state);
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLinkAddData_v2(CUlinkState h, CUjitInputType type, void* data,
                                             size_t size, const char* name, unsigned int numOptions,
                                             CUjit_option* options, void** optionValues) {
  LinkStateObject* state = asLinkState(h);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  return addInput(state, type, static_cast<const uint8_t*>(data), size, name, numOptions, options,
                  optionValues);
}

GPUPOOL_DRIVER_API CUresult cuLinkAddFile_v2(CUlinkState h, CUjitInputType type, const char* path,
                                             unsigned int numOptions, CUjit_option* options,
                                             void** optionValues) {
  LinkStateObject* state = asLinkState(h);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  std::ifstream in(path, std::ios::binary);
  if (!in) return CUDA_ERROR_FILE_NOT_FOUND;
  std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.empty()) return CUDA_ERROR_INVALID_VALUE;
  return addInput(state, type, bytes.data(), bytes.size(), path, numOptions, options, optionValues);
}

// The CUDA 5.5 ABI of the three (what cuGetProcAddress gives for versions before 6.5) has the same
// parameters.
GPUPOOL_DRIVER_API CUresult cuLinkCreate(unsigned int numOptions, CUjit_option* options,
                                         void** optionValues, CUlinkState* stateOut) {
  return cuLinkCreate_v2(numOptions, options, optionValues, stateOut);
}
GPUPOOL_DRIVER_API CUresult cuLinkAddData(CUlinkState h, CUjitInputType type, void* data,
                                          size_t size, const char* name, unsigned int numOptions,
                                          CUjit_option* options, void** optionValues) {
  return cuLinkAddData_v2(h, type, data, size, name, numOptions, options, optionValues);
}
GPUPOOL_DRIVER_API CUresult cuLinkAddFile(CUlinkState h, CUjitInputType type, const char* path,
                                          unsigned int numOptions, CUjit_option* options,
                                          void** optionValues) {
  return cuLinkAddFile_v2(h, type, path, numOptions, options, optionValues);
}

GPUPOOL_DRIVER_API CUresult cuLinkComplete(CUlinkState h, void** cubinOut, size_t* sizeOut) {
  LinkStateObject* state = asLinkState(h);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubinOut || !sizeOut) return CUDA_ERROR_INVALID_VALUE;
  if (state->inputs.empty()) return CUDA_ERROR_INVALID_VALUE;
  auto started = std::chrono::steady_clock::now();
  state->image.clear();
  LinkReply reply;
  if (CUresult r = linkOnServer(state, state->inputs, false, &reply); r != CUDA_SUCCESS) return r;
  deliverLogs(state, reply);
  deliverWallTime(
      state,
      std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - started).count());
  if (reply.result != CUDA_SUCCESS) {
    if (logLevel() >= 1) logLine("cuLinkComplete failed: " + reply.errorLog);
    state->image.clear();
    return reply.result;
  }
  *cubinOut = state->image.data();
  *sizeOut = state->image.size();
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLinkDestroy(CUlinkState h) {
  LinkStateObject* state = asLinkState(h);
  if (!state) return CUDA_ERROR_INVALID_HANDLE;
  unregisterObject(state);
  state->tag = Tag::kDead;
  delete state;
  return CUDA_SUCCESS;
}

// ---- Module and library introspection ----

GPUPOOL_DRIVER_API CUresult cuModuleGetFunctionCount(unsigned int* count, CUmodule h) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ModuleObject* m = asModule(h);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<std::string> names;
  if (CUresult r = kernelNames(m, &names); r != CUDA_SUCCESS) return r;
  *count = static_cast<unsigned>(names.size());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuModuleEnumerateFunctions(CUfunction* functions,
                                                       unsigned int numFunctions, CUmodule h) {
  if (!functions && numFunctions) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  ModuleObject* m = asModule(h);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<std::string> names;
  if (CUresult r = kernelNames(m, &names); r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < names.size() && i < numFunctions; ++i) {
    FunctionObject* f = nullptr;
    if (CUresult r = functionIn(m, names[i], &f); r != CUDA_SUCCESS) return r;
    functions[i] = reinterpret_cast<CUfunction>(f);
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetKernelCount(unsigned int* count, CUlibrary h) {
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> names;
  if (CUresult r = libraryKernelNames(h, &names); r != CUDA_SUCCESS) return r;
  *count = static_cast<unsigned>(names.size());
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels,
                                                      CUlibrary h) {
  if (!kernels && numKernels) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::string> names;
  if (CUresult r = libraryKernelNames(h, &names); r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < names.size() && i < numKernels; ++i) {
    if (CUresult r = cuLibraryGetKernel(&kernels[i], h, names[i].c_str()); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

GPUPOOL_DRIVER_API CUresult cuLibraryGetUnifiedFunction(void** fptr, CUlibrary h,
                                                        const char* symbol) {
  if (!fptr || !symbol) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  if (!asLibrary(h)) return CUDA_ERROR_INVALID_HANDLE;
  // A unified function is device code the host calls through a host pointer, which needs the GPU
  // in the calling process's address space; the driver answers NOT_FOUND where no device has
  // unified function pointers, and a pool GPU is never in the client's address space.
  *fptr = nullptr;
  return refuseCall(CUDA_ERROR_NOT_FOUND,
                    std::string("cuLibraryGetUnifiedFunction(") + symbol +
                        "): no unified function pointers: the GPU is not in this process");
}
