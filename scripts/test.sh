#!/usr/bin/env bash
# Installs dependencies, builds everything into build/, checks that every test carries a suite
# label and runs the whole test suite.
# Ends with the line "N passed, N failed"; exits non-zero when anything failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/install-deps.sh"

# CI's time limit shapes two flags (docs/testing.md, "Build time"):
# - a unity build (CMake batches of 8 sources per compiler run): gpupool_transport compiles in 31 s
#   of CPU instead of 79 s;
# - line tables (-g1), all a failing test's backtrace needs: full debug info (-g) cost 25-45% more
#   compile time per file (server/session.cc 9.1 s -> 4.9 s of CPU, gpupoold_main.cc 22.4 -> 16.2).
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
cmake --build "$BUILD" -j "$JOBS"
# Every test carries a suite label (docs/testing.md); a few seconds of `ctest -N`.
"$ROOT/scripts/check-test-labels.sh" "$BUILD"

# ctest's own exit status is replaced by the counts below, so the summary line is always printed.
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
set +e
(cd "$BUILD" && ctest --output-on-failure --no-tests=error -j "$JOBS") 2>&1 | tee "$LOG"
ctest_status=${PIPESTATUS[0]}
set -e

# ctest prints "NN% tests passed, F tests failed out of T".
summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$LOG" | tail -n 1 || true)
if [[ -z "$summary" ]]; then
  echo "test.sh: ctest printed no summary (exit status $ctest_status)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$summary")
total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$summary")
passed=$((total - failed))
echo "$passed passed, $failed failed"
if ((failed > 0 || ctest_status != 0)); then
  exit 1
fi
