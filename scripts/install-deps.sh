#!/usr/bin/env bash
# Installs what gpupool needs to build and test on Debian 12, skipping packages already present.
# The CUDA toolkit is not installed here: it is expected at $CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config python3
  python3-yaml # tests/deploy: the manifests, queues and alert rules under deploy/ are parsed
  capnproto libcapnp-dev
  libboost1.81-dev
  liburing-dev
  libgtest-dev
  libzstd-dev liblz4-dev
  libmimalloc-dev # gpupoold's malloc (server/CMakeLists.txt, GPUPOOL_SERVER_ALLOCATOR)
  libibverbs-dev librdmacm-dev
  libcli11-dev nlohmann-json3-dev
  libsqlite3-dev libtomlplusplus-dev libssl-dev openssl
  clang-format
  libgl-dev libegl-dev libvdpau-dev # the graphics interop headers libcuda's surface is generated from
  ccache # compiles the nvcc test programs once for the plain and sanitizer builds (cmake/NvccProgram.cmake)
  patchelf # scripts/gpu-bundle.sh --from-build (the ctest gpu_check_chained)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc # gpupool-device-plugin (the kubelet's gRPC API)
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

# Root installs as itself, anyone else through sudo (here and for the unpacked files below).
if [[ $(id -u) -eq 0 ]]; then SUDO=(); else SUDO=(sudo); fi

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  if ((${#SUDO[@]})) && ! command -v sudo >/dev/null; then
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all system packages present"
fi

# Unpacks Debian's non-free package $1 into directory $2, through a private apt state (the host's
# own sources stay as they are); nothing is installed.
unpack_non_free() {
  local package=$1 into=$2 apt_dir
  apt_dir=$(mktemp -d)
  chmod 0755 "$apt_dir" # apt downloads as its own _apt user
  cat >"$apt_dir/non-free.sources" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  local apt_options=(-o "Dir::Etc::sourcelist=$apt_dir/non-free.sources" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::lists=$apt_dir/lists" -o "Dir::Cache::archives=$apt_dir/archives")
  local status=0
  # One chain, so that a failed step fails the call even where errexit does not apply (`if`).
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" &&
    apt-get "${apt_options[@]}" update -q >/dev/null &&
    (cd "$apt_dir" && apt-get "${apt_options[@]}" download "$package" >/dev/null) &&
    dpkg-deb -x "$apt_dir/${package}"_*.deb "$into" || status=$?
  rm -rf "$apt_dir"
  return $status
}
# nvml.h: the CUDA toolkit's runfile ships it, the apt toolkit does not. Debian's non-free
# libnvidia-ml-dev (CUDA 11.8's header) has it; its dependency is NVIDIA's real NVML library,
# which must not sit on this host's library path beside ours, so only the header is unpacked.
NVML_HEADER_DIR=${NVML_HEADER_DIR:-/usr/local/include}
if [[ ! -f "$NVML_HEADER_DIR/nvml.h" ]]; then
  echo "install-deps: fetching nvml.h from Debian's libnvidia-ml-dev (non-free)"
  unpacked=$(mktemp -d)
  unpack_non_free libnvidia-ml-dev "$unpacked"
  "${SUDO[@]}" install -D -m 0644 "$unpacked/usr/include/nvml.h" "$NVML_HEADER_DIR/nvml.h"
  rm -rf "$unpacked"
fi
echo "install-deps: nvml.h at $NVML_HEADER_DIR/nvml.h"

# NVIDIA's nvidia-smi (Debian's non-free nvidia-smi, 535), for the test that runs it against our
# libnvidia-ml.so.1 (NvidiaSmiTest, docs/nvml.md). Off the PATH: it is a test input, not a tool
# of this host, and without a GPU it works only against our library.
NVIDIA_SMI_DIR=${NVIDIA_SMI_DIR:-/usr/local/libexec/gpupool}
if [[ ! -x "$NVIDIA_SMI_DIR/nvidia-smi" ]]; then
  echo "install-deps: fetching nvidia-smi from Debian's nvidia-smi (non-free), for the tests"
  unpacked=$(mktemp -d)
  if unpack_non_free nvidia-smi "$unpacked"; then
    "${SUDO[@]}" install -D -m 0755 "$unpacked/usr/lib/nvidia/current/nvidia-smi" \
      "$NVIDIA_SMI_DIR/nvidia-smi"
  else
    echo "install-deps: could not fetch nvidia-smi; NvidiaSmiTest will skip" >&2
  fi
  rm -rf "$unpacked"
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -x "$CUDA_HOME/bin/nvcc" ]]; then
  cat >&2 <<MESSAGE
install-deps: nvcc not found at $CUDA_HOME/bin/nvcc.
  gpupool needs the CUDA toolkit (13.0) for cuda.h and to build its CUDA test programs; no GPU
  or driver is needed. Install NVIDIA's toolkit package (e.g. cuda-toolkit-13-0 from the CUDA
  apt repository for Debian 12), or point CUDA_HOME at an existing toolkit.
MESSAGE
  exit 1
fi
echo "install-deps: CUDA toolkit at $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version | tail -n 1))"
