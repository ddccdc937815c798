#!/usr/bin/env bash
# Compares what gpupoold's event-loop workers wait on (--event-loop epoll and io_uring) in one run:
# for each round, a local emu server with each loop in turn, measured by `gpupool bench --quick
# --idle-clients N` (the null call's median with no other client and with N idle sessions open,
# the server's threads, and 64 MiB copies each way from pinned memory over TCP). Prints every
# measurement, then each loop's medians over the rounds and io_uring's ratio to epoll (for the
# null call below 1 means io_uring is faster; for the copies, above 1).
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
      python3 -c '
import json, sys
r = json.load(sys.stdin)
d = r["idle_clients"]
d["loop"] = sys.argv[1]
bw = r["gpupool"]["bandwidth"]
for key in ("h2d_pinned", "d2h_pinned"):
    d[key + "_64mib_gbps"] = next(p["gb_per_s"] for p in bw[key] if p["size"] == 64 << 20)
print(json.dumps(d))' "$loop" \
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
print(f"{'loop':<9} {'null call, no idle (us)':>24} {'with ' + idle + ' idle (us)':>20} "
      f"{'server threads':>15} {'H2D 64 MiB (GB/s)':>18} {'D2H 64 MiB (GB/s)':>18}")
for r in rows:
    print(f"{r['loop']:<9} {r['null_call_us_baseline']:>24.1f} {r['null_call_us_loaded']:>20.1f} "
          f"{str(r.get('server_threads')):>15} {r['h2d_pinned_64mib_gbps']:>18.2f} "
          f"{r['d2h_pinned_64mib_gbps']:>18.2f}")
keys = ("null_call_us_baseline", "null_call_us_loaded", "h2d_pinned_64mib_gbps",
        "d2h_pinned_64mib_gbps")
med = {}
for loop in ("epoll", "io_uring"):
    mine = [r for r in rows if r["loop"] == loop]
    med[loop] = {k: statistics.median(r[k] for r in mine) for k in keys}
    m = med[loop]
    print(f"median {loop:<9} no idle {m['null_call_us_baseline']:.1f} us, with {idle} idle "
          f"{m['null_call_us_loaded']:.1f} us, H2D 64 MiB {m['h2d_pinned_64mib_gbps']:.2f} GB/s, "
          f"D2H 64 MiB {m['d2h_pinned_64mib_gbps']:.2f} GB/s")
ratio = {k: med["io_uring"][k] / med["epoll"][k] for k in keys}
print(f"io_uring / epoll: no idle {ratio['null_call_us_baseline']:.2f}, with {idle} idle "
      f"{ratio['null_call_us_loaded']:.2f}, H2D 64 MiB {ratio['h2d_pinned_64mib_gbps']:.2f}, "
      f"D2H 64 MiB {ratio['d2h_pinned_64mib_gbps']:.2f}")
PY
