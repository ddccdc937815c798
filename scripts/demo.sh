#!/usr/bin/env bash
# Builds gpupool, starts an emulated-GPU server on a free local port, runs sample CUDA programs
# through it, shows the server's status, and stops it again.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

"$ROOT/scripts/install-deps.sh"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# Only what the demo runs: the server, the CLI, the client library and the sample programs.
cmake --build "$BUILD" -j "$JOBS" --target gpupoold gpupool gpupool_libcuda test_programs

GPUPOOLD=$BUILD/bin/gpupoold
GPUPOOL=$BUILD/bin/gpupool
PROGRAMS=$BUILD/tests/programs

SERVER_LOG=$(mktemp)
SERVER_PID=
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -f "$SERVER_LOG"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Starting gpupoold (emulated device) on a free port"
"$GPUPOOLD" --listen tcp://127.0.0.1:0 --backend emu --memory 2GiB >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
ENDPOINT=
for _ in $(seq 1 300); do
  ENDPOINT=$(grep -oE 'listening on tcp://[^ ]+' "$SERVER_LOG" | head -n 1 | cut -d' ' -f3 || true)
  [[ -n "$ENDPOINT" ]] && break
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    cat "$SERVER_LOG" >&2
    echo "demo: gpupoold exited" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$ENDPOINT" ]]; then
  cat "$SERVER_LOG" >&2
  echo "demo: gpupoold did not start listening" >&2
  exit 1
fi
echo "gpupoold is listening on $ENDPOINT"

step "device_query: an unmodified CUDA program, through gpupool run"
"$GPUPOOL" run --endpoint "$ENDPOINT" -- "$PROGRAMS/device_query"

step "vector_add: a kernel compiled by nvcc, run by the PTX interpreter"
"$GPUPOOL" run --endpoint "$ENDPOINT" -- "$PROGRAMS/vector_add"

step "gpupool status"
"$GPUPOOL" status --endpoint "$ENDPOINT"

if "$GPUPOOL" bench --help >/dev/null 2>&1; then
  step "gpupool bench --quick"
  "$GPUPOOL" bench --quick --endpoint "$ENDPOINT"
fi

step "Stopping gpupoold"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
SERVER_PID=
echo "done"
