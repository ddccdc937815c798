// Modules: loading an image (from the server's cache by hash, or sent with the request), the
// per-session module limit, unloading, and looking up functions and globals.
#include <cstring>

#include "server/handlers/request_table.h"
#include "server/pool_server.h"

namespace gpupool::server {
namespace {

using wire::Request;

constexpr uint64_t kMaxModuleImageBytes = 1ull << 30;

// The image a load names: the one sent with it (checked against its hash and cached), or the
// cached one with that hash. With neither, the reply asks for the image.
Status findImage(RequestContext& request, Request::ModuleLoad::Reader m,
                 std::shared_ptr<const std::vector<uint8_t>>* image) {
  if (m.getHash().size() != 32) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "module hash must be 32 bytes of SHA-256");
  }
  protocol::Sha256Digest key;
  std::memcpy(key.data(), m.getHash().begin(), 32);
  ModuleCache& modules = request.session.modules;
  if (!m.getHasImage()) {
    *image = modules.find(key);
    if (!*image) {
      request.reply.setNeedImage();
      return Status::error(CUDA_ERROR_NOT_FOUND, "image not cached; send it");
    }
    return Status::success();
  }
  uint64_t bytes = request.bulkBytes();
  if (bytes != m.getImageBytes() || bytes > kMaxModuleImageBytes || bytes == 0) {
    return Status::error(CUDA_ERROR_INVALID_IMAGE, "module image size is invalid");
  }
  auto received = std::make_shared<std::vector<uint8_t>>(bytes);
  request.receiveBulk(received->data(), bytes);
  if (modules.insert(received) != key) {
    return Status::error(CUDA_ERROR_INVALID_IMAGE, "module image does not match its hash");
  }
  *image = std::move(received);
  return Status::success();
}

Status load(RequestContext& request, Request::Reader r) {
  auto m = r.getModuleLoad();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  std::shared_ptr<const std::vector<uint8_t>> image;
  if (Status st = findImage(request, m, &image); !st.ok()) return st;
  SessionState& session = request.session;
  if (unsigned limit = session.server.limits().maxModulesPerSession;
      limit && session.modulesLoaded >= limit) {
    return Status::error(CUDA_ERROR_OUT_OF_MEMORY,
                         "module limit: a session may hold " + std::to_string(limit) +
                             " loaded modules (gpupoold --max-modules-per-session); unload some");
  }
  uint64_t module = 0;
  if (Status st = context->moduleLoad(*image, &module); !st.ok()) return st;
  request.reply.setHandle(module);
  ++session.modulesLoaded;
  ++session.modulesPerContext[m.getContext()];
  return Status::success();
}

Status unload(RequestContext& request, Request::Reader r) {
  auto m = r.getModuleUnload();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  if (Status st = context->moduleUnload(m.getModule()); !st.ok()) return st;
  SessionState& session = request.session;
  // Its __managed__ variables' memory is gone with it (the client drops its mirrors).
  std::erase_if(session.managed, [&](const auto& region) {
    return region.second.context == m.getContext() && region.second.module == m.getModule();
  });
  if (unsigned& held = session.modulesPerContext[m.getContext()]; held > 0) {
    --session.modulesLoaded;
    --held;
  }
  return Status::success();
}

Status getFunction(RequestContext& request, Request::Reader r) {
  auto m = r.getModuleGetFunction();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  FunctionDescription f;
  if (Status st = context->moduleGetFunction(m.getModule(), m.getName(), &f); !st.ok()) return st;
  auto out = request.reply.initFunction();
  out.setHandle(f.handle);
  auto params = out.initParams(static_cast<unsigned>(f.params.size()));
  for (unsigned i = 0; i < f.params.size(); ++i) {
    params[i].setOffset(f.params[i].offset);
    params[i].setSize(f.params[i].size);
  }
  auto attributes = out.initAttributes(static_cast<unsigned>(f.attributes.size()));
  for (unsigned i = 0; i < f.attributes.size(); ++i) attributes.set(i, f.attributes[i]);
  return Status::success();
}

Status getGlobal(RequestContext& request, Request::Reader r) {
  auto m = r.getModuleGetGlobal();
  BackendContext* context = nullptr;
  if (Status st = request.context(m.getContext(), &context); !st.ok()) return st;
  uint64_t address = 0, bytes = 0;
  if (Status st = context->moduleGetGlobal(m.getModule(), m.getName(), &address, &bytes); !st.ok())
    return st;
  uint64_t managedBase = 0, managedBytes = 0;
  if (Status st = context->moduleManagedRange(m.getModule(), address, &managedBase, &managedBytes);
      !st.ok()) {
    return st;
  }
  auto out = request.reply.initGlobal();
  out.setAddress(address);
  out.setBytes(bytes);
  out.setManaged(managedBytes != 0);
  return Status::success();
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MODULE_LOAD, load},
    {Request::MODULE_UNLOAD, unload},
    {Request::MODULE_GET_FUNCTION, getFunction},
    {Request::MODULE_GET_GLOBAL, getGlobal},
};

}  // namespace

std::span<const RequestHandlerRow> moduleHandlers() { return kRows; }

}  // namespace gpupool::server
