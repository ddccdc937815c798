#!/usr/bin/env bash
# Sanitizer builds of the whole tree (docs/hardening.md):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (gcc), then the whole ctest suite;
#   2. ThreadSanitizer (gcc), then the transport, server and end-to-end tests.
# Any sanitizer report fails the run (-fno-sanitize-recover=all; halt_on_error).
#
#   scripts/sanitizers.sh [asan|tsan|all]       (default all; env JOBS, CTEST_ARGS)
#
# Our libcuda.so.1 is loaded into nvcc-built programs that have no sanitizer runtime of their own,
# so the runtime must come first in the process: the test environment preloads it
# (LD_PRELOAD=$(gcc -print-file-name=libasan.so) / libtsan.so). gpupoold and the test binaries
# link it anyway, so preloading it into them changes nothing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHICH=${1:-all}
JOBS=${JOBS:-2}
status=0
# -O1 -g1 (line tables) keeps sanitizer builds quick while reports still name file:line; the emu
# program suite is built in nvcc's default flavour only: the other flavours change nvcc's output,
# which the normal build's suite covers, not our host code (and its objects come from ccache,
# cmake/NvccProgram.cmake), and the program suites run each program with static cudart only (the
# shared-cudart link changes how cudart is loaded, not our code; tests/harness/CMakeLists.txt).
# Unity builds, as in scripts/test.sh.
SANITIZER_CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  -DGPUPOOL_EMU_FLAVOURS=default -DGPUPOOL_TEST_CUDART=static)

run_asan() {
  local build="$ROOT/build-asan"
  cmake -S "$ROOT" -B "$build" "${SANITIZER_CMAKE_FLAGS[@]}" -DGPUPOOL_SANITIZE=address,undefined \
    >/dev/null
  cmake --build "$build" -j "$JOBS"
  # Leak checking stays on for our processes; python (the CLI tests) gets the runtime preloaded
  # but is not ours to leak-check.
  (
    cd "$build"
    # libstdc++ is preloaded too: a C program (or one linked --as-needed without it) gets it only
    # when cudart dlopens our libcuda.so.1, after ASan has looked for the real __cxa_throw, and
    # ASan would then abort at the first exception thrown inside libcuda.
    export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6)"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0"
    export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # The load test at its sanitizer size (its default, 170 rounds, runs in the plain build), and
    # memory_roundtrip's copies up to 32 MiB (256 MiB in the plain build).
    export GPUPOOL_LOAD_ROUNDS=40 GPUPOOL_TEST_MAX_COPY_BYTES=$((32 << 20))
    # The scale test's 16 programs run several times slower here, so more of their device waits
    # overlap, each on a waiter thread: the server's own threads peak near 64 (65 measured), where
    # the plain build, which holds the issue's bound of 64, peaks at about 40.
    export GPUPOOL_IDLE_ACTIVE_MAX_THREADS=96
    ctest --output-on-failure -j "$JOBS" ${CTEST_ARGS:-}
  ) || status=1
}

run_tsan() {
  local build="$ROOT/build-tsan"
  cmake -S "$ROOT" -B "$build" "${SANITIZER_CMAKE_FLAGS[@]}" -DGPUPOOL_SANITIZE=thread >/dev/null
  cmake --build "$build" -j "$JOBS" --target unit_tests backend_wait_tests device_waits_tests host_gates_tests \
    emu_stream_queue_tests \
    host_function_fence_tests e2e_tests hardening_tests pool_process_tests
  (
    cd "$build"
    export LD_PRELOAD="$(gcc -print-file-name=libtsan.so) $(gcc -print-file-name=libstdc++.so.6)"
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp"
    export GPUPOOL_LOAD_ROUNDS=40 GPUPOOL_TEST_MAX_COPY_BYTES=$((32 << 20))
    # The tests labelled `tsan`: transport and codec unit tests; the backends' waits on threads of
    # their own; the server (both backends) under concurrent, killed and chained clients; the
    # hardening tests (isolation, faults, limits, load). Which ones, and why, is said where they
    # are labelled (gpupool_label_suites in tests/unit, tests/e2e and tests/hardening).
    ctest --output-on-failure --no-tests=error -j "$JOBS" ${CTEST_ARGS:-} -L '^tsan$'
  ) || status=1
}

case "$WHICH" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
exit $status
