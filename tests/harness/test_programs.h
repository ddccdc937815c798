// The CUDA test programs from tests/programs, each built twice: statically linked cudart (`name`)
// and shared cudart (`name_shared`).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace gpupool::e2e {

inline const std::vector<std::string>& testProgramNames() {
  static const std::vector<std::string> names = {"device_query",
                                                 "device_address_apart_driver",
                                                 "memory_roundtrip",
                                                 "memset",
                                                 "copy2d",
                                                 "pinned_streams",
                                                 "events",
                                                 "error_cases",
                                                 "vector_add",
                                                 "driver_ptx",
                                                 "export_tables_driver",
                                                 "mempool_async",
                                                 "mempool_driver",
                                                 "profiler_range",
                                                 "profiler_logs_driver",
                                                 "occupancy_matmul_driver",
                                                 "pointer_attributes_driver",
                                                 "legacy_launch_driver",
                                                 "host_func_order",
                                                 "launch_attributes_driver",
                                                 "cluster_launch_driver",
                                                 "graph_capture",
                                                 "graph_driver",
                                                 "graph_host",
                                                 "graph_memory",
                                                 "graph_memory_driver",
                                                 "graph_update",
                                                 "graph_update_driver",
                                                 "graph_batch_memop_driver",
                                                 "graph_conditional",
                                                 "graph_conditional_driver",
                                                 "context_capabilities_driver",
                                                 "context_events_driver",
                                                 "green_contexts_driver",
                                                 "stream_memops_driver",
                                                 "vmm_driver",
                                                 "vmm_shareable_driver",
                                                 "cooperative_launch",
                                                 "cooperative_launch_driver",
                                                 "link_driver",
                                                 "library_enumeration",
                                                 "arrays_copies",
                                                 "arrays_driver",
                                                 "managed_memory",
                                                 "managed_memory_driver",
                                                 "managed_variables",
                                                 "managed_variables_driver",
                                                 "texture_objects",
                                                 "texture_objects_driver",
                                                 "texture_references_driver",
                                                 "texture_cubemap",
                                                 "texture_cubemap_driver",
                                                 "texture_mipmap",
                                                 "texture_mipmap_driver",
                                                 "texture_queries",
                                                 "ipc_memory",
                                                 "ipc_memory_driver",
                                                 "ipc_event",
                                                 "ipc_event_driver",
                                                 "matrix_wmma",
                                                 "matrix_mma_ptx",
                                                 "matrix_mma_driver"};
  return names;
}

// Programs the cuda backend refuses on purpose, so the chained suite leaves them out: CUDA IPC
// (ipc_memory*, ipc_event*), since one server process holds every session's contexts on the real
// driver, whose contexts do not map each other's cuMemAlloc memory and which refuses to open its
// own IPC handles (docs/architecture.md, CUDA IPC memory); an event shared between sessions would
// outlive its exporter's context there.
inline bool servedByCudaBackend(const std::string& name) { return name.rfind("ipc_", 0) != 0; }

// The programs from tests/programs that test threads and streams working at the same time
// (CONCURRENCY_PROGRAMS there), built with static cudart only.
inline const std::vector<std::string>& concurrencyProgramNames() {
  static const std::vector<std::string> names = {"concurrent_flag_handoff",
                                                 "concurrent_flag_handoff_driver",
                                                 "concurrent_calls_during_sync",
                                                 "concurrent_streams_16",
                                                 "stream_overlap",
                                                 "stream_ordering",
                                                 "stream_ordering_per_thread"};
  return names;
}

struct ProgramFlavour {
  std::string name;
  bool sharedCudart = false;

  std::string binary() const { return sharedCudart ? name + "_shared" : name; }
  // The gtest name suffix: memory_roundtrip_static, memory_roundtrip_shared.
  std::string testName() const { return name + (sharedCudart ? "_shared" : "_static"); }
};

// How gtest shows a parameter in test listings and failures.
inline void PrintTo(const ProgramFlavour& flavour, std::ostream* out) {
  *out << flavour.testName();
}

// Every program in each cudart link this build runs (GPUPOOL_TEST_CUDART, tests/harness).
inline std::vector<ProgramFlavour> allProgramFlavours() {
  std::vector<ProgramFlavour> flavours;
  for (const auto& name : testProgramNames()) {
#ifdef GPUPOOL_TEST_STATIC_CUDART
    flavours.push_back({name, false});
#endif
#ifdef GPUPOOL_TEST_SHARED_CUDART
    flavours.push_back({name, true});
#endif
  }
  return flavours;
}

// allProgramFlavours() less the programs servedByCudaBackend() leaves out.
inline std::vector<ProgramFlavour> cudaBackendProgramFlavours() {
  std::vector<ProgramFlavour> flavours;
  for (const ProgramFlavour& flavour : allProgramFlavours()) {
    if (servedByCudaBackend(flavour.name)) flavours.push_back(flavour);
  }
  return flavours;
}

}  // namespace gpupool::e2e
