# The fake libcuda's driver surface: generated weak stubs for every driver entry point,
# cuGetProcAddress, the export tables, context-local storage and the integrity check.
# Defines the OBJECT library gpupool_client_surface; whatever links it gets the include path,
# and a SHARED library linking it also gets the export map (only cu* names are exported).
include_guard(GLOBAL)

set(GPUPOOL_SURFACE_GENERATED_DIR ${CMAKE_CURRENT_BINARY_DIR}/generated_surface)
set(GPUPOOL_SURFACE_GENERATOR ${CMAKE_CURRENT_LIST_DIR}/gen/generate_driver_api.py)
set(GPUPOOL_SURFACE_GENERATED
    ${GPUPOOL_SURFACE_GENERATED_DIR}/driver_stubs.cc
    ${GPUPOOL_SURFACE_GENERATED_DIR}/proc_address_table.cc
    ${GPUPOOL_SURFACE_GENERATED_DIR}/exported_names.txt
    ${GPUPOOL_SURFACE_GENERATED_DIR}/proc_address_table.txt)

add_custom_command(
  OUTPUT ${GPUPOOL_SURFACE_GENERATED}
  COMMAND Python3::Interpreter ${GPUPOOL_SURFACE_GENERATOR} --cuda-include ${CUDA_HOME}/include
          --cc ${CMAKE_C_COMPILER} --out-dir ${GPUPOOL_SURFACE_GENERATED_DIR}
          --refused ${CMAKE_CURRENT_LIST_DIR}/refused_calls.def
  DEPENDS ${GPUPOOL_SURFACE_GENERATOR}
          ${CMAKE_CURRENT_LIST_DIR}/refused_calls.def
          ${CUDA_HOME}/include/cuda.h
          ${CUDA_HOME}/include/cudaTypedefs.h
          ${CUDA_HOME}/include/cudaProfiler.h
          ${CUDA_HOME}/include/cudaProfilerTypedefs.h
          ${CUDA_HOME}/include/cudaGL.h
          ${CUDA_HOME}/include/cudaGLTypedefs.h
          ${CUDA_HOME}/include/cudaEGL.h
          ${CUDA_HOME}/include/cudaEGLTypedefs.h
          ${CUDA_HOME}/include/cudaVDPAU.h
          ${CUDA_HOME}/include/cudaVDPAUTypedefs.h
  COMMENT "Generating the driver API stubs and the cuGetProcAddress table"
  VERBATIM)

add_library(gpupool_client_surface OBJECT
  ${CMAKE_CURRENT_LIST_DIR}/not_supported.cc
  ${CMAKE_CURRENT_LIST_DIR}/proc_address.cc
  ${CMAKE_CURRENT_LIST_DIR}/export_tables.cc
  ${CMAKE_CURRENT_LIST_DIR}/context_local_storage.cc
  ${CMAKE_CURRENT_LIST_DIR}/integrity_check.cc
  ${CMAKE_CURRENT_LIST_DIR}/md2.cc
  ${GPUPOOL_SURFACE_GENERATED_DIR}/driver_stubs.cc
  ${GPUPOOL_SURFACE_GENERATED_DIR}/proc_address_table.cc)
target_include_directories(gpupool_client_surface PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(gpupool_client_surface PUBLIC cuda_headers Threads::Threads)
# Every exported ABI is declared by cuda.h only under __CUDA_API_VERSION_INTERNAL, and with it
# cuX names the symbol cuX itself (e.g. the legacy 32-bit cuMemAlloc), not a renamed macro.
target_compile_definitions(gpupool_client_surface PRIVATE __CUDA_API_VERSION_INTERNAL=1)
target_compile_options(gpupool_client_surface PRIVATE -Wno-deprecated-declarations)
# driver_stubs.cc defines weak stubs of the entry points that proc_address.cc and export_tables.cc
# define for real: one unity file cannot hold both.
set_target_properties(gpupool_client_surface PROPERTIES UNITY_BUILD OFF)
set_target_properties(gpupool_client_surface PROPERTIES
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  POSITION_INDEPENDENT_CODE ON)
target_link_options(gpupool_client_surface INTERFACE
  "$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,SHARED_LIBRARY>:LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/gen/libcuda_exports.map>")
