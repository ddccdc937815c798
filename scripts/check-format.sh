#!/usr/bin/env bash
# Checks that every C, C++ and CUDA source of the repository is formatted as .clang-format says
# (clang-format --dry-run -Werror). Lists the files that are not and exits 1; fix them with
# `clang-format -i FILE...`. Build trees and generated sources are not in git, so they are not
# checked.
#
#   scripts/check-format.sh            (env CLANG_FORMAT, default clang-format)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
cd "$ROOT"

if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check-format: $CLANG_FORMAT not found (apt-get install clang-format)" >&2
  exit 2
fi

# Tracked files and new ones not yet added (but not ignored ones: build trees).
mapfile -d '' sources < <(git ls-files -z --cached --others --exclude-standard \
  -- '*.h' '*.hpp' '*.c' '*.cc' '*.cpp' '*.cu' '*.cuh')
existing=()
for f in "${sources[@]}"; do
  [[ -f $f ]] && existing+=("$f")  # a file deleted but not yet staged is still listed
done
if ((${#existing[@]} == 0)); then
  echo "check-format: no sources found under $ROOT" >&2
  exit 2
fi

report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
printf '%s\0' "${existing[@]}" | xargs -0 "$CLANG_FORMAT" --dry-run -Werror >"$report" 2>&1 || status=$?
# clang-format names each offending file in its diagnostics ("FILE:LINE:COL: error: ...").
mapfile -t offenders < <(sed -nE 's/^([^ :]+):[0-9]+:[0-9]+: (error|warning): .*/\1/p' "$report" |
  sort -u)
if ((status != 0 && ${#offenders[@]} == 0)); then
  echo "check-format: $CLANG_FORMAT failed (status $status) without naming a file:" >&2
  cat "$report" >&2
  exit 2
fi

if ((${#offenders[@]})); then
  echo "check-format: ${#offenders[@]} of ${#existing[@]} files are not clang-format clean:"
  printf '  %s\n' "${offenders[@]}"
  echo "fix with: clang-format -i ${offenders[*]}"
  exit 1
fi
echo "check-format: ${#existing[@]} files clang-format clean"
