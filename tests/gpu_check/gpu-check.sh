#!/usr/bin/env bash
# The GPU validation check of the bundle that scripts/gpu-bundle.sh builds (docs/gpu-validation.md).
#
#   gpu-check.sh [--chained] [--out DIR] [--timeout S] [--only SUBSTRING]... [--driver PATH]
#
# Runs every program and Python check natively and through a loopback gpupoold --backend cuda, then
# gpupool bench; prints each item, a table, writes DIR/results.json (default ./gpu-check-results)
# and ends with the line "N passed, M failed". --chained: no GPU needed, an emu server stands in.
# The check itself is gpu_check.py (Python 3 standard library only).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${GPU_CHECK_PYTHON:-$(command -v python3 || command -v python || true)}
if [[ -z $python ]]; then
  echo "gpu-check: no python3 on PATH (set GPU_CHECK_PYTHON)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
exec "$python" "$here/gpu_check.py" "$@"
