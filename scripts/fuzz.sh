#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a fixed time from its
# committed seed corpus. Any crash, leak, timeout or out-of-memory fails the script; the input that
# caused it is left in $WORK/<target>-crash-* (turn it into a regression test: copy it to
# tests/hardening/reproducers/<target>/, see docs/hardening.md).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]        (default 60; env BUILD_DIR, WORK, JOBS)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${BUILD_DIR:-$ROOT/build-fuzz}
WORK=${WORK:-$BUILD_DIR/fuzz-work}
JOBS=${JOBS:-2}
TARGETS=(server_session client_reply fatbin ptx shm_ring)

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DGPUPOOL_FUZZ=ON -DGPUPOOL_SANITIZE=address,undefined -DGPUPOOL_WERROR=ON -DGPUPOOL_BUILD_TESTS=OFF \
  >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]/%/_fuzzer}"

mkdir -p "$WORK"
# Runs one target; its exit status says whether it found anything.
fuzz_one() {
  local target=$1 corpus="$WORK/$1-corpus"
  mkdir -p "$corpus"
  # New inputs go to the scratch corpus; the committed seeds are read only. Leaks are checked per
  # input (detect_leaks), a single input may take 20 s and 4 GiB at most.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD_DIR/bin/${target}_fuzzer" "$corpus" "$ROOT/fuzz/corpus/$target" \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$WORK/$target-" >"$WORK/$target.log" 2>&1
}

# Each fuzzer is one process on one core: run $JOBS of them at a time.
echo "fuzzing ${TARGETS[*]} for ${SECONDS_PER_TARGET}s each, $JOBS at a time"
declare -A pids
failed=()
report() {
  local target=$1
  if wait "${pids[$target]}"; then
    echo "== $target: clean"
    grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$WORK/$target.log" | sed "s/^/   /"
  else
    echo "!! $target failed; last lines of $WORK/$target.log:"
    grep -v '^#' "$WORK/$target.log" | grep -v '^gpupool' | tail -25
    failed+=("$target")
  fi
}
running=()
for target in "${TARGETS[@]}"; do
  fuzz_one "$target" &
  pids[$target]=$!
  running+=("$target")
  if ((${#running[@]} >= JOBS)); then
    report "${running[0]}"
    running=("${running[@]:1}")
  fi
done
for target in "${running[@]}"; do report "$target"; done

if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (reproducers: $WORK/<target>-crash-*)"
  exit 1
fi
echo "all fuzz targets clean"
