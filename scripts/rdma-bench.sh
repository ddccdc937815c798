#!/usr/bin/env bash
# Runs `gpupool bench --transport rdma` against a fresh emu gpupoold over RDMA, with the raw-verbs
# baseline, where verbs exist: directly when /sys/class/infiniband lists a device (set
# GPU_POOL_RDMA_TEST_ADDR to an IP address on it), else inside ../shared/rdma-vm (soft-RoCE under
# QEMU). The report goes to stdout; extra arguments go to `gpupool bench`.
#
#   scripts/rdma-bench.sh [BUILD_DIR] [--quick] [--json] ...     (default BUILD_DIR: build)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
if [[ $# -gt 0 && "$1" != -* ]]; then
  build="$1"
  shift
fi
build="$(cd "$build" && pwd)"
vm_dir="$root/../shared/rdma-vm"
for binary in gpupoold gpupool; do
  if [[ ! -x "$build/bin/$binary" ]]; then
    echo "rdma-bench: $build/bin/$binary not built" >&2
    exit 2
  fi
done

# Inside the environment that has verbs: start the server, wait for its RDMA URL, measure.
bench_args=$(printf '%q ' "$@")
run_bench="set -euo pipefail
addr=\${GPU_POOL_RDMA_TEST_ADDR:-\${RDMA_VM_IP:-}}
[[ -n \$addr ]] || { echo 'rdma-bench: set GPU_POOL_RDMA_TEST_ADDR' >&2; exit 2; }
log=\$(mktemp)
'$build/bin/gpupoold' --listen tcp://127.0.0.1:0 --rdma-listen rdma://\$addr:0 --memory 2GiB >\"\$log\" 2>&1 &
server=\$!
trap 'kill \$server 2>/dev/null || true' EXIT
for _ in \$(seq 600); do
  url=\$(sed -n 's/^listening on \\(rdma:.*\\)/\\1/p' \"\$log\")
  [[ -n \$url ]] && break
  kill -0 \$server 2>/dev/null || { cat \"\$log\" >&2; exit 2; }
  sleep 0.1
done
[[ -n \$url ]] || { echo 'rdma-bench: gpupoold did not start' >&2; cat \"\$log\" >&2; exit 2; }
'$build/bin/gpupool' bench --endpoint \"\$url\" --transport rdma $bench_args"

if compgen -G "/sys/class/infiniband/*" > /dev/null; then
  exec bash -c "$run_bench"
fi
if [[ -d "$vm_dir" ]]; then
  echo "rdma-bench: no verbs device here: running inside $vm_dir (soft-RoCE under QEMU)" >&2
  bash "$vm_dir/setup.sh" > /dev/null
  exec bash "$vm_dir/run-in-rdma-vm.sh" --timeout 1500 -- bash -c "$run_bench"
fi
echo "SKIPPED: rdma bench: no verbs device here and no ../shared/rdma-vm to run it in"
exit 0
