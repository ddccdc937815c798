#!/usr/bin/env bash
# Checks that every test of a built tree carries exactly one of the suite labels unit, e2e, emu,
# pool, hardening, rdma (docs/testing.md), and prints how many tests each label has (tsan too: the
# subset the ThreadSanitizer stage runs). Runs `ctest -N` only: a few seconds.
#
#   scripts/check-test-labels.sh [BUILD_DIR]      (default build/)
#
# The tree must be built: a test executable that is not built shows up as one unlabelled
# <target>_NOT_BUILT test.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-${BUILD_DIR:-$ROOT/build}}
SUITE_LABELS=(unit e2e emu pool hardening rdma)
SUITES_REGEX="^($(IFS='|'; echo "${SUITE_LABELS[*]}"))\$"

# `ctest -N` ends with "Total Tests: N".
count() {
  ctest --test-dir "$BUILD" -N "$@" | sed -nE 's/^Total Tests: ([0-9]+)$/\1/p'
}

total=$(count)
if [[ -z $total ]]; then
  echo "check-test-labels: ctest found no test list in $BUILD" >&2
  exit 2
fi
labelled=$(count -L "$SUITES_REGEX")
summary="$total tests:"
sum=0
for label in "${SUITE_LABELS[@]}"; do
  n=$(count -L "^$label\$")
  summary+=" $label $n"
  sum=$((sum + n))
done
echo "check-test-labels: $summary (tsan $(count -L '^tsan$'))"
status=0
if ((labelled != total)); then
  echo "check-test-labels: $((total - labelled)) tests carry none of ${SUITE_LABELS[*]}:"
  ctest --test-dir "$BUILD" -N -LE "$SUITES_REGEX" | sed -nE 's/^ *Test +#[0-9]+: (.*)$/  \1/p'
  status=1
fi
if ((sum != labelled)); then
  echo "check-test-labels: $((sum - labelled)) labels too many: a test carries two suite labels"
  status=1
fi
# gpupool_label_suites (tests/CMakeLists.txt) stands a failing <target>.no_suite.<Suite> test in
# for a suite it was told to label and did not find.
missing=$(ctest --test-dir "$BUILD" -N -R '\.no_suite\.' | sed -nE 's/^ *Test +#[0-9]+: (.*)$/  \1/p')
if [[ -n $missing ]]; then
  echo "check-test-labels: suites named in gpupool_label_suites have no tests (renamed?):"
  echo "$missing"
  status=1
fi
exit $status
