#!/usr/bin/env bash
# Compares what gpupoold's event-loop workers wait on (--event-loop epoll and io_uring) in one run:
# for each round, a local emu server with each loop in turn, measured by `gpupool bench --quick
# --idle-clients N` (the null call's median with no other client and with N idle sessions open,
# and the server's threads). Prints every measurement, then each loop's medians over the rounds
# and io_uring's ratio to epoll (below 1: io_uring faster).
#
#   scripts/event-loop-compare.sh [BUILD_DIR] [IDLE_CLIENTS] [ROUNDS]   (build, 2000, 3)
#
# Needs a descriptor limit above IDLE_CLIENTS (both processes raise their soft limit to the hard
# one). Exit status: 0 when every measurement was made.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
idle="${2:-2000}"
rounds="${3:-3}"
gpupoold="$build/bin/gpupoold"
gpupool="$build/bin/gpupool"
for binary in "$gpupoold" "$gpupool"; do
  [[ -x "$binary" ]] || { echo "event-loop-compare: $binary not built (cmake --build $build)" >&2; exit 2; }
done

work="$(mktemp -d)"
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

results="$work/results.jsonl"
for ((round = 1; round <= rounds; round++)); do
  for loop in epoll io_uring; do
    log="$work/gpupoold-$loop.log"
    "$gpupoold" --listen tcp://127.0.0.1:0 --event-loop "$loop" > "$log" 2>&1 &
    server_pid=$!
    url=""
    for _ in $(seq 100); do
      url="$(grep -o 'tcp://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)"
      [[ -n "$url" ]] && break
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    if [[ -z "$url" ]]; then
      echo "event-loop-compare: gpupoold --event-loop $loop did not start:" >&2
      cat "$log" >&2
      exit 1
    fi
    echo "event-loop-compare: round $round/$rounds, --event-loop $loop ($url), $idle idle clients" >&2
    GPU_POOL_ENDPOINT="$url" "$gpupool" bench --quick --json --idle-clients "$idle" --endpoint "$url" \
      2> "$work/bench.err" |
      python3 -c 'import json,sys; d=json.load(sys.stdin)["idle_clients"]; d["loop"]=sys.argv[1]; print(json.dumps(d))' "$loop" \
      >> "$results" || { cat "$work/bench.err" >&2; exit 1; }
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  done
done

python3 - "$results" "$idle" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
idle = sys.argv[2]
print(f"{'loop':<9} {'null call, no idle (us)':>24} {'with ' + idle + ' idle (us)':>20} {'server threads':>15}")
for r in rows:
    print(f"{r['loop']:<9} {r['null_call_us_baseline']:>24.1f} {r['null_call_us_loaded']:>20.1f} "
          f"{str(r.get('server_threads')):>15}")
med = {}
for loop in ("epoll", "io_uring"):
    mine = [r for r in rows if r["loop"] == loop]
    med[loop] = (statistics.median(r["null_call_us_baseline"] for r in mine),
                 statistics.median(r["null_call_us_loaded"] for r in mine))
    print(f"median {loop:<9} no idle {med[loop][0]:.1f} us, with {idle} idle {med[loop][1]:.1f} us")
print(f"io_uring / epoll: no idle {med['io_uring'][0] / med['epoll'][0]:.2f}, "
      f"with {idle} idle {med['io_uring'][1] / med['epoll'][1]:.2f}")
PY
