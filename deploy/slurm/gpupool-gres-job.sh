#!/bin/bash
# A Slurm job that holds 2 pool devices as a generic resource (gres.conf, slurm.conf.gpupool):
# Slurm counts them against the node's gpupool units; gpupool-task-prolog.sh (the site's
# TaskProlog) sets GPU_POOL_ENDPOINT and CUDA_VISIBLE_DEVICES from that count. Submit with
#   sbatch --export=ALL,GPU_POOL_TOKEN_FILE=$HOME/.gpupool/token \
#     deploy/slurm/gpupool-gres-job.sh ./train
#SBATCH --job-name=gpupool-gres
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpupool:2
#SBATCH --time=04:00:00
set -euo pipefail

# Where the site has not made it the TaskProlog, the job runs the script itself: from /etc/slurm,
# or where GPUPOOL_TASK_PROLOG says (sbatch runs a copy of this file, so it cannot look next to it).
if [[ -z "${GPU_POOL_ENDPOINT:-}" ]]; then
  prolog=${GPUPOOL_TASK_PROLOG:-/etc/slurm/gpupool-task-prolog.sh}
  while read -r word assignment; do
    [[ $word == export ]] && export "${assignment?}"
  done < <("$prolog")
fi
: "${GPU_POOL_ENDPOINT:?no pool endpoint: see gpupool-task-prolog.sh}"
echo "gpupool devices ${CUDA_VISIBLE_DEVICES:-all} on $GPU_POOL_ENDPOINT"

# The tenant token stays in a file only the user can read, never on the command line.
if [[ -n "${GPU_POOL_TOKEN_FILE:-}" ]]; then
  GPU_POOL_TOKEN=$(<"$GPU_POOL_TOKEN_FILE")
  export GPU_POOL_TOKEN
fi
export GPU_POOL_TLS_CA=${GPU_POOL_TLS_CA:-/etc/gpupool/ca.pem}

# gpupool run puts our libcuda.so.1 in front of the program's CUDA.
srun gpupool run -- "$@"
