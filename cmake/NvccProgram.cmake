# gpupool_nvcc_program(OUTPUT <path> SOURCE <file.cu> [EXTRA_SOURCES <file.cu>...] [FLAGS ...]
#                      [LINK_FLAGS ...] [SECOND_OUTPUT <path> [SECOND_LINK_FLAGS ...]]
#                      [DEPENDS ...] [COMMENT <text>])
#
# EXTRA_SOURCES are more translation units of the same program (each its own device module).
# SECOND_OUTPUT links the same objects a second time, with LINK_FLAGS and SECOND_LINK_FLAGS (the
# test programs' `-cudart shared` flavour: -cudart acts at link time only). One compile serves
# both: as two rules, the two compiles of a pair ran side by side under `-j2` and both missed
# ccache, which cost CI's main build 195 s of compiling (2026-12-06 .ninja_log).
#
# Builds one CUDA program with nvcc, as users build theirs, in two steps: compile to an object,
# then link. The compile step goes through ccache when it is installed: the sanitizer builds
# (scripts/sanitizers.sh) compile the very same programs with the very same flags (their
# instrumentation is for our host code, not nvcc's output), and CI builds them three times, which
# cost it about 600 s of its 90-minute budget. nvcc's one-step compile-and-link is not cacheable,
# hence the split; CCACHE_BASEDIR is the source tree, so build trees inside it (build/,
# build-asan/, build-tsan/) share entries. CCACHE_NOHASHDIR too: ccache 4.7 hashes the working
# directory of every nvcc call (each build tree's own), and without it every sanitizer build
# missed and compiled all 136 programs again (measured: 8.5 s, then 0.6 s from the cache).
find_program(GPUPOOL_CCACHE ccache)
option(GPUPOOL_NVCC_CCACHE "Compile the nvcc test programs through ccache when it is found" ON)

function(gpupool_nvcc_program)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUTPUT;SOURCE;SECOND_OUTPUT;COMMENT"
                        "EXTRA_SOURCES;FLAGS;LINK_FLAGS;SECOND_LINK_FLAGS;DEPENDS")
  if(NOT arg_OUTPUT OR NOT arg_SOURCE)
    message(FATAL_ERROR "gpupool_nvcc_program: OUTPUT and SOURCE are required")
  endif()
  if(NOT arg_COMMENT)
    get_filename_component(name ${arg_SOURCE} NAME)
    set(arg_COMMENT "nvcc ${name}")
  endif()
  set(launcher)
  if(GPUPOOL_CCACHE AND GPUPOOL_NVCC_CCACHE)
    set(launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
                 ${GPUPOOL_CCACHE})
  endif()
  get_filename_component(output_dir ${arg_OUTPUT} DIRECTORY)
  set(object ${arg_OUTPUT}.o)
  set(extra_compiles)
  set(extra_objects)
  foreach(extra IN LISTS arg_EXTRA_SOURCES)
    get_filename_component(extra_name ${extra} NAME_WE)
    set(extra_object ${arg_OUTPUT}.${extra_name}.o)
    list(APPEND extra_compiles COMMAND ${launcher} ${GPUPOOL_NVCC} ${arg_FLAGS} -c ${extra} -o
         ${extra_object})
    list(APPEND extra_objects ${extra_object})
  endforeach()
  set(second_link)
  if(arg_SECOND_OUTPUT)
    set(second_link COMMAND ${GPUPOOL_NVCC} ${arg_FLAGS} ${object} ${extra_objects} -o
                    ${arg_SECOND_OUTPUT} ${arg_LINK_FLAGS} ${arg_SECOND_LINK_FLAGS})
  endif()
  add_custom_command(
    OUTPUT ${arg_OUTPUT} ${arg_SECOND_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${output_dir}
    COMMAND ${launcher} ${GPUPOOL_NVCC} ${arg_FLAGS} -c ${arg_SOURCE} -o ${object}
    ${extra_compiles}
    COMMAND ${GPUPOOL_NVCC} ${arg_FLAGS} ${object} ${extra_objects} -o ${arg_OUTPUT}
            ${arg_LINK_FLAGS}
    ${second_link}
    COMMAND ${CMAKE_COMMAND} -E rm -f ${object} ${extra_objects}
    DEPENDS ${arg_SOURCE} ${arg_EXTRA_SOURCES} ${arg_DEPENDS}
    COMMENT "${arg_COMMENT}"
    VERBATIM)
endfunction()
