#!/usr/bin/env bash
# Checks EMU_FASTMATH_SAME_AS_DEFAULT (tests/emu_programs/CMakeLists.txt): the emu programs whose
# PTX `-use_fast_math` does not change, which the suite's fastmath flavour leaves out because it
# would run the same kernels again. Compiles every program to PTX with and without the flag (the
# suite's flags otherwise, `nvcc -ptx`: device code only) and compares. Fails when a listed
# program's PTX differs (the flavour would lose coverage: take it off the list); names unlisted
# programs whose PTX is the same (they may join it). About 80 s on 2 cores; run it after changing a
# program's device code. Not in CI, where it would cost most of what the list saves.
#
#   scripts/check-fastmath-list.sh [-j JOBS]      (default 2)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=2
if [[ ${1:-} == -j ]]; then
  JOBS=${2:?-j needs a number}
elif [[ -n ${1:-} ]]; then
  echo "usage: scripts/check-fastmath-list.sh [-j JOBS]" >&2
  exit 2
fi
NVCC=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
if [[ ! -x $NVCC ]]; then
  echo "check-fastmath-list: nvcc not found (PATH, CUDA_HOME or /usr/local/cuda/bin)" >&2
  exit 2
fi
CMAKELISTS=$ROOT/tests/emu_programs/CMakeLists.txt
listed=$(sed -nE 's/^set\(EMU_FASTMATH_SAME_AS_DEFAULT (.*)\)$/\1/p' "$CMAKELISTS")
if [[ -z $listed ]]; then
  echo "check-fastmath-list: no one-line set(EMU_FASTMATH_SAME_AS_DEFAULT ...) in $CMAKELISTS" >&2
  exit 2
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
compare() {
  local source=$1 name
  name=$(basename "$source" .cu)
  local flags=(-std=c++17 -I"$ROOT/tests/programs" -ptx)
  "$NVCC" "${flags[@]}" "$source" -o "$WORK/$name.default.ptx"
  "$NVCC" "${flags[@]}" -use_fast_math "$source" -o "$WORK/$name.fastmath.ptx"
  if cmp -s "$WORK/$name.default.ptx" "$WORK/$name.fastmath.ptx"; then
    echo "same $name"
  else
    echo "differs $name"
  fi
}
export -f compare
export NVCC ROOT WORK
find "$ROOT/tests/emu_programs/programs" -name '*.cu' | sort |
  xargs -P "$JOBS" -I{} bash -c 'compare "$@"' _ {} >"$WORK/results"

status=0
while read -r verdict name; do
  inList=false
  for p in $listed; do [[ $p == "$name" ]] && inList=true; done
  if [[ $verdict == differs && $inList == true ]]; then
    echo "check-fastmath-list: $name is listed, but -use_fast_math changes its PTX: take it off" \
      "EMU_FASTMATH_SAME_AS_DEFAULT" >&2
    status=1
  elif [[ $verdict == same && $inList == false ]]; then
    echo "check-fastmath-list: $name's PTX is the same with -use_fast_math: it may join the list"
  fi
done <"$WORK/results"
for p in $listed; do
  grep -q " $p\$" "$WORK/results" || {
    echo "check-fastmath-list: $p is listed but is no program in tests/emu_programs/programs" >&2
    status=1
  }
done
echo "check-fastmath-list: $(grep -c '^same' "$WORK/results") of $(wc -l <"$WORK/results")" \
  "programs have the same PTX with -use_fast_math; $(wc -w <<<"$listed") listed"
exit $status
