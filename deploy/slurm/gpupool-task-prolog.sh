#!/bin/bash
# Slurm TaskProlog for gpupool (slurm.conf: TaskProlog=/etc/slurm/gpupool-task-prolog.sh; it runs
# as the job's user before each task). It prints "export NAME=value" lines, which Slurm puts in
# the task's environment:
#   GPU_POOL_ENDPOINT     the pool's servers, from /etc/gpupool/endpoints (one URL per line)
#   CUDA_VISIBLE_DEVICES  N pool devices, N = the job's --gres=gpupool:N on this node
# The job script (gpupool-gres-job.sh) runs it itself when the site has not installed it.
#
# What Slurm does: count the job's gpupool units on the node (gres.conf) and run this script.
# What this script does: pick WHICH pool devices. Slurm tells a count-only GRES no index, so the
# choice is N consecutive entries of /etc/gpupool/devices (pool ordinals or GPU-… UUIDs, one per
# line, in the pool's order: `gpupool status --json` lists them), starting at the job id modulo
# their number, so that jobs spread over the devices. Two jobs may get the same device: the
# server shares it between them (time-sliced) and enforces each tenant's memory quota; nothing
# here reserves a device for one job.
set -euo pipefail

endpoints_file=${GPUPOOL_ENDPOINTS_FILE:-/etc/gpupool/endpoints}
devices_file=${GPUPOOL_DEVICES_FILE:-/etc/gpupool/devices}

# The job's count on this node, from `scontrol show job`: TresPerNode=gres/gpupool:N (Slurm 21.08
# and later) or gres:gpupool:N / gpupool:N (older). No gpupool GRES: nothing to set.
job=$(scontrol show job "${SLURM_JOB_ID:?not in a Slurm job}" 2>/dev/null || true)
count=$(sed -nE 's/.*TresPerNode=([^ ]*,)?(gres[/:])?gpupool(:[^:, ]+)?:([0-9]+).*/\4/p' <<<"$job" \
  | head -n1)
if [[ -z $count || $count -eq 0 ]]; then
  exit 0
fi

if [[ ! -r $endpoints_file || ! -r $devices_file ]]; then
  echo "print gpupool-task-prolog: $endpoints_file or $devices_file is missing; no pool devices set"
  exit 0
fi
mapfile -t devices < <(grep -v '^[[:space:]]*\(#\|$\)' "$devices_file")
if ((${#devices[@]} == 0)); then
  echo "print gpupool-task-prolog: $devices_file lists no device"
  exit 0
fi
if ((count > ${#devices[@]})); then
  echo "print gpupool-task-prolog: the job asks for $count pool devices, the pool has ${#devices[@]}"
  count=${#devices[@]}
fi
visible=()
for ((i = 0; i < count; i++)); do
  visible+=("${devices[(SLURM_JOB_ID + i) % ${#devices[@]}]}")
done

echo "export GPU_POOL_ENDPOINT=$(grep -v '^[[:space:]]*\(#\|$\)' "$endpoints_file" | paste -sd,)"
echo "export CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${visible[*]}")"
