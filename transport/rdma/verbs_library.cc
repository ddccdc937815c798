#include "transport/rdma/verbs_library.h"

#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstdlib>

#include "transport/connection.h"

// Every verbs and rdma_cm function the transport calls that is not inline in the headers: verbs.h
// implements posting, polling and notification inline through the device's function table.
// clang-format off
#define GPUPOOL_IBVERBS_FUNCTIONS(X) \
  X(ibv_ack_cq_events) \
  X(ibv_alloc_pd) \
  X(ibv_close_device) \
  X(ibv_create_comp_channel) \
  X(ibv_create_cq) \
  X(ibv_dealloc_pd) \
  X(ibv_dereg_mr) \
  X(ibv_destroy_comp_channel) \
  X(ibv_destroy_cq) \
  X(ibv_free_device_list) \
  X(ibv_get_cq_event) \
  X(ibv_get_device_list) \
  X(ibv_get_device_name) \
  X(ibv_modify_qp) \
  X(ibv_open_device) \
  X(ibv_query_device) \
  X(ibv_query_port) \
  X(ibv_reg_mr) \
  X(ibv_reg_mr_iova2) \
  X(ibv_wc_status_str)
#define GPUPOOL_RDMACM_FUNCTIONS(X) \
  X(rdma_accept) \
  X(rdma_ack_cm_event) \
  X(rdma_bind_addr) \
  X(rdma_connect) \
  X(rdma_create_event_channel) \
  X(rdma_create_id) \
  X(rdma_create_qp) \
  X(rdma_destroy_event_channel) \
  X(rdma_destroy_id) \
  X(rdma_destroy_qp) \
  X(rdma_disconnect) \
  X(rdma_event_str) \
  X(rdma_get_cm_event) \
  X(rdma_get_src_port) \
  X(rdma_listen) \
  X(rdma_migrate_id) \
  X(rdma_reject) \
  X(rdma_resolve_addr) \
  X(rdma_resolve_route)
// clang-format on

namespace gpupool::transport::rdma {
namespace {

enum Function {
#define GPUPOOL_ENUMERATE(name) k_##name,
  GPUPOOL_IBVERBS_FUNCTIONS(GPUPOOL_ENUMERATE) GPUPOOL_RDMACM_FUNCTIONS(GPUPOOL_ENUMERATE)
#undef GPUPOOL_ENUMERATE
      kFunctionCount
};

struct Loaded {
  void* functions[kFunctionCount] = {};
  std::string error;
};

void* open(const char* variable, const char* soname, std::string& error) {
  const char* file = std::getenv(variable);
  if (!file || !*file) file = soname;
  void* handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!handle && error.empty()) {
    error = std::string(dlerror()) +
            " (install rdma-core: apt-get install libibverbs1 librdmacm1, or name the file in " +
            variable + ")";
  }
  return handle;
}

Loaded load() {
  Loaded loaded;
  // Never closed: connections and their providers live until exit.
  void* verbs = open("GPU_POOL_LIBIBVERBS", "libibverbs.so.1", loaded.error);
  void* cm = open("GPU_POOL_LIBRDMACM", "librdmacm.so.1", loaded.error);
  if (!verbs || !cm) return loaded;
  auto resolve = [&](void* library, Function f, const char* name) {
    loaded.functions[f] = dlsym(library, name);
    if (!loaded.functions[f] && loaded.error.empty()) {
      loaded.error = std::string("the installed rdma-core lacks ") + name + " (too old)";
    }
  };
#define GPUPOOL_RESOLVE_IBVERBS(name) resolve(verbs, k_##name, #name);
#define GPUPOOL_RESOLVE_RDMACM(name) resolve(cm, k_##name, #name);
  GPUPOOL_IBVERBS_FUNCTIONS(GPUPOOL_RESOLVE_IBVERBS)
  GPUPOOL_RDMACM_FUNCTIONS(GPUPOOL_RESOLVE_RDMACM)
#undef GPUPOOL_RESOLVE_IBVERBS
#undef GPUPOOL_RESOLVE_RDMACM
  return loaded;
}

const Loaded& loaded() {
  static const Loaded* l = new Loaded(load());  // never destroyed: used from exit-time teardown
  return *l;
}

// The loaded function, as the type the header declares. The transport checks verbsLoadError()
// before any call, so a missing function here is a bug in that check: fail loudly, not crash.
template <typename F>
F real(Function f) {
  void* p = loaded().functions[f];
  if (!p)
    throw TransportError(TransportError::Kind::kUnavailable,
                         "RDMA is unavailable: " + verbsLoadError());
  return reinterpret_cast<F>(p);
}

}  // namespace

const std::string& verbsLoadError() { return loaded().error; }

}  // namespace gpupool::transport::rdma

// The definitions the transport links against. Hidden, so libcuda.so.1 never exports them and
// librdmacm's own calls into libibverbs stay its own.
#define GPUPOOL_FORWARD(ret, name, params, args)                     \
  extern "C" __attribute__((visibility("hidden"))) ret name params { \
    using namespace gpupool::transport::rdma;                        \
    return real<decltype(&name)>(k_##name) args;                     \
  }

GPUPOOL_FORWARD(void, ibv_ack_cq_events, (ibv_cq * cq, unsigned int nevents), (cq, nevents))
GPUPOOL_FORWARD(ibv_pd*, ibv_alloc_pd, (ibv_context * context), (context))
GPUPOOL_FORWARD(int, ibv_close_device, (ibv_context * context), (context))
GPUPOOL_FORWARD(ibv_comp_channel*, ibv_create_comp_channel, (ibv_context * context), (context))
GPUPOOL_FORWARD(ibv_cq*, ibv_create_cq,
                (ibv_context * context, int cqe, void* cqContext, ibv_comp_channel* channel,
                 int vector),
                (context, cqe, cqContext, channel, vector))
GPUPOOL_FORWARD(int, ibv_dealloc_pd, (ibv_pd * pd), (pd))
GPUPOOL_FORWARD(int, ibv_dereg_mr, (ibv_mr * mr), (mr))
GPUPOOL_FORWARD(int, ibv_destroy_comp_channel, (ibv_comp_channel * channel), (channel))
GPUPOOL_FORWARD(int, ibv_destroy_cq, (ibv_cq * cq), (cq))
GPUPOOL_FORWARD(void, ibv_free_device_list, (ibv_device * *list), (list))
GPUPOOL_FORWARD(int, ibv_get_cq_event, (ibv_comp_channel * channel, ibv_cq** cq, void** context),
                (channel, cq, context))
GPUPOOL_FORWARD(ibv_device**, ibv_get_device_list, (int* count), (count))
GPUPOOL_FORWARD(const char*, ibv_get_device_name, (ibv_device * device), (device))
GPUPOOL_FORWARD(int, ibv_modify_qp, (ibv_qp * qp, ibv_qp_attr* attr, int mask), (qp, attr, mask))
GPUPOOL_FORWARD(ibv_context*, ibv_open_device, (ibv_device * device), (device))
GPUPOOL_FORWARD(int, ibv_query_device, (ibv_context * context, ibv_device_attr* attr),
                (context, attr))
GPUPOOL_FORWARD(ibv_mr*, ibv_reg_mr_iova2,
                (ibv_pd * pd, void* addr, size_t length, uint64_t iova, unsigned int access),
                (pd, addr, length, iova, access))
GPUPOOL_FORWARD(const char*, ibv_wc_status_str, (ibv_wc_status status), (status))

// ibv_query_port and ibv_reg_mr are also function-like macros: the parentheses keep them out.
extern "C"
    __attribute__((visibility("hidden"))) int(ibv_query_port)(ibv_context* context, uint8_t port,
                                                              _compat_ibv_port_attr* attr) {
  using namespace gpupool::transport::rdma;
  return real<int (*)(ibv_context*, uint8_t, _compat_ibv_port_attr*)>(k_ibv_query_port)(context,
                                                                                        port, attr);
}
extern "C" __attribute__((visibility("hidden")))
ibv_mr*(ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
  using namespace gpupool::transport::rdma;
  return real<ibv_mr* (*)(ibv_pd*, void*, size_t, int)>(k_ibv_reg_mr)(pd, addr, length, access);
}

GPUPOOL_FORWARD(int, rdma_accept, (rdma_cm_id * id, rdma_conn_param* param), (id, param))
GPUPOOL_FORWARD(int, rdma_ack_cm_event, (rdma_cm_event * event), (event))
GPUPOOL_FORWARD(int, rdma_bind_addr, (rdma_cm_id * id, sockaddr* addr), (id, addr))
GPUPOOL_FORWARD(int, rdma_connect, (rdma_cm_id * id, rdma_conn_param* param), (id, param))
GPUPOOL_FORWARD(rdma_event_channel*, rdma_create_event_channel, (void), ())
GPUPOOL_FORWARD(int, rdma_create_id,
                (rdma_event_channel * channel, rdma_cm_id** id, void* context,
                 rdma_port_space space),
                (channel, id, context, space))
GPUPOOL_FORWARD(int, rdma_create_qp, (rdma_cm_id * id, ibv_pd* pd, ibv_qp_init_attr* attr),
                (id, pd, attr))
GPUPOOL_FORWARD(void, rdma_destroy_event_channel, (rdma_event_channel * channel), (channel))
GPUPOOL_FORWARD(int, rdma_destroy_id, (rdma_cm_id * id), (id))
GPUPOOL_FORWARD(void, rdma_destroy_qp, (rdma_cm_id * id), (id))
GPUPOOL_FORWARD(int, rdma_disconnect, (rdma_cm_id * id), (id))
GPUPOOL_FORWARD(const char*, rdma_event_str, (rdma_cm_event_type event), (event))
GPUPOOL_FORWARD(int, rdma_get_cm_event, (rdma_event_channel * channel, rdma_cm_event** event),
                (channel, event))
GPUPOOL_FORWARD(__be16, rdma_get_src_port, (rdma_cm_id * id), (id))
GPUPOOL_FORWARD(int, rdma_listen, (rdma_cm_id * id, int backlog), (id, backlog))
GPUPOOL_FORWARD(int, rdma_migrate_id, (rdma_cm_id * id, rdma_event_channel* channel), (id, channel))
GPUPOOL_FORWARD(int, rdma_reject, (rdma_cm_id * id, const void* data, uint8_t length),
                (id, data, length))
GPUPOOL_FORWARD(int, rdma_resolve_addr,
                (rdma_cm_id * id, sockaddr* source, sockaddr* destination, int timeoutMs),
                (id, source, destination, timeoutMs))
GPUPOOL_FORWARD(int, rdma_resolve_route, (rdma_cm_id * id, int timeoutMs), (id, timeoutMs))
