#!/usr/bin/env bash
# Builds the GPU validation bundle (docs/gpu-validation.md): one self-contained folder, under
# 64 MiB, that proves the cuda backend on a machine with an NVIDIA GPU and none of our Debian
# dependencies. Copy it there and run DIR/gpu-check.sh; DIR/gpu-check.sh --chained runs the same
# flow here, with an emu server standing in for the GPU.
#
#   scripts/gpu-bundle.sh [--from-build BUILD] [DIR]        (DIR default build/gpu-bundle)
#
# By default gpupoold, gpupool and libcuda.so.1 get their own optimized build
# (GPU_BUNDLE_BUILD_DIR, default build-bundle-release). --from-build BUILD takes them from an
# existing RelWithDebInfo or Release build instead (CI's, already built: no second compile) and
# sets their RPATH with patchelf.
# Environment: CUDA_HOME (default /usr/local/cuda), JOBS (default nproc).
#
# Layout of DIR:
#   gpu-check.sh, gpu_check.py    the check (gpu-check.sh --help)
#   bin/gpupoold, bin/gpupool     stripped, RPATH $ORIGIN/../lib/deps
#   lib/libcuda.so.1              our driver, and lib/libnvidia-ml.so.1 our NVML: what pooled
#                                 programs find first on LD_LIBRARY_PATH (a GPU-less host has no
#                                 NVIDIA NVML, and NVIDIA's asks libcuda for a private table)
#   lib/trace/                    gpu-check.sh --trace-export-tables' preload library
#   lib/deps/                     every shared library the three need except glibc's own
#                                 (libstdc++, libgcc_s, capnp, kj, ssl, crypto, zstd, lz4, ...)
#   programs.tar.xz               programs/, packed (xz): they share most of their bytes (static
#                                 cudart), so 56 MiB of programs pack into about 3; gpu_check.py
#                                 unpacks it when it starts
#     programs/basic, programs/emu  tests/programs and tests/emu_programs, nvcc, static cudart
#     programs/toolkit              tests/gpu_check/programs: cuBLAS/cuBLASLt/cuFFT/cuRAND/cuSPARSE/
#                                   cuSOLVER, linked against the machine's shared toolkit libraries
#     programs/nvml                 tests/nvml's nvml_check and nvml_accounting, linked against
#                                   our NVML (lib/libnvidia-ml.so.1, through their RPATH)
#     programs/probe                tests/gpu_check/probes: what the GPU answers where no document
#                                   says (key=value lines, kept in results.json), driver API
#   python/                       tests/gpu_check/python: PyTorch, CuPy, JAX, numba-cuda checks
#   BUNDLE                        what was built, from which commit, and the size
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FROM_BUILD=
if [[ ${1:-} == --from-build ]]; then
  FROM_BUILD=${2:?--from-build needs a build folder}
  shift 2
fi
DIR=${1:-$ROOT/build/gpu-bundle}
BUILD=${GPU_BUNDLE_BUILD_DIR:-$ROOT/build-bundle-release}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
JOBS=${JOBS:-$(nproc)}
NVCC=$CUDA_HOME/bin/nvcc
# nvml.h (CUDA 13 ships none: scripts/install-deps.sh puts CUDA 11.8's here).
NVML_INCLUDE=${NVML_INCLUDE:-/usr/local/include}
MAX_BYTES=$((64 * 1024 * 1024))
# The libraries every Linux has with its glibc: never bundled (a bundled glibc would not match the
# machine's dynamic loader).
GLIBC_LIBS='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso)\.so'

started=$SECONDS
say() { echo "gpu-bundle: $*"; }
die() {
  echo "gpu-bundle: $*" >&2
  exit 1
}
[[ -x $NVCC ]] || die "nvcc not found at $NVCC (set CUDA_HOME)"
[[ -f $NVML_INCLUDE/nvml.h ]] || die "no nvml.h in $NVML_INCLUDE (run scripts/install-deps.sh, or set NVML_INCLUDE)"
DIR=$(mkdir -p "$DIR" && cd "$DIR" && pwd)
[[ $DIR != "$ROOT" && $DIR != / ]] || die "refusing to use $DIR as the bundle folder"

# 1. gpupoold, gpupool and libcuda.so.1, optimized and stripped: built as RelWithDebInfo (-O2
#    -DNDEBUG -g, the flags the tree's -Werror is kept clean at; -O3 trips gcc 12's -Wrestrict
#    false positive in std::string), so ccache shares the objects with the usual build; strip
#    removes the debug information, which does not change the code. DT_RPATH (not RUNPATH) so
#    that the bundled libraries' own dependencies are found in lib/deps too, and so that
#    libcuda.so.1 finds its dependencies there whichever program loads it.
if [[ -n $FROM_BUILD ]]; then
  command -v patchelf >/dev/null || die "--from-build needs patchelf (apt-get install patchelf)"
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$FROM_BUILD/CMakeCache.txt")
  sanitize=$(sed -n 's/^GPUPOOL_SANITIZE:[A-Z]*=//p' "$FROM_BUILD/CMakeCache.txt")
  [[ $build_type =~ ^(RelWithDebInfo|Release)$ && -z $sanitize ]] ||
    die "--from-build $FROM_BUILD: a $build_type${sanitize:+ $sanitize-sanitized} build, not an optimized plain one"
  BUILD=$FROM_BUILD
  say "taking gpupoold, gpupool, libcuda.so.1 from $BUILD ($build_type)"
else
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  say "building gpupoold, gpupool, libcuda.so.1 in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUPOOL_BUILD_TESTS=OFF \
    "-DCMAKE_BUILD_RPATH=\$ORIGIN/../lib/deps" \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
    -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags \
    "${launcher[@]}" >/dev/null
  cmake --build "$BUILD" -j "$JOBS" --target gpupoold gpupool gpupool_libcuda gpupool_libnvml
fi

rm -rf "${DIR:?}"/*
mkdir -p "$DIR/bin" "$DIR/lib/deps" "$DIR/programs/basic" "$DIR/programs/emu" \
  "$DIR/programs/toolkit" "$DIR/programs/nvml" "$DIR/programs/probe" "$DIR/python"
cp "$BUILD/bin/gpupoold" "$BUILD/bin/gpupool" "$DIR/bin/"
cp -L "$BUILD/lib/libcuda.so.1" "$BUILD/lib/libnvidia-ml.so.1" "$DIR/lib/"
strip --strip-unneeded "$DIR/bin/gpupoold" "$DIR/bin/gpupool" "$DIR/lib/libcuda.so.1" \
  "$DIR/lib/libnvidia-ml.so.1"
# gpu-check.sh --trace-export-tables preloads this into native runs (tests/gpu_check/export_trace.cc);
# glibc and libstdc++ only, static libstdc++ so that it loads into any program.
mkdir -p "$DIR/lib/trace"
"${CXX:-c++}" -O2 -std=c++20 -Wall -Wextra -Werror -shared -fPIC -static-libstdc++ -static-libgcc \
  "$ROOT/tests/gpu_check/export_trace.cc" -o "$DIR/lib/trace/libgpupool_export_trace.so" -ldl ||
  die "could not compile tests/gpu_check/export_trace.cc"
strip --strip-unneeded "$DIR/lib/trace/libgpupool_export_trace.so"
if [[ -n $FROM_BUILD ]]; then
  for elf in "$DIR/bin/gpupoold" "$DIR/bin/gpupool" "$DIR/lib/libcuda.so.1" \
    "$DIR/lib/libnvidia-ml.so.1"; do
    # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib/deps' "$elf"
  done
fi

# 2. Their shared libraries, except glibc's. ldd lists the transitive closure.
for elf in "$DIR/bin/gpupoold" "$DIR/bin/gpupool" "$DIR/lib/libcuda.so.1" \
  "$DIR/lib/libnvidia-ml.so.1"; do
  ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    while read -r soname path; do
      [[ $soname =~ $GLIBC_LIBS ]] && continue
      [[ -e $DIR/lib/deps/$soname ]] && continue
      cp -L "$path" "$DIR/lib/deps/$soname"
      chmod u+w "$DIR/lib/deps/$soname"
      strip --strip-unneeded "$DIR/lib/deps/$soname"
    done
done

# 3. CUDA programs. One nvcc pass per program: compute_80 PTX (what the emu device interprets,
#    and what any newer GPU can JIT) and sm_90 SASS (the H200 runs it as is). tests/emu_programs
#    also get compute_90 PTX, the SASS's source (the build's sm90 flavour: Hopper code paths).
#    The programs find the bundled libstdc++ through their RPATH, as the bundle's binaries do.
BASIC_GENCODE="-gencode=arch=compute_80,code=[sm_90,compute_80]"
EMU_GENCODE="-gencode=arch=compute_80,code=compute_80 -gencode=arch=compute_90,code=[sm_90,compute_90]"
NVCC_FLAGS=(-O2 -std=c++17 -I"$ROOT/tests/programs" "-Xcompiler=-Wall,-Wextra,-Werror"
  -Xlinker --disable-new-dtags -Xlinker -rpath -Xlinker "\$ORIGIN/../../lib/deps")
if command -v g++ >/dev/null; then NVCC_FLAGS+=(-ccbin "$(command -v g++)"); fi
# --from-build: a build compiles tests/programs (tests/programs/CMakeLists.txt) and the emu
# programs' sm90 flavour (tests/emu_programs/CMakeLists.txt) with these gencodes, and says so in
# nvcc-gencode.txt; those programs are copied from it (RPATH set, stripped) rather than compiled a
# second time, which is most of the bundle's time (CI: about 15 of its 17 minutes on 2 cores).
reusable_dir() { # DIR GENCODE: DIR when its programs were built with GENCODE
  [[ -n $FROM_BUILD && -f $1/nvcc-gencode.txt && $(<"$1/nvcc-gencode.txt") == "$2" ]] && echo "$1"
}
basic_from=$(reusable_dir "${FROM_BUILD:-/nonexistent}/tests/programs" "$BASIC_GENCODE" || true)
emu_from=$(reusable_dir "${FROM_BUILD:-/nonexistent}/tests/emu_programs/bin/sm90" "$EMU_GENCODE" || true)
copied=0
take_from_build() { # BUILT OUTPUT: copies a program the build made, as if the bundle had built it
  # (Called while the jobs file is written: nothing of it may reach stdout.)
  {
    cp "$1" "$2"
    chmod u+w "$2"
    # shellcheck disable=SC2016 # $ORIGIN is for the dynamic loader
    patchelf --force-rpath --set-rpath '$ORIGIN/../../lib/deps' "$2"
    strip --strip-unneeded "$2"
  } >&2
  copied=$((copied + 1))
}

# link_driver and library_enumeration embed separately compiled device code, built as
# tests/programs/CMakeLists.txt builds it: link_units/*.cu with -rdc to PTX, a fatbin and a host
# object, each turned into a header by bin2c.
link_units=$(mktemp -d)
# (Not needed when the build's copies of those programs are taken.)
if [[ -z $basic_from || ! -x $basic_from/link_driver || ! -x $basic_from/library_enumeration ||
  ! -x $basic_from/matrix_mma_driver ]]; then
  for unit_form in "link_caller ptx -ptx" "link_callee ptx -ptx" "link_callee fatbin -fatbin" \
    "link_callee o -dc"; do
    read -r unit ext mode <<<"$unit_form"
    "$NVCC" "$mode" -rdc=true "$ROOT/tests/programs/link_units/$unit.cu" -o "$link_units/$unit.$ext" ||
      die "nvcc failed for tests/programs/link_units/$unit.cu"
    "$CUDA_HOME/bin/bin2c" -st -c -p 0 -n "k_${unit}_${ext}" "$link_units/$unit.$ext" \
      >"$link_units/${unit}_${ext}.h"
  done
  # matrix_mma_driver embeds nvcc-produced PTX (matrix_units/matrix_kernels.cu, -ptx -arch=sm_80),
  # likewise.
  "$NVCC" -ptx -arch=sm_80 "$ROOT/tests/programs/matrix_units/matrix_kernels.cu" \
    -o "$link_units/matrix_kernels.ptx" ||
    die "nvcc failed for tests/programs/matrix_units/matrix_kernels.cu"
  "$CUDA_HOME/bin/bin2c" -st -c -p 0 -n k_matrix_kernels_ptx "$link_units/matrix_kernels.ptx" \
    >"$link_units/matrix_kernels_ptx.h"
fi
NVCC_FLAGS+=(-I"$link_units")
# tests/programs, all of them: gpu-check.sh decides what runs where (multi_device needs two
# devices). Those that call the driver API link it (the stub; the real one at run time); those
# that check CUDA_API_PER_THREAD_DEFAULT_STREAM are built with --default-stream per-thread.
# A NAME_second_unit.cu is another translation unit of program NAME, built with it.
basic=()
for source in "$ROOT"/tests/programs/*.cu; do
  [[ $source == *_second_unit.cu ]] || basic+=("$(basename "$source" .cu)")
done
# tests/emu_programs except unsupported_mma/unsupported_texture_grad_cube, which test that the emu
# device refuses what it does not implement (on a GPU they simply run).
emu=()
for source in "$ROOT"/tests/emu_programs/programs/*.cu; do
  name=$(basename "$source" .cu)
  [[ $name == unsupported_* ]] || emu+=("$name")
done
toolkit=()
declare -A toolkit_libs=(
  [cublas_sgemm]="-lcublas" [cublas_gemmex_bf16]="-lcublas" [cublas_gemmex_fp16]="-lcublas"
  [cublaslt_matmul]="-lcublasLt" [cufft_c2c]="-lcufft" [curand_generate]="-lcurand"
  [cusparse_spmv]="-lcusparse" [cusolver_potrf]="-lcusolver")
for source in "$ROOT"/tests/gpu_check/programs/*.cu; do
  toolkit+=("$(basename "$source" .cu)")
done

jobs_file=$(mktemp)
trap 'rm -rf "$jobs_file" "$link_units"' EXIT
{
  for name in "${basic[@]}"; do
    if [[ -n $basic_from && -x $basic_from/$name ]]; then
      take_from_build "$basic_from/$name" "$DIR/programs/basic/$name"
      continue
    fi
    extra=""
    if grep -q '#include "driver_check.h"' "$ROOT/tests/programs/$name.cu"; then
      extra="-L$CUDA_HOME/lib64/stubs -lcuda"
    fi
    if grep -q '^#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM' "$ROOT/tests/programs/$name.cu"; then
      extra="$extra --default-stream per-thread"
    fi
    if [[ -f $ROOT/tests/programs/${name}_second_unit.cu ]]; then
      extra="$extra $ROOT/tests/programs/${name}_second_unit.cu"
    fi
    printf '%s\t%s\t%s\n' "$ROOT/tests/programs/$name.cu" "$DIR/programs/basic/$name" "$extra"
  done
  for name in "${emu[@]}"; do
    if [[ -n $emu_from && -x $emu_from/$name ]]; then
      take_from_build "$emu_from/$name" "$DIR/programs/emu/$name"
      continue
    fi
    printf '%s\t%s\t%s\n' "$ROOT/tests/emu_programs/programs/$name.cu" "$DIR/programs/emu/$name" \
      "EMU"
  done
  # NVML's checks link NVML by its SONAME and find ours (lib/) through their RPATH: they test our
  # library, whichever NVML the machine has.
  for source in "$ROOT/tests/nvml/nvml_check.cc" "$ROOT/tests/nvml/nvml_accounting.cu"; do
    name=$(basename "${source%.*}")
    printf '%s\t%s\t%s\n' "$source" "$DIR/programs/nvml/$name" \
      "-I$NVML_INCLUDE -L$DIR/lib -l:libnvidia-ml.so.1 -Xlinker -rpath -Xlinker \$ORIGIN/../../lib"
  done
  # Probes: driver API programs with tests/programs' checks, built as those are.
  for source in "$ROOT"/tests/gpu_check/probes/*.cu; do
    printf '%s\t%s\t%s\n' "$source" "$DIR/programs/probe/$(basename "$source" .cu)" \
      "-L$CUDA_HOME/lib64/stubs -lcuda"
  done
  for name in "${toolkit[@]}"; do
    libs=${toolkit_libs[$name]:-}
    [[ -n $libs ]] || die "tests/gpu_check/programs/$name.cu: add its libraries to toolkit_libs"
    printf '%s\t%s\t%s\n' "$ROOT/tests/gpu_check/programs/$name.cu" \
      "$DIR/programs/toolkit/$name" "-I$ROOT/tests/gpu_check/programs -L$CUDA_HOME/lib64 $libs"
  done
} >"$jobs_file"

# One program: source, output, extra flags (tab-separated; EMU: an emu program's gencode instead
# of the basic one).
compile_program() {
  local source output extra log
  IFS=$'\t' read -r source output extra <<<"$1"
  local -a flags gencode
  mapfile -t flags <<<"$NVCC_FLAG_LINES"
  read -ra gencode <<<"$BASIC_GENCODE" # split, never globbed (the brackets)
  if [[ $extra == EMU ]]; then
    extra=""
    read -ra gencode <<<"$EMU_GENCODE"
  fi
  # shellcheck disable=SC2086 # extra holds several flags
  if ! log=$("$NVCC" "${flags[@]}" "${gencode[@]}" "$source" -o "$output" $extra 2>&1); then
    printf 'gpu-bundle: nvcc failed for %s:\n%s\n' "$source" "$log" >&2
    return 255 # stops xargs
  fi
  strip --strip-unneeded "$output"
}
export -f compile_program
export NVCC BASIC_GENCODE EMU_GENCODE
NVCC_FLAG_LINES=$(printf '%s\n' "${NVCC_FLAGS[@]}")
export NVCC_FLAG_LINES
say "$copied programs taken from ${FROM_BUILD:-the build}; nvcc: $(wc -l <"$jobs_file") programs, $JOBS at a time"
# shellcheck disable=SC2016 # expanded by the inner bash
xargs -r -P "$JOBS" -d '\n' -n 1 bash -c 'compile_program "$1"' _ <"$jobs_file" ||
  die "a program did not build"

# What each toolkit program needs from the machine, for gpu-check.sh to find it (or say it is
# missing): its NEEDED libraries other than glibc's, libstdc++ and libgcc_s.
for name in "${toolkit[@]}"; do
  echo "$name $(readelf -d "$DIR/programs/toolkit/$name" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    grep -Ev "$GLIBC_LIBS|^libstdc\+\+|^libgcc_s" | tr '\n' ' ')"
done >"$DIR/programs/toolkit/NEEDS"

# Packed (92 MB of programs to under 7 MB): xz -6 works in 24 MiB blocks, one thread each; -9's
# 64 MiB window packs 13% smaller but in one block, on one core, 2.5 times as long (CI: 37 s).
tar -C "$DIR" -cf - programs | xz -6 -T "$JOBS" >"$DIR/programs.tar.xz"
rm -rf "$DIR/programs"

# 4. The Python checks and the check itself.
cp "$ROOT"/tests/gpu_check/python/*.py "$DIR/python/"
cp "$ROOT/tests/gpu_check/gpu-check.sh" "$ROOT/tests/gpu_check/gpu_check.py" "$DIR/"
chmod +x "$DIR/gpu-check.sh"

bytes=$(du -sb "$DIR" | cut -f1)
{
  echo "gpupool GPU validation bundle"
  echo "commit: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release)"
  echo "nvcc: $("$NVCC" --version | tail -n 1)"
  echo "nvcc flags: ${NVCC_FLAGS[*]} (tests/programs: $BASIC_GENCODE; tests/emu_programs: $EMU_GENCODE)"
  echo "programs taken from the build: $copied"
  echo "size: $bytes bytes"
  echo "toolkit programs link these shared libraries from the GPU machine: $(
    printf '%s\n' "${toolkit_libs[@]}" | sort -u | tr '\n' ' ')"
} >"$DIR/BUNDLE"
say "$DIR: $(du -sh "$DIR" | cut -f1) ($bytes bytes), $((SECONDS - started)) s"
((bytes < MAX_BYTES)) || die "the bundle is $bytes bytes, over the 64 MiB budget"
