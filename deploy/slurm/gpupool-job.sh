#!/bin/bash
# A Slurm job that uses the pool instead of owning GPUs: it asks Slurm for CPUs only and points
# gpupool's libcuda.so.1 at the pool servers. Submit with
#   sbatch --export=ALL,GPU_POOL_TOKEN_FILE=$HOME/.gpupool/token deploy/slurm/gpupool-job.sh ./train
#SBATCH --job-name=gpupool-job
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
set -euo pipefail

# The pool's servers, in the order the job sees their devices; a site sets this once in
# /etc/gpupool/endpoints (one tls://HOST:PORT per line) or the job passes GPU_POOL_ENDPOINT.
if [[ -z "${GPU_POOL_ENDPOINT:-}" && -r /etc/gpupool/endpoints ]]; then
  GPU_POOL_ENDPOINT=$(paste -sd, /etc/gpupool/endpoints)
fi
export GPU_POOL_ENDPOINT
# The tenant token stays in a file only the user can read, never on the command line.
if [[ -n "${GPU_POOL_TOKEN_FILE:-}" ]]; then
  GPU_POOL_TOKEN=$(<"$GPU_POOL_TOKEN_FILE")
  export GPU_POOL_TOKEN
fi
export GPU_POOL_TLS_CA=${GPU_POOL_TLS_CA:-/etc/gpupool/ca.pem}

# gpupool run puts our libcuda.so.1 in front of the program's CUDA.
srun gpupool run -- "$@"
