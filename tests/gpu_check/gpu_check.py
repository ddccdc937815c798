#!/usr/bin/env python3
"""The GPU validation check (docs/gpu-validation.md); gpu-check.sh runs it from the bundle.

Normal mode serves the machine's real libcuda.so.1 with `gpupoold --backend cuda` on loopback and
runs every item twice: natively (the real driver) and pooled (our libcuda.so.1 first on
LD_LIBRARY_PATH, GPU_POOL_ENDPOINT at that server). --chained runs the same flow without a GPU:
an emu server, and a cuda-backend server whose driver is our own libcuda.so.1 pointed at it;
"native" then means straight to the emu server.

Every run is its own process with a timeout, so a crash or a hang shows as that item's failure
and the rest still run; a server that dies is restarted. Standard library only: the GPU machine
has nothing of ours installed.
"""

import argparse
import glob
import json
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

BUNDLE = os.path.dirname(os.path.abspath(__file__))
OUR_LIB = os.path.join(BUNDLE, "lib")
GPUPOOLD = os.path.join(BUNDLE, "bin", "gpupoold")
GPUPOOL = os.path.join(BUNDLE, "bin", "gpupool")
EXPORT_TRACE = os.path.join(BUNDLE, "lib", "trace", "libgpupool_export_trace.so")
# The CUDA programs: scripts/gpu-bundle.sh packs them into programs.tar.xz (they share most of their
# bytes, static cudart, so packed they fit the bundle's 64 MiB); unpack_programs() unpacks them
# here, or into a temporary folder when the bundle is read-only.
PROGRAMS = os.path.join(BUNDLE, "programs")


def unpack_programs():
    global PROGRAMS
    packed = os.path.join(BUNDLE, "programs.tar.xz")
    if os.path.isdir(PROGRAMS) or not os.path.exists(packed):
        return
    import tarfile
    import tempfile
    into = BUNDLE if os.access(BUNDLE, os.W_OK) else tempfile.mkdtemp(prefix="gpu-check-")
    with tarfile.open(packed) as archive:
        for member in archive.getmembers():
            if not (member.isfile() or member.isdir()) or member.name.startswith(("/", "..")) \
                    or "/../" in member.name:
                raise RuntimeError("programs.tar.xz: unexpected entry " + member.name)
        archive.extractall(into)
    PROGRAMS = os.path.join(into, "programs")
SKIP_EXIT = 77
MAX_STARTS = 5  # per server, the first start included

# Programs that end in a specific way instead of exit 0 and a last line "PASS": the exit code and
# a fragment their output must contain (as tests/emu_programs/program_suite_test.cc expects).
SPECIAL_ENDINGS = {
    "emu/device_assert": (42, "cudaDeviceSynchronize after failing assert: cudaErrorAssert"),
    "emu/out_of_bounds": (43, "cudaDeviceSynchronize after the bad store: cudaErrorIllegalAddress"),
}
# After the pooled run of one of these (a device-side assert, an illegal address: fatal driver
# errors), gpupoold --backend cuda refuses every call and exits with this status about a second
# later, for its supervisor to restart it (--on-device-fault exit; docs/architecture.md, "Fatal
# device faults"). The check waits for that and restarts it, so the next item meets a fresh server.
DEVICE_FAULT_EXIT = 75
# Programs of threads and streams at once that judge by elapsed time or need the device to
# themselves (tests/harness/test_programs.h, concurrencyProgramNames): with other items beside
# them on the machine, they fail natively too. They run alone, after the others.
TIMING_PROGRAMS = {"basic/" + name for name in (
    "concurrent_flag_handoff", "concurrent_flag_handoff_driver", "concurrent_calls_during_sync",
    "concurrent_streams_16", "stream_overlap", "stream_ordering", "stream_ordering_per_thread")}
DEVICE_FAULT_EXIT_WAIT = 10  # seconds
# Programs whose key=value lines (device properties) must be the same natively and pooled;
# export_tables_driver: which private driver tables NVIDIA's libraries ask for the driver has.
COMPARE_KEY_VALUES = {"basic/device_query", "basic/export_tables_driver"}
# Probes (tests/gpu_check/probes) print what the GPU answers where no document says: their
# key=value lines must be the same natively and pooled too, and the native ones are kept in
# results.json ("answers") for the emu to follow.
PROBE_GROUP = "probe"
# CUDA IPC between two processes is served by the emu backend only; the pooled run goes through
# the cuda backend, which refuses it (docs/architecture.md, CUDA IPC memory).
IPC_NOT_POOLED = ("the cuda backend refuses CUDA IPC memory and event handles (one server "
                  "process holds every session's contexts)")
ALWAYS_SKIPPED = {"basic/multi_device": "needs two devices; the check serves one",
                  "basic/ipc_memory": IPC_NOT_POOLED,
                  "basic/ipc_memory_driver": IPC_NOT_POOLED,
                  "basic/ipc_event": IPC_NOT_POOLED,
                  "basic/ipc_event_driver": IPC_NOT_POOLED}
# Where NVIDIA's driver is installed on common distributions and containers.
DRIVER_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/libcuda.so.1",
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
]
CLIENT_VARIABLES = ("GPU_POOL_ENDPOINT", "GPU_POOL_LOG", "GPU_POOL_CONNECT_TIMEOUT_MS",
                    "GPU_POOL_CALL_TIMEOUT_MS", "GPU_POOL_TOKEN", "GPU_POOL_TRANSPORT",
                    "GPU_POOL_LIBRARY_DIR")


def parse_args():
    parser = argparse.ArgumentParser(
        prog="gpu-check.sh",
        description="Runs the bundle's programs and Python checks natively and through a "
        "loopback gpupoold --backend cuda; ends with 'N passed, M failed'.")
    parser.add_argument("--chained", action="store_true",
                        help="no GPU: serve an emu server through gpupoold --backend cuda "
                        "--driver BUNDLE/lib/libcuda.so.1")
    parser.add_argument("--out", default="gpu-check-results",
                        help="folder for results.json, the table and the logs "
                        "(default ./gpu-check-results)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds each run of an item may take (default: programs 30, the "
                        "bench and Python checks 120; --chained 240 for all)")
    parser.add_argument("--budget", type=float, default=450,
                        help="seconds for the whole check (default 450); items left when it is "
                        "spent are skipped, and runs get at most what is left")
    parser.add_argument("--driver", help="the machine's libcuda.so.1 (default: found via "
                        "ldconfig and the usual paths)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only items whose name contains this (repeatable)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="items run at once (default: 6 on a GPU, 2 --chained); the bench "
                        "runs alone first, the timing programs and the items that fault the "
                        "device alone last")
    parser.add_argument("--trace-export-tables", action="store_true",
                        help="native runs preload lib/trace/libgpupool_export_trace.so, which "
                        "logs the calls through the private export tables our libcuda lacks "
                        "(GPU_CHECK_TRACE_TABLES picks others) into logs/ITEM.native.trace")
    parser.add_argument("--list", action="store_true", help="list the items and exit")
    args = parser.parse_args()
    if args.jobs is None:
        args.jobs = 2 if args.chained else 6
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


# Per run, by kind, unless --timeout says: on a GPU a program takes seconds (the longest, 2 s), so
# a hang is known after 30; the first GPU run spent its whole budget on four hangs at 75 s each.
GPU_TIMEOUTS = {"program": 30.0, "toolkit": 30.0, "bench": 120.0, "python": 120.0, "nvml": 30.0}
CHAINED_TIMEOUT = 240.0


# ---------------------------------------------------------------------------------------------
# Locating the machine's driver and toolkit libraries


def ldconfig_paths(soname):
    """Paths ldconfig's cache knows for a soname (x86-64 ones first)."""
    try:
        text = subprocess.run(["ldconfig", "-p"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, universal_newlines=True,
                              timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        try:
            text = subprocess.run(["/sbin/ldconfig", "-p"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, universal_newlines=True,
                                  timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return []
    found = []
    for line in text.splitlines():
        parts = line.strip().split(" => ")
        if len(parts) == 2 and parts[0].split(" ")[0] == soname:
            found.append((0 if "x86-64" in parts[0] else 1, parts[1].strip()))
    return [path for _, path in sorted(found)]


def inside_bundle(path):
    return os.path.realpath(path).startswith(os.path.realpath(BUNDLE) + os.sep)


def find_real_driver(given):
    if given:
        return os.path.abspath(given) if os.path.exists(given) else None
    for path in ldconfig_paths("libcuda.so.1") + DRIVER_CANDIDATES:
        if os.path.exists(path) and not inside_bundle(path):
            return os.path.abspath(path)
    return None


def toolkit_library_dirs():
    """Folders that may hold the CUDA toolkit's shared libraries (cuBLAS, cuFFT, ...), best first:
    the toolkit, then the pip wheels PyTorch and JAX bring along."""
    dirs = []
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        dirs += [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]
    dirs += sorted(glob.glob("/usr/local/cuda-*/lib64"), reverse=True)
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for site in sys.path:
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
    dirs += ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"]
    unique = []
    for d in dirs:
        if os.path.isdir(d) and d not in unique and not inside_bundle(d):
            unique.append(d)
    return unique


def find_library_dir(soname, dirs):
    for d in dirs:
        if os.path.exists(os.path.join(d, soname)):
            return d
    for path in ldconfig_paths(soname):
        if os.path.exists(path):
            return os.path.dirname(path)
    return None


# ---------------------------------------------------------------------------------------------
# Processes


class RunResult:
    """How a run ended. Its stdout is what is judged (the programs' and checks' PASS/FAIL/SKIP
    lines); stderr (library warnings, tracebacks) only explains failures."""

    def __init__(self, exit_code, seconds, output, timed_out, errors=""):
        self.exit_code = exit_code  # negative: killed by that signal
        self.seconds = seconds
        self.output = output
        self.errors = errors
        self.timed_out = timed_out

    def lines(self):
        return [line.rstrip() for line in self.output.splitlines()]

    def last_line(self):
        for line in reversed(self.lines()):
            if line.strip():
                return line.strip()
        return ""

    def explanation(self):
        """The last line of stdout, or of stderr when that says more (a traceback's last line)."""
        last = self.last_line()
        if last.startswith(("FAIL", "SKIP")) or not self.errors.strip():
            return last
        return "%s | stderr: %s" % (last, self.errors.strip().splitlines()[-1].strip())

    def skip_reason(self):
        for line in self.lines():
            if line.startswith("SKIP"):
                return line.split(":", 1)[1].strip() if ":" in line else line
        return "exit code 77" if self.exit_code == SKIP_EXIT else None

    def describe(self):
        if self.timed_out:
            return "timed out after %.0f s" % self.seconds
        if self.exit_code < 0:
            try:
                name = signal.Signals(-self.exit_code).name
            except ValueError:
                name = str(-self.exit_code)
            return "killed by %s" % name
        return "exit code %d" % self.exit_code


def run_process(argv, env, timeout, log_path, line_buffered=False):
    """Runs argv in its own process group, stdout to log_path and stderr to log_path.stderr; the
    whole group is killed on timeout. line_buffered: through stdbuf -oL where there is one, so that
    a program killed on a hang has logged its last finished step (a C program writing to a file
    buffers its whole output, which the kill loses)."""
    started = time.monotonic()
    if line_buffered and STDBUF:
        argv = [STDBUF, "-oL", "-eL"] + list(argv)
    with open(log_path, "w+") as log, open(log_path + ".stderr", "w+") as errors:
        try:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=errors,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as error:
            errors.write("cannot start %s: %s\n" % (argv[0], error))
            return RunResult(127, 0.0, "cannot start %s: %s" % (argv[0], error), False)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
        seconds = time.monotonic() - started
        kill_group(proc)  # anything the item left behind
        log.seek(0)
        errors.seek(0)
        return RunResult(proc.returncode, seconds, log.read(), timed_out, errors.read())


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


STDBUF = shutil.which("stdbuf")


def clean_environment(extra):
    """The caller's environment without gpupool's client settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
    env.update(extra)
    return env


def library_path(dirs):
    """LD_LIBRARY_PATH: `dirs` first, then the caller's own (containers and conda environments set
    it for their CUDA libraries)."""
    caller = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    return ":".join(dirs + [d for d in caller if d not in dirs])


class Server:
    """A gpupoold on a loopback port the kernel picks; its log goes to a file."""

    def __init__(self, name, args, env, log_dir):
        self.name = name
        self.args = args
        self.env = env
        self.log_path = os.path.join(log_dir, "gpupoold-%s.log" % name)
        self.proc = None
        self.endpoint = None
        self.starts = 0

    def start(self, timeout=60):
        self.starts += 1
        log = open(self.log_path, "a")
        log.write("=== start %d: %s\n" % (self.starts, " ".join(self.args)))
        log.flush()
        self.proc = subprocess.Popen([GPUPOOLD, "--listen", "tcp://127.0.0.1:0"] + self.args,
                                     env=self.env, stdout=subprocess.PIPE, stderr=log,
                                     stdin=subprocess.DEVNULL, universal_newlines=True,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        # The first stdout line names the endpoint; the rest is drained into the log.
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                break
            match = re.search(r"listening on (tcp://\S+)", line)
            if match:
                self.endpoint = match.group(1)
                self._drain_stdout()
                return
        self.stop()
        last = [line for line in tail(self.log_path, 5).splitlines() if line.strip()]
        raise RuntimeError("gpupoold (%s) did not start: %s (log: %s)"
                           % (self.name, last[-1] if last else "no output", self.log_path))

    def _drain_stdout(self):
        import threading

        def drain(stream, path):
            with open(path, "a") as log:
                for line in stream:
                    log.write(line)
                    log.flush()

        threading.Thread(target=drain, args=(self.proc.stdout, self.log_path),
                         daemon=True).start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def ensure_running(self):
        """Restarts a server that died; returns how it ended, or None when it was running. A
        server that keeps dying is left down (its runs then fail at once) after MAX_STARTS."""
        if self.alive():
            return None
        ended = "exit code %s" % self.proc.returncode if self.proc else "not running"
        if self.starts >= MAX_STARTS:
            return ended + "; not restarted: started %d times already" % self.starts
        try:
            self.start()
            return ended + "; restarted"
        except RuntimeError as error:
            return ended + "; the restart failed: %s" % error

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                kill_group(self.proc)
        self.proc = None


def tail(path, lines=30):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# Items


class Item:
    def __init__(self, name, kind, argv, needs=(), requires=None):
        self.name = name  # basic/vector_add, emu/..., toolkit/..., python/..., bench
        self.kind = kind  # program | toolkit | python | bench
        self.argv = argv
        self.needs = list(needs)  # toolkit sonames the program links
        self.requires = requires  # the Python module a check needs


def python_requirement(path):
    """A Python check names its module in a line '# gpu-check: requires MODULE'."""
    with open(path) as f:
        for line in f:
            match = re.match(r"#\s*gpu-check:\s*requires\s+(\S+)", line)
            if match:
                return match.group(1)
    return None


def toolkit_needs():
    needs = {}
    path = os.path.join(PROGRAMS, "toolkit", "NEEDS")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                words = line.split()
                if words:
                    needs[words[0]] = words[1:]
    return needs


def discover_items():
    items = []
    for group in ("basic", "emu", PROBE_GROUP):
        for path in sorted(glob.glob(os.path.join(PROGRAMS, group, "*"))):
            if os.access(path, os.X_OK) and os.path.isfile(path):
                name = "%s/%s" % (group, os.path.basename(path))
                items.append(Item(name, "program", [path]))
    needs = toolkit_needs()
    for path in sorted(glob.glob(os.path.join(PROGRAMS, "toolkit", "*"))):
        base = os.path.basename(path)
        if os.access(path, os.X_OK) and os.path.isfile(path):
            items.append(Item("toolkit/" + base, "toolkit", [path], needs=needs.get(base, [])))
    items.append(Item("bench", "bench", [GPUPOOL, "bench", "--json"]))
    if os.path.isdir(os.path.join(PROGRAMS, "nvml")):
        items.append(Item("nvml", "nvml", []))
    for path in sorted(glob.glob(os.path.join(BUNDLE, "python", "*.py"))):
        base = os.path.basename(path)
        if base.startswith("_"):
            continue
        items.append(Item("python/" + base[:-3], "python", [sys.executable, path],
                          requires=python_requirement(path)))
    return items


def module_available(module):
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class Check:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        self.logs = os.path.join(self.out, "logs")
        self.artifacts = os.path.join(self.out, "artifacts")
        os.makedirs(self.logs, exist_ok=True)
        os.makedirs(self.artifacts, exist_ok=True)
        self.servers = []
        self.driver = None
        self.library_dirs = toolkit_library_dirs()
        self.native_endpoint = None  # chained: the emu server
        self.emu = None
        self.cuda = None
        self.deadline = time.monotonic() + args.budget
        # Items run on several threads (--jobs): restarting a server is done by one at a time.
        self.server_lock = threading.RLock()

    # --- servers -------------------------------------------------------------------------------

    def start_servers(self):
        """Starts the servers; raises RuntimeError when nothing could run. A cuda server that does
        not start is reported and the items still run (their pooled runs fail)."""
        if self.args.chained:
            self.emu = Server("emu", ["--backend", "emu"], clean_environment({}), self.logs)
            self.emu.start()
            self.servers.append(self.emu)
            self.native_endpoint = self.emu.endpoint
            self.driver = os.path.join(OUR_LIB, "libcuda.so.1")
            cuda_env = clean_environment({"GPU_POOL_ENDPOINT": self.emu.endpoint})
        else:
            self.driver = find_real_driver(self.args.driver)
            if self.driver is None:
                raise RuntimeError(
                    "no NVIDIA driver (libcuda.so.1) found via ldconfig or in %s; pass --driver "
                    "PATH, or run --chained on a machine without a GPU"
                    % ", ".join(DRIVER_CANDIDATES))
            cuda_env = clean_environment({})
        self.cuda = Server("cuda", ["--backend", "cuda", "--driver", self.driver], cuda_env,
                           self.logs)
        self.servers.append(self.cuda)
        try:
            self.cuda.start()
        except RuntimeError as error:
            return str(error)
        return None

    def await_device_fault_exit(self):
        """After an item whose kernel faults fatally: waits for the cuda server's exit with
        DEVICE_FAULT_EXIT and restarts it (not counted against MAX_STARTS). Returns what happened,
        or None when the server did not exit so (ensure_servers then reports it if it died)."""
        deadline = time.monotonic() + DEVICE_FAULT_EXIT_WAIT
        while self.cuda.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.cuda.alive() or self.cuda.proc is None:
            return None
        if self.cuda.proc.returncode != DEVICE_FAULT_EXIT:
            return None
        try:
            self.cuda.start()
            self.cuda.starts -= 1  # an expected restart
        except RuntimeError as error:
            return "gpupoold --backend cuda exited with %d; the restart failed: %s" % (
                DEVICE_FAULT_EXIT, error)
        return "gpupoold --backend cuda exited with %d after the fault, as it should; restarted" % (
            DEVICE_FAULT_EXIT)

    def ensure_servers(self):
        """Restarts what died since the last item; says what died, or returns None. In chained mode
        a new emu server means a new endpoint, so the cuda server restarts pointed at it."""
        with self.server_lock:
            return self._ensure_servers()

    def _ensure_servers(self):
        died = []
        emu_restarted = False
        if self.emu is not None and not self.emu.alive():
            died.append("the emu server (%s)" % self.emu.ensure_running())
            self.native_endpoint = self.emu.endpoint
            self.cuda.env["GPU_POOL_ENDPOINT"] = self.emu.endpoint
            self.cuda.stop()  # restarted below, pointed at the new emu server
            emu_restarted = True
        if not self.cuda.alive():
            ended = self.cuda.ensure_running()
            if not emu_restarted:
                died.append("gpupoold --backend cuda (%s)" % ended)
        return "; ".join(died) or None

    def remaining(self):
        return self.deadline - time.monotonic()

    def stop_servers(self):
        for server in reversed(self.servers):
            server.stop()

    # --- environments --------------------------------------------------------------------------

    def native_env(self, lib_dirs):
        if self.args.chained:
            return clean_environment({"LD_LIBRARY_PATH": library_path([OUR_LIB] + lib_dirs),
                                      "GPU_POOL_ENDPOINT": self.native_endpoint})
        return clean_environment({"LD_LIBRARY_PATH": library_path(lib_dirs)})

    def pooled_env(self, lib_dirs):
        # GPU_POOL_LOG=1: every failed remote call names itself and the server's reason on stderr,
        # which the run's .stderr log keeps.
        return clean_environment({"LD_LIBRARY_PATH": library_path([OUR_LIB] + lib_dirs),
                                  "GPU_POOL_ENDPOINT": self.cuda.endpoint, "GPU_POOL_LOG": "1"})

    # --- one item ------------------------------------------------------------------------------

    def skip_reason(self, item):
        if item.name in ALWAYS_SKIPPED:
            return ALWAYS_SKIPPED[item.name]
        if item.kind == "toolkit":
            if self.args.chained:
                return ("chained mode has no GPU: the emu device cannot run the library's "
                        "precompiled kernels")
            missing = [s for s in item.needs if not find_library_dir(s, self.library_dirs)]
            if missing:
                return "%s not found (looked in the CUDA toolkit, LD_LIBRARY_PATH, ldconfig and " \
                    "pip's nvidia/*/lib)" % ", ".join(missing)
        if item.kind == "python":
            if item.requires and not module_available(item.requires):
                return "Python module %s is not installed for %s" % (item.requires, sys.executable)
            if self.args.chained:
                return "chained mode has no GPU to run %s's kernels" % (item.requires or "its")
        return None

    def run_item(self, item):
        record = {"name": item.name, "kind": item.kind}
        reason = self.skip_reason(item)
        if reason is None and self.remaining() < 5:
            reason = "the check's --budget of %.0f s is spent" % self.args.budget
        if reason:
            record.update(status="skip", reason=reason)
            return record
        if item.kind == "bench":
            return self.run_bench(record)
        if item.kind == "nvml":
            return self.run_nvml(record)
        lib_dirs = []
        for soname in item.needs:
            d = find_library_dir(soname, self.library_dirs)
            if d not in lib_dirs:
                lib_dirs.append(d)
        if lib_dirs:
            record["library_dirs"] = lib_dirs
        runs = {}
        for mode in ("native", "pooled"):
            artifact = os.path.join(self.artifacts, "%s.%s.json" % (safe(item.name), mode))
            log = os.path.join(self.logs, "%s.%s.log" % (safe(item.name), mode))
            if mode == "pooled" and not self.cuda.alive():
                result = RunResult(1, 0.0, "gpupoold --backend cuda is not running", False)
            else:
                env = self.native_env(lib_dirs) if mode == "native" else self.pooled_env(lib_dirs)
                env["GPU_CHECK_ARTIFACT"] = artifact
                if mode == "native" and self.args.trace_export_tables:
                    env["LD_PRELOAD"] = EXPORT_TRACE
                    env["GPU_CHECK_TRACE_LOG"] = os.path.join(
                        self.logs, "%s.native.trace" % safe(item.name))
                result = run_process(item.argv, env, self.run_timeout(item), log,
                                     line_buffered=item.kind in ("program", "toolkit"))
            runs[mode] = result
            record[mode] = {"outcome": result.describe(), "exit_code": result.exit_code,
                            "seconds": round(result.seconds, 3), "timed_out": result.timed_out,
                            "last_line": result.last_line()[:200], "log": log,
                            "stderr": log + ".stderr"}
            if os.path.exists(artifact):
                record[mode]["artifact"] = artifact
            if mode == "native" and result.skip_reason() is not None:
                record.update(status="skip", reason="native run: " + result.skip_reason())
                return record
        fault = self.await_device_fault_exit() if item.name in SPECIAL_ENDINGS else None
        died = self.ensure_servers()
        problems = self.judge(item, runs["native"], runs["pooled"], record)
        if fault:
            record["device_fault"] = fault
        if died:
            record["server_died"] = died
            problems.append("server down after this item: %s" % died)
        record["status"] = "fail" if problems else "pass"
        if problems:
            record["reason"] = "; ".join(problems)
        return record

    def judge(self, item, native, pooled, record):
        problems = []
        expected_exit, fragment = SPECIAL_ENDINGS.get(item.name, (0, None))

        def check_run(mode, result):
            if result.timed_out or result.exit_code != expected_exit:
                problems.append("%s: %s, expected exit code %d (%s)"
                                % (mode, result.describe(), expected_exit,
                                   result.explanation()[:200]))
            elif fragment is not None and fragment not in result.output:
                problems.append("%s: output lacks '%s'" % (mode, fragment))
            elif fragment is None and result.last_line() != "PASS":
                problems.append("%s: last line is '%s', not PASS"
                                % (mode, result.explanation()[:200]))

        check_run("native", native)
        if pooled.skip_reason() is not None:
            problems.append("pooled: skipped (%s) where the native run ran" % pooled.skip_reason())
        else:
            check_run("pooled", pooled)
        probe = item.name.startswith(PROBE_GROUP + "/")
        if probe:
            record["answers"] = key_values(native.output)
        if item.name in COMPARE_KEY_VALUES or probe:
            differences = key_value_differences(native.output, pooled.output)
            if differences:
                record["differences"] = differences
                problems.append("pooled properties differ: " + ", ".join(
                    "%s native=%s pooled=%s" % (k, a, b) for k, a, b in differences[:8]))
        if item.kind == "python":
            problems += self.compare_artifacts(item, record)
        return problems

    def compare_artifacts(self, item, record):
        """A check that writes a loss curve ({"losses": [...]}) must write the same one pooled."""
        native = record["native"].get("artifact")
        pooled = record["pooled"].get("artifact")
        if not native and not pooled:
            return []
        if not (native and pooled):
            return ["only the %s run wrote %s" % ("native" if native else "pooled",
                                                  os.path.basename(native or pooled))]
        with open(native) as f:
            a = json.load(f).get("losses", [])
        with open(pooled) as f:
            b = json.load(f).get("losses", [])
        if len(a) != len(b) or not a:
            return ["loss curves have %d (native) and %d (pooled) points" % (len(a), len(b))]
        worst = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
        record["loss_curve"] = {"steps": len(a), "first": a[0], "last_native": a[-1],
                                "last_pooled": b[-1], "max_relative_difference": worst,
                                "identical": a == b}
        if worst > 1e-3:
            return ["loss curves differ by up to %.3g (relative)" % worst]
        return []

    def run_bench(self, record):
        if not self.cuda.alive():
            record.update(status="fail", reason="gpupoold --backend cuda is not running")
            return record
        # --quick keeps the whole check inside its 8 minutes.
        argv = [GPUPOOL, "bench", "--json", "--quick", "--endpoint", self.cuda.endpoint]
        if not self.args.chained:
            # The local-driver column needs a real driver: ours would only reach a server again.
            argv += ["--local-driver", self.driver]
        log = os.path.join(self.logs, "bench.log")
        result = run_process(argv, clean_environment({}), min(300, max(5, self.remaining())), log)
        record["pooled"] = {"outcome": result.describe(), "exit_code": result.exit_code,
                            "seconds": round(result.seconds, 3), "log": log}
        text = result.output
        try:
            figures = json.loads(text[text.index("{"):text.rindex("}") + 1])
        except ValueError:
            figures = None
        if figures is not None:
            record["bench"] = figures
        died = self.ensure_servers()
        if result.exit_code == 0 and figures is not None and not died:
            record["status"] = "pass"
            return record
        record["status"] = "fail"
        record["reason"] = "gpupool bench: %s (%s)" % (result.describe(),
                                                       result.explanation()[:200])
        if died:
            record["reason"] += "; server down after it: %s" % died
        return record

    # Fields both smis answer the same for one GPU (memory.total differs: NVIDIA's NVML counts the
    # whole framebuffer, cuMemGetInfo what a context may allocate).
    SMI_FIELDS = "index,name,uuid,pci.bus_id,compute_cap"

    def run_nvml(self, record):
        """Our libnvidia-ml.so.1 against the cuda server, whose NVML is the machine's: nvml_check's
        own checks (sensors answered or refused, as the server's NVML reads them), NVML
        accounting of a pooled CUDA program running and then ended (nvml_accounting), and
        `gpupool smi`, and the machine's nvidia-smi run through our library, against NVIDIA's
        nvidia-smi on the fields that must agree."""
        if not self.cuda.alive():
            record.update(status="fail", reason="gpupoold --backend cuda is not running")
            return record
        programs = os.path.join(PROGRAMS, "nvml")
        env = self.pooled_env([])
        timeout = max(1.0, min(GPU_TIMEOUTS["nvml"] if not self.args.chained
                               else CHAINED_TIMEOUT, self.remaining()))
        problems = []
        runs = {}

        def step(name, argv, environment):
            log = os.path.join(self.logs, "nvml.%s.log" % name)
            result = run_process(argv, environment, timeout, log)
            runs[name] = result
            record[name] = {"outcome": result.describe(), "exit_code": result.exit_code,
                            "seconds": round(result.seconds, 3),
                            "last_line": result.last_line()[:200], "log": log}
            if result.timed_out or result.exit_code != 0:
                problems.append("%s: %s (%s)" % (name, result.describe(),
                                                  result.explanation()[:200]))
                return None
            return result

        checked = step("nvml_check", [os.path.join(programs, "nvml_check")], env)
        if checked is not None:
            text = checked.output
            try:
                record["nvml_check_answers"] = json.loads(text[text.index("{"):
                                                               text.rindex("}") + 1])
            except ValueError:
                problems.append("nvml_check printed no JSON")
        accounting = os.path.join(programs, "nvml_accounting")
        running = step("accounting_running", [accounting], env)
        if running is not None:
            pid = [line.split()[1] for line in running.lines() if line.startswith("pid ")]
            if pid:
                step("accounting_ended", [accounting, "--ended", pid[0]], env)
            else:
                problems.append("accounting_running printed no pid")
        query = ["--query-gpu=" + self.SMI_FIELDS, "--format=csv,noheader"]
        ours = step("gpupool_smi", [GPUPOOL, "smi"] + query, env)
        nvidia_smi = shutil.which("nvidia-smi")
        if self.args.chained or nvidia_smi is None:
            record["nvidia_smi"] = "not compared: " + (
                "chained mode has no GPU" if self.args.chained else "no nvidia-smi on PATH")
        elif ours is not None:
            theirs = step("nvidia_smi", [nvidia_smi] + query, clean_environment({}))
            if theirs is not None and theirs.lines() != ours.lines():
                record["differences"] = {"nvidia_smi": theirs.lines(),
                                         "gpupool_smi": ours.lines()}
                problems.append("gpupool smi and nvidia-smi differ on %s" % self.SMI_FIELDS)
            # The machine's nvidia-smi through our libnvidia-ml.so.1, whose private export table
            # refuses every slot (docs/nvml.md): the same answers as through NVIDIA's, or a
            # failure that says this version needs one of them.
            pooled = step("nvidia_smi_pooled", [nvidia_smi] + query, env)
            if theirs is not None and pooled is not None and pooled.lines() != theirs.lines():
                record["pooled_differences"] = {"nvidia_smi": theirs.lines(),
                                                "nvidia_smi_pooled": pooled.lines()}
                problems.append("nvidia-smi through our NVML and through NVIDIA's differ on %s"
                                % self.SMI_FIELDS)
        self.trace_smi_views(record, nvidia_smi, env, timeout)
        died = self.ensure_servers()
        if died:
            problems.append("server down after this item: %s" % died)
        record["status"] = "fail" if problems else "pass"
        if problems:
            record["reason"] = "; ".join(problems)
        return record

    # The nvidia-smi views that call slots of NVML's private table which our library refuses
    # (docs/nvml.md, "NVIDIA's nvidia-smi"), and the slots each was seen to need there.
    SMI_TRACED_VIEWS = {"dmon": (["dmon", "-c", "1"], [72]),
                        "pmon": (["pmon", "-c", "1"], [72, 145, 213]),
                        "topo": (["topo", "-m"], [23]),
                        "query": (["-q"], [165, 226, 230, 231, 237, 242])}

    def trace_smi_views(self, record, nvidia_smi, pooled_env, timeout):
        """Diagnostics, never a failure: on a GPU, NVIDIA's nvidia-smi on NVIDIA's NVML with the
        trace library preloaded, so the log shows what each private slot our library refuses
        takes and writes there (logs/nvml.native_VIEW.trace; the summary in results.json under
        smi_traces), then the same view through our library. In chained mode, where no NVIDIA
        NVML runs, a locally installed nvidia-smi (GPUPOOL_NVIDIA_SMI, else
        /usr/local/libexec/gpupool/nvidia-smi, which scripts/install-deps.sh unpacks) is traced
        through our library instead, which shows that the tracing works."""
        traces = {}
        if self.args.chained:
            local = os.environ.get("GPUPOOL_NVIDIA_SMI", "/usr/local/libexec/gpupool/nvidia-smi")
            if not os.access(local, os.X_OK):
                record["smi_traces"] = "not run: no nvidia-smi at %s" % local
                return
            runs = [("pooled", local, pooled_env)]
        elif nvidia_smi is None:
            record["smi_traces"] = "not run: no nvidia-smi on PATH"
            return
        else:
            runs = [("native", nvidia_smi, clean_environment({})),
                    ("pooled", nvidia_smi, pooled_env)]
        for view, (arguments, slots) in self.SMI_TRACED_VIEWS.items():
            for mode, binary, environment in runs:
                name = "%s_%s" % (mode, view)
                trace = os.path.join(self.logs, "nvml.%s.trace" % name)
                env = dict(environment, LD_PRELOAD=EXPORT_TRACE, GPU_CHECK_TRACE_LOG=trace,
                           GPU_CHECK_TRACE_TABLES="6C3EFEC4")
                log = os.path.join(self.logs, "nvml.%s.log" % name)
                result = run_process([binary] + arguments, env, min(timeout, 60.0), log)
                traces[name] = {"outcome": result.describe(), "exit_code": result.exit_code,
                                "last_line": result.last_line()[:200], "log": log,
                                "trace": trace, "slots": smi_trace_summary(trace, slots)}
        record["smi_traces"] = traces

    def item_timeout(self, item):
        if self.args.timeout is not None:
            return self.args.timeout
        return CHAINED_TIMEOUT if self.args.chained else GPU_TIMEOUTS[item.kind]

    def run_timeout(self, item):
        return max(1.0, min(self.item_timeout(item), self.remaining()))


def safe(name):
    return name.replace("/", "_")


TRACE_CALL = re.compile(r"^call nvmlInternalGetExportTable \{[0-9A-F-]+\} slot (\d+) #(\d+): "
                        r"args (\S+) (\S+) (\S+) \S+ \S+ \S+ -> (\S+)")


def smi_trace_summary(path, slots):
    """Per slot of `slots` that the trace shows called: how often (the library logs up to 40 calls
    a slot), and its first call's arguments, result and what it wrote behind its second argument
    (most per-device slots take a device handle and an out-pointer)."""
    summary = {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return summary
    current = None
    for line in lines:
        match = TRACE_CALL.match(line)
        if match:
            slot = int(match.group(1))
            current = None
            if slot not in slots:
                continue
            entry = summary.setdefault(str(slot), {"calls": 0})
            entry["calls"] += 1
            if "result" not in entry:
                entry.update(args=[match.group(3), match.group(4), match.group(5)],
                             result=match.group(6))
                current = entry
        elif current is not None and line.startswith("  arg1 after"):
            current["arg1_after"] = line.split("after", 1)[1].strip()
    return summary


def key_values(text):
    """A program's key=value lines, as a dict."""
    result = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("PASS", "FAIL")):
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def key_value_differences(a_text, b_text):
    a, b = key_values(a_text), key_values(b_text)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


# ---------------------------------------------------------------------------------------------
# Report


def seconds_text(record, mode):
    run = record.get(mode)
    return "%.2f" % run["seconds"] if run and "seconds" in run else "-"


def print_line(record):
    status = record["status"].upper()
    line = "%-4s  %-34s native %7s s  pooled %7s s" % (
        status, record["name"], seconds_text(record, "native"), seconds_text(record, "pooled"))
    if record.get("reason"):
        line += "  (%s)" % record["reason"]
    print(line, flush=True)


def table(records):
    rows = [("item", "result", "native s", "pooled s", "pooled/native", "note")]
    for r in records:
        ratio = "-"
        n, p = r.get("native", {}).get("seconds"), r.get("pooled", {}).get("seconds")
        if n and p:
            ratio = "%.2f" % (p / n)
        note = r.get("reason", "")
        if r["name"] == "bench" and r.get("bench"):
            note = bench_summary(r["bench"])
        if r.get("loss_curve"):
            curve = r["loss_curve"]
            note = "loss %.4f -> %.4f, curves %s" % (
                curve["first"], curve["last_native"],
                "identical" if curve["identical"]
                else "differ by %.2g" % curve["max_relative_difference"])
        note = " ".join(note.split())
        rows.append((r["name"], r["status"], seconds_text(r, "native"), seconds_text(r, "pooled"),
                     ratio, note[:110]))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = []
    for index, row in enumerate(rows):
        lines.append("| " + " | ".join(row[i].ljust(widths[i]) for i in range(5)) + " | " + row[5])
        if index == 0:
            lines.append("|-" + "-|-".join("-" * widths[i] for i in range(5)) + "-|---")
    return "\n".join(lines)


def bench_summary(bench):
    parts = []
    try:
        parts.append("null call %.1f us" % bench["gpupool"]["null_call"]["median_us"])
        bw = bench["gpupool"]["bandwidth"]
        parts.append("H2D %.2f GB/s" % bw["h2d_pinned"][-1]["gb_per_s"])
        parts.append("D2H %.2f GB/s" % bw["d2h_pinned"][-1]["gb_per_s"])
        for point in bench.get("graphs", []):
            if point["nodes"] == 100:
                parts.append("100-kernel graph %.1f us vs %.1f us one by one" %
                             (point["graph_launch_us"], point["separate_launches_us"]))
        if "local" in bench:
            local = bench["local"]
            parts.append("local null call %.1f us" % local["null_call"]["median_us"])
            parts.append("local H2D %.2f GB/s" % local["bandwidth"]["h2d_pinned"][-1]["gb_per_s"])
    except (KeyError, IndexError, TypeError):
        pass
    return ", ".join(parts)


def machine_description():
    info = {"hostname": platform.node(), "kernel": platform.release(),
            "python": sys.version.split()[0], "glibc": " ".join(platform.libc_ver())}
    try:
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, timeout=20)
        if query.returncode == 0:
            info["gpus"] = [line.strip() for line in query.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open(os.path.join(BUNDLE, "BUNDLE")) as f:
            info["bundle"] = f.read().strip().splitlines()
    except OSError:
        pass
    return info


def run_one(check, item):
    try:
        return check.run_item(item)
    except Exception as error:  # a bug of the check must not hide the other items
        return {"name": item.name, "kind": item.kind, "status": "fail",
                "reason": "gpu-check itself failed: %r" % error}


def runs_alone(item):
    """The bench and the timing programs measure time, and a device fault makes the cuda server
    exit: each would spoil, or be spoilt by, the items running beside it."""
    return item.kind == "bench" or item.name in SPECIAL_ENDINGS or item.name in TIMING_PROGRAMS


def run_items(check, items, jobs):
    """Runs the bench first (on an idle machine, and before the budget can run out), then the
    items `jobs` at a time, then the timing programs and the device-fault items one by one;
    returns the records in the items' order and prints each as it ends."""
    records = {}
    printing = threading.Lock()

    def finish(index, item):
        record = run_one(check, item)
        with printing:
            records[index] = record
            print_line(record)

    for i, item in enumerate(items):
        if item.kind == "bench":
            finish(i, item)
    # The Python checks take longest (torch.compile 20 s): started first, they do not trail.
    together = sorted(((i, item) for i, item in enumerate(items) if not runs_alone(item)),
                      key=lambda pair: (pair[1].kind != "python", pair[0]))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(finish, i, item) for i, item in together]:
            future.result()
    for i, item in enumerate(items):
        if item.name in TIMING_PROGRAMS:
            finish(i, item)
    for i, item in enumerate(items):
        if item.name in SPECIAL_ENDINGS:
            finish(i, item)
    return [records[i] for i in range(len(items))]


def main():
    args = parse_args()
    unpack_programs()
    items = discover_items()
    if args.only:
        items = [i for i in items if any(s in i.name for s in args.only)]
    if args.list:
        for item in items:
            print(item.name)
        return 0
    started = time.monotonic()
    check = Check(args)
    mode = "chained (emu server behind gpupoold --backend cuda)" if args.chained else "GPU"
    if args.timeout is not None:
        per_run = "%.0f s per run" % args.timeout
    elif args.chained:
        per_run = "%.0f s per run" % CHAINED_TIMEOUT
    else:
        per_run = "per run: programs %.0f s, bench and Python %.0f s" % (GPU_TIMEOUTS["program"],
                                                                          GPU_TIMEOUTS["python"])
    print("gpu-check: %s mode, %d items, %d at a time, %s; results in %s" % (
        mode, len(items), args.jobs, per_run, check.out), flush=True)
    records = []
    error = None
    try:
        server_error = check.start_servers()
        if server_error:
            records.append({"name": "gpupoold", "kind": "setup", "status": "fail",
                            "reason": server_error})
            print("gpu-check: %s" % server_error, flush=True)
        print("gpu-check: driver %s; cuda server %s%s" % (
            check.driver, check.cuda.endpoint,
            ("; emu server " + check.native_endpoint) if check.native_endpoint else ""),
            flush=True)
        records += run_items(check, items, args.jobs)
    except RuntimeError as failure:
        error = str(failure)
        print("gpu-check: %s" % error, flush=True)
    except KeyboardInterrupt:
        error = "interrupted"
        print("gpu-check: interrupted", flush=True)
    finally:
        check.stop_servers()
    if error:
        records.append({"name": "setup", "kind": "setup", "status": "fail", "reason": error})

    passed = sum(r["status"] == "pass" for r in records)
    failed = sum(r["status"] == "fail" for r in records)
    skipped = sum(r["status"] == "skip" for r in records)
    wall = time.monotonic() - started
    text = table(records)
    print()
    print(text)
    summary = {
        "mode": "chained" if args.chained else "gpu",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": round(wall, 1),
        "timeout_seconds": args.timeout if args.timeout is not None else (
            CHAINED_TIMEOUT if args.chained else GPU_TIMEOUTS),
        "driver": check.driver,
        "machine": machine_description(),
        "passed": passed, "failed": failed, "skipped": skipped,
        "items": records,
    }
    with open(os.path.join(check.out, "results.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(check.out, "table.md"), "w") as f:
        f.write(text + "\n")
    print()
    print("gpu-check: %d skipped; %.0f s; %s" % (skipped, wall,
                                                  os.path.join(check.out, "results.json")))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
