// GPU core dump settings (cuCoredump*). No GPU core dump is ever written for a pool client: the
// GPU runs in gpupoold on another host, whose dumps are the operator's. So the settings that would
// write one (CU_COREDUMP_ENABLE_ON_EXCEPTION, CU_COREDUMP_ENABLE_USER_TRIGGER, and the context
// flags CU_CTX_COREDUMP_ENABLE and CU_CTX_USER_COREDUMP_ENABLE, see context_api.cc) are refused
// when turned on. The settings that only shape a dump (file, pipe, generation flags and their two
// deprecated views, lightweight and trigger-host) are kept and read back, globally and per
// context, as NVIDIA's driver keeps them while dumps are off.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "client_log.h"
#include "context_hooks.h"
#include "driver_export.h"
#include "driver_state.h"
#include "raw_enum.h"

using namespace gpupool::client;

namespace {

// cuda.h: a file or pipe name is a string of up to 1023 characters.
constexpr size_t kCoredumpNameBytes = 1024;
constexpr int kValidGenerationFlags =
    CU_COREDUMP_SKIP_NONRELOCATED_ELF_IMAGES | CU_COREDUMP_SKIP_GLOBAL_MEMORY |
    CU_COREDUMP_SKIP_SHARED_MEMORY | CU_COREDUMP_SKIP_LOCAL_MEMORY | CU_COREDUMP_SKIP_ABORT |
    CU_COREDUMP_SKIP_CONSTBANK_MEMORY;

std::string defaultName(const char* prefix) {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  return std::string(prefix) + host + "." + std::to_string(getpid());
}

// One scope's settings: the process's (global) or one context's. A context's unset values are
// the global ones.
struct Settings {
  std::optional<int> generationFlags;
  std::optional<std::string> file;
};

class CoredumpSettings {
 public:
  static CoredumpSettings& get() {
    static CoredumpSettings settings;
    return settings;
  }

  // A destroyed context's settings go with it (a new context may get the same address).
  void forget(const ContextObject* context) {
    std::lock_guard lock(mutex_);
    perContext_.erase(context);
  }

  CUresult read(int attribute, const ContextObject* context, void* value, size_t* size) {
    if (!size) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(mutex_);
    const Settings* local = context ? localOf(context) : nullptr;
    switch (attribute) {
      case CU_COREDUMP_ENABLE_ON_EXCEPTION:
      case CU_COREDUMP_ENABLE_USER_TRIGGER:
        return answerBool(false, value, size);  // never on: see the file comment
      case CU_COREDUMP_TRIGGER_HOST:
        return answerBool(!(flags(local) & CU_COREDUMP_SKIP_ABORT), value, size);
      case CU_COREDUMP_LIGHTWEIGHT:
        return answerBool(
            (flags(local) & CU_COREDUMP_LIGHTWEIGHT_FLAGS) == CU_COREDUMP_LIGHTWEIGHT_FLAGS, value,
            size);
      case CU_COREDUMP_GENERATION_FLAGS: {
        if (!value) return *size = sizeof(int), CUDA_SUCCESS;
        if (*size < sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
        int f = flags(local);
        std::memcpy(value, &f, sizeof f);
        return CUDA_SUCCESS;
      }
      case CU_COREDUMP_FILE:
        return answerName(local && local->file ? *local->file : file(), value, size);
      case CU_COREDUMP_PIPE:
        return answerName(pipe(), value, size);
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }

  CUresult write(const char* call, int attribute, ContextObject* context, void* value,
                 size_t* size) {
    if (!size) return CUDA_ERROR_INVALID_VALUE;
    if (!value) {  // the query form: the size the value must have
      switch (attribute) {
        case CU_COREDUMP_ENABLE_ON_EXCEPTION:
        case CU_COREDUMP_ENABLE_USER_TRIGGER:
        case CU_COREDUMP_TRIGGER_HOST:
        case CU_COREDUMP_LIGHTWEIGHT:
          return *size = sizeof(bool), CUDA_SUCCESS;
        case CU_COREDUMP_GENERATION_FLAGS:
          return *size = sizeof(int), CUDA_SUCCESS;
        case CU_COREDUMP_FILE:
        case CU_COREDUMP_PIPE:
          return *size = kCoredumpNameBytes, CUDA_SUCCESS;
        default:
          return CUDA_ERROR_INVALID_VALUE;
      }
    }
    std::lock_guard lock(mutex_);
    Settings& scope = context ? localOrNew(context) : global_;
    const Settings* local = context ? &scope : nullptr;
    switch (attribute) {
      case CU_COREDUMP_ENABLE_ON_EXCEPTION:
      case CU_COREDUMP_ENABLE_USER_TRIGGER: {
        if (attribute == CU_COREDUMP_ENABLE_USER_TRIGGER && context) {
          return refuseCall(CUDA_ERROR_INVALID_VALUE,
                            "cuCoredumpSetAttribute: CU_COREDUMP_ENABLE_USER_TRIGGER cannot be set "
                            "per context (cuda.h); use cuCoredumpSetAttributeGlobal");
        }
        std::optional<bool> on = takeBool(value, *size);
        if (!on) return CUDA_ERROR_INVALID_VALUE;
        if (!*on) return CUDA_SUCCESS;  // off is what it is
        return refuseCall(context ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_PERMITTED,
                          std::string(call) +
                              ": GPU core dumps are not written for a pool client (its GPU "
                              "runs in gpupoold on the server); debug on a local GPU, or ask the "
                              "pool's operator");
      }
      case CU_COREDUMP_TRIGGER_HOST:
      case CU_COREDUMP_LIGHTWEIGHT: {
        std::optional<bool> on = takeBool(value, *size);
        if (!on) return CUDA_ERROR_INVALID_VALUE;
        int bits = attribute == CU_COREDUMP_TRIGGER_HOST ? CU_COREDUMP_SKIP_ABORT
                                                         : CU_COREDUMP_LIGHTWEIGHT_FLAGS;
        // Trigger-host on means abort() is not skipped; lightweight on means the skips are set.
        bool set = attribute == CU_COREDUMP_TRIGGER_HOST ? !*on : *on;
        int f = flags(local);
        scope.generationFlags = set ? (f | bits) : (f & ~bits);
        return CUDA_SUCCESS;
      }
      case CU_COREDUMP_GENERATION_FLAGS: {
        if (*size < sizeof(int)) return CUDA_ERROR_INVALID_VALUE;
        int f;
        std::memcpy(&f, value, sizeof f);
        if (f & ~kValidGenerationFlags) return CUDA_ERROR_INVALID_VALUE;
        scope.generationFlags = f;
        return CUDA_SUCCESS;
      }
      case CU_COREDUMP_FILE:
      case CU_COREDUMP_PIPE: {
        bool isFile = attribute == CU_COREDUMP_FILE;
        if (!isFile && context) {
          return refuseCall(CUDA_ERROR_INVALID_VALUE,
                            "cuCoredumpSetAttribute: CU_COREDUMP_PIPE cannot be set per context "
                            "(cuda.h); use cuCoredumpSetAttributeGlobal");
        }
        std::optional<std::string> name = takeName(value, *size);
        if (!name) return CUDA_ERROR_INVALID_VALUE;
        // cuda.h: names from the environment at initialization take permanent precedence.
        if (std::getenv(isFile ? "CUDA_COREDUMP_FILE" : "CUDA_COREDUMP_PIPE")) {
          return refuseCall(CUDA_ERROR_NOT_PERMITTED,
                            std::string(call) + ": " +
                                (isFile ? "CUDA_COREDUMP_FILE" : "CUDA_COREDUMP_PIPE") +
                                " is set in the environment, which takes precedence");
        }
        (isFile ? scope.file : pipe_) = std::move(*name);
        return CUDA_SUCCESS;
      }
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }

 private:
  int flags(const Settings* local) const {
    if (local && local->generationFlags) return *local->generationFlags;
    return global_.generationFlags.value_or(CU_COREDUMP_DEFAULT_FLAGS);
  }
  std::string file() const {
    if (const char* env = std::getenv("CUDA_COREDUMP_FILE")) return env;
    // Unset, the file reads empty (observed on driver 580.159.04, H200), though a dump would go to
    // core.cuda.HOSTNAME.PID as cuda.h says.
    return global_.file.value_or("");
  }
  std::string pipe() const {
    if (const char* env = std::getenv("CUDA_COREDUMP_PIPE")) return env;
    return pipe_.value_or(defaultName("corepipe.cuda."));
  }
  const Settings* localOf(const ContextObject* context) const {
    auto it = perContext_.find(context);
    return it == perContext_.end() ? nullptr : &it->second;
  }
  Settings& localOrNew(const ContextObject* context) { return perContext_[context]; }

  static CUresult answerBool(bool on, void* value, size_t* size) {
    if (!value) return *size = sizeof(bool), CUDA_SUCCESS;
    if (*size < sizeof(bool)) return CUDA_ERROR_INVALID_VALUE;
    *static_cast<bool*>(value) = on;
    return CUDA_SUCCESS;
  }
  static CUresult answerName(const std::string& name, void* value, size_t* size) {
    if (!value) return *size = kCoredumpNameBytes, CUDA_SUCCESS;
    if (*size < name.size() + 1) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(value, name.c_str(), name.size() + 1);
    return CUDA_SUCCESS;
  }
  static std::optional<bool> takeBool(const void* value, size_t size) {
    if (size < sizeof(bool)) return std::nullopt;
    unsigned char byte;
    std::memcpy(&byte, value, 1);  // read as a byte: a caller's bool may hold any value
    return byte != 0;
  }
  // A NUL-terminated name within size bytes and at most 1023 characters.
  static std::optional<std::string> takeName(const void* value, size_t size) {
    const char* text = static_cast<const char*>(value);
    size_t length = strnlen(text, std::min(size, kCoredumpNameBytes));
    if (length == 0 || length >= size || length >= kCoredumpNameBytes) return std::nullopt;
    return std::string(text, length);
  }

  std::mutex mutex_;
  Settings global_;
  std::optional<std::string> pipe_;
  // Keyed by the context object; dropped when the context is destroyed (forget).
  std::map<const ContextObject*, Settings> perContext_;
};

CUresult currentContext(ContextObject** out) {
  if (CUresult r = requireInit(); r != CUDA_SUCCESS) return r;
  *out = DriverState::get().current();
  return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

void gpupool::client::forgetCoredumpSettings(CUcontext context) {
  CoredumpSettings::get().forget(reinterpret_cast<const ContextObject*>(context));
}

GPUPOOL_DRIVER_API CUresult cuCoredumpGetAttribute(CUcoredumpSettings attribute, void* value,
                                                   size_t* size) {
  ContextObject* context = nullptr;
  if (CUresult r = currentContext(&context); r != CUDA_SUCCESS) return r;
  return CoredumpSettings::get().read(rawEnumValue(attribute), context, value, size);
}

GPUPOOL_DRIVER_API CUresult cuCoredumpGetAttributeGlobal(CUcoredumpSettings attribute, void* value,
                                                         size_t* size) {
  return CoredumpSettings::get().read(rawEnumValue(attribute), nullptr, value, size);
}

GPUPOOL_DRIVER_API CUresult cuCoredumpSetAttribute(CUcoredumpSettings attribute, void* value,
                                                   size_t* size) {
  ContextObject* context = nullptr;
  if (CUresult r = currentContext(&context); r != CUDA_SUCCESS) return r;
  return CoredumpSettings::get().write("cuCoredumpSetAttribute", rawEnumValue(attribute), context,
                                       value, size);
}

GPUPOOL_DRIVER_API CUresult cuCoredumpSetAttributeGlobal(CUcoredumpSettings attribute, void* value,
                                                         size_t* size) {
  return CoredumpSettings::get().write("cuCoredumpSetAttributeGlobal", rawEnumValue(attribute),
                                       nullptr, value, size);
}
