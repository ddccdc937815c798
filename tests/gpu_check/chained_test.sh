#!/usr/bin/env bash
# ctest gpu_check_chained: builds the GPU validation bundle, checks that it is under 64 MiB, runs
# gpu-check.sh --chained (which unpacks the programs) and checks that the bundle is self-contained
# (its binaries start with an empty environment and need nothing outside it but glibc). Every
# program must pass natively (straight to the emu server) and pooled (through the cuda backend),
# the toolkit and Python items must skip with a reason, and the last line must say "N passed, 0
# failed".
#
#   chained_test.sh BUILD_DIR BUNDLE_DIR RESULTS_DIR
#
# The bundle takes gpupoold, gpupool and libcuda.so.1 from BUILD_DIR when patchelf is there
# (scripts/install-deps.sh installs it), else builds its own (minutes more).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$1
BUNDLE=$2
RESULTS=$3
GLIBC_LIBS='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso)\.so'
problems=0
problem() {
  echo "chained_test: $*" >&2
  problems=$((problems + 1))
}

started=$SECONDS
if command -v patchelf >/dev/null; then
  "$ROOT/scripts/gpu-bundle.sh" --from-build "$BUILD" "$BUNDLE"
else
  echo "chained_test: no patchelf: the bundle builds its own gpupoold, gpupool, libcuda.so.1"
  GPU_BUNDLE_BUILD_DIR=$BUILD/gpu-bundle-build "$ROOT/scripts/gpu-bundle.sh" "$BUNDLE"
fi
echo "chained_test: bundle built in $((SECONDS - started)) s"

bytes=$(du -sb "$BUNDLE" | cut -f1)
((bytes < 64 * 1024 * 1024)) || problem "the bundle is $bytes bytes, over 64 MiB"

started=$SECONDS
set +e
# --trace-export-tables with the tools-callback table ({8C7994A0-...}, which our libcuda serves and
# cudart calls at startup): the trace library's trampolines must run in every native run.
GPU_CHECK_TRACE_TABLES=8C7994A0 "$BUNDLE/gpu-check.sh" --chained --trace-export-tables \
  --out "$RESULTS" | tee "$RESULTS.log"
status=${PIPESTATUS[0]}
set -e
echo "chained_test: gpu-check.sh --chained took $((SECONDS - started)) s"
# gpu-check.sh unpacked programs.tar.xz into the bundle when it started.
[[ -d $BUNDLE/programs ]] || problem "gpu-check.sh did not unpack programs.tar.xz"
# Nothing outside the bundle but glibc, resolved with an empty environment (no LD_LIBRARY_PATH),
# from each executable and from libcuda.so.1 (lib/deps are found through their RPATH, so they are
# checked as what those load). libcuda.so.1 itself is the machine's or ours, found at run time;
# the toolkit programs also link the machine's CUDA libraries (libcu*, libnv*).
mapfile -t roots < <(find "$BUNDLE/bin" "$BUNDLE/programs" -type f ! -name NEEDS -print;
  echo "$BUNDLE/lib/libcuda.so.1"; echo "$BUNDLE/lib/libnvidia-ml.so.1"
  echo "$BUNDLE/lib/trace/libgpupool_export_trace.so")
for elf in "${roots[@]}"; do
  toolkit_program=false
  [[ $elf == "$BUNDLE/programs/toolkit/"* ]] && toolkit_program=true
  while read -r soname arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $soname =~ $GLIBC_LIBS || $soname == libcuda.so.1 ]] && continue
    $toolkit_program && [[ $soname =~ ^lib(cu|nv) ]] && continue
    if [[ $path == "not" ]]; then
      problem "$elf: $soname not found"
    elif [[ $(realpath "$path") != "$(realpath "$BUNDLE")"/* ]]; then
      problem "$elf: $soname resolves outside the bundle, to $path"
    fi
  done < <(env -i ldd "$elf")
done
for binary in gpupoold gpupool; do
  env -i "$BUNDLE/bin/$binary" --help >/dev/null || problem "env -i bin/$binary --help failed"
done

last=$(tail -n 1 "$RESULTS.log")
[[ $last =~ ^[0-9]+\ passed,\ 0\ failed$ ]] || problem "last line is '$last'"
((status == 0)) || problem "gpu-check.sh --chained exited with $status"
python3 - "$RESULTS/results.json" "$BUNDLE" <<'PYTHON' || problem "results.json does not hold what it must"
import json, os, sys
results = json.load(open(sys.argv[1]))
items = {item["name"]: item for item in results["items"]}
bundle = sys.argv[2]
ok = True
def need(condition, what):
    global ok
    if not condition:
        print("chained_test: " + what, file=sys.stderr)
        ok = False
programs = ["%s/%s" % (group, name) for group in ("basic", "emu")
            for name in os.listdir(os.path.join(bundle, "programs", group))]
need(len(programs) >= 35, "only %d programs in the bundle" % len(programs))
for name in programs:
    item = items.get(name, {})
    if name in ("basic/multi_device", "basic/ipc_memory", "basic/ipc_memory_driver",
                "basic/ipc_event", "basic/ipc_event_driver"):
        need(item.get("status") == "skip", "%s must skip (one device; no IPC on the cuda "
             "backend)" % name)
        continue
    need(item.get("status") == "pass", "%s: %s" % (name, item.get("reason", item.get("status"))))
    need(item.get("native", {}).get("seconds", 0) > 0 and item.get("pooled", {}).get("seconds", 0) > 0,
         "%s: no native and pooled times" % name)
for name, item in items.items():
    if name.startswith(("toolkit/", "python/")):
        need(item["status"] == "skip" and item.get("reason"), "%s must skip with a reason" % name)
need(sum(n.startswith("toolkit/") for n in items) >= 8, "fewer than 8 toolkit programs")
need(sum(n.startswith("python/") for n in items) >= 15, "fewer than 15 Python checks")
need(items.get("bench", {}).get("status") == "pass", "gpupool bench failed")
# The texture probe's answers, kept from the native run (here the emu's): the forms the emu refuses
# say so, and the isotropic levels of detail are read out (8 texels across: level 3).
probe = items.get("probe/texture_answers", {})
answers = probe.get("answers", {})
need(probe.get("status") == "pass", "probe/texture_answers: %s"
     % probe.get("reason", probe.get("status")))
need(answers.get("channel_queries", "").startswith("refused:")
     and answers.get("cube_grad_lod", "").startswith("refused:")
     and answers.get("grad2d_lod.anisotropy16", "").startswith("refused:")
     and answers.get("grad2d_lod.anisotropy0.iso_8") == "3.00000",
     "probe/texture_answers: answers %s" % answers)
need(results["failed"] == 0, "%d items failed" % results["failed"])
# The trace of a cudart program: the table it asked for, its slots, and calls through them.
trace_path = os.path.join(os.path.dirname(sys.argv[1]), "logs", "basic_events.native.trace")
trace = open(trace_path).read() if os.path.exists(trace_path) else ""
need("table {8C7994A0-742E-742E-93F2-0800200C0A66}" in trace and "traced as table" in trace
     and "call cuGetExportTable {8C7994A0-742E-742E-93F2-0800200C0A66} slot " in trace,
     "%s does not show calls through the traced table" % trace_path)
# nvidia-smi's private NVML table traced the same way, where a local nvidia-smi is installed
# (scripts/install-deps.sh): dmon's first call through it is slot 72, which our library refuses.
smi = os.environ.get("GPUPOOL_NVIDIA_SMI", "/usr/local/libexec/gpupool/nvidia-smi")
if os.access(smi, os.X_OK):
    traces = items.get("nvml", {}).get("smi_traces", {})
    dmon = traces.get("pooled_dmon", {}) if isinstance(traces, dict) else {}
    slot72 = dmon.get("slots", {}).get("72", {})
    need(slot72.get("calls", 0) >= 1 and slot72.get("result") == "0x3",
         "nvml smi_traces: nvidia-smi dmon's slot 72 not traced as refused: %s" % traces)
sys.exit(0 if ok else 1)
PYTHON

if ((problems)); then
  echo "chained_test: $problems problems"
  exit 1
fi
echo "chained_test: the bundle is $bytes bytes; chained flow passed"
