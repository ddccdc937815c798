#!/usr/bin/env python3
"""Command-line tests for `gpupool`.

usage: gpupool_cli_test.py GPUPOOL [--gpupoold GPUPOOLD]

Without --gpupoold the `status` and `bench` success paths are skipped (the server is not built).
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

GPUPOOL = None
GPUPOOLD = None


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("GPU_POOL_ENDPOINT", "GPU_POOL_LIBRARY_DIR", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def gpupool(*args, env=None, timeout=30):
    return subprocess.run([GPUPOOL, *args], env=env if env is not None else clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TopLevel(unittest.TestCase):
    def test_version(self):
        r = gpupool("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^gpupool \d+\.\d+\.\d+")

    def test_no_subcommand_is_a_usage_error(self):
        self.assertEqual(gpupool().returncode, 2)

    def test_unknown_option_is_a_usage_error(self):
        self.assertEqual(gpupool("status", "--bogus").returncode, 2)

    def test_subcommand_help(self):
        r = gpupool("run", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--endpoint", r.stdout)
        r = gpupool("status", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--json", r.stdout)


class Run(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.libdir = self.tmp.name
        open(os.path.join(self.libdir, "libcuda.so.1"), "w").close()

    def tearDown(self):
        self.tmp.cleanup()

    SHOW_ENV = ["sh", "-c", 'printf "%s\\n%s\\n" "$GPU_POOL_ENDPOINT" "$LD_LIBRARY_PATH"; exit 7']

    def test_sets_environment_and_execs(self):
        env = clean_env(GPU_POOL_LIBRARY_DIR=self.libdir, LD_LIBRARY_PATH="/old/path")
        r = gpupool("run", "--endpoint", "tcp://127.0.0.1:7001", "--", *self.SHOW_ENV, env=env)
        self.assertEqual(r.returncode, 7, r.stderr)  # the program's own status: it was exec'd
        endpoint, library_path = r.stdout.splitlines()
        self.assertEqual(endpoint, "tcp://127.0.0.1:7001")
        self.assertEqual(library_path, os.path.realpath(self.libdir) + ":/old/path")

    def test_endpoint_from_environment(self):
        env = clean_env(GPU_POOL_LIBRARY_DIR=self.libdir, GPU_POOL_ENDPOINT="tcp://10.0.0.1:7000")
        r = gpupool("run", "--", *self.SHOW_ENV, env=env)
        self.assertEqual(r.returncode, 7, r.stderr)
        endpoint, library_path = r.stdout.splitlines()
        self.assertEqual(endpoint, "tcp://10.0.0.1:7000")
        self.assertEqual(library_path, os.path.realpath(self.libdir))

    def test_default_library_dir_is_next_to_the_binary(self):
        # <dir of gpupool>/../lib; whether it holds libcuda.so.1 depends on what was built.
        expected = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(GPUPOOL)),
                                                 "..", "lib"))
        r = gpupool("run", "--endpoint", "tcp://127.0.0.1:7001", "--", *self.SHOW_ENV)
        if os.path.exists(os.path.join(expected, "libcuda.so.1")):
            self.assertEqual(r.returncode, 7, r.stderr)
            self.assertEqual(r.stdout.splitlines()[1], expected)
        else:
            self.assertEqual(r.returncode, 2)
            self.assertIn("no libcuda.so.1 in " + expected, r.stderr)

    def test_no_endpoint(self):
        r = gpupool("run", "--", "true", env=clean_env(GPU_POOL_LIBRARY_DIR=self.libdir))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT", r.stderr)

    def test_malformed_endpoint(self):
        r = gpupool("run", "--endpoint", "127.0.0.1:7000", "--", "true",
                    env=clean_env(GPU_POOL_LIBRARY_DIR=self.libdir))
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid endpoint", r.stderr)

    def test_library_missing(self):
        with tempfile.TemporaryDirectory() as empty:
            r = gpupool("run", "--endpoint", "tcp://127.0.0.1:7001", "--", "true",
                        env=clean_env(GPU_POOL_LIBRARY_DIR=empty))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no libcuda.so.1 in", r.stderr)

    def test_command_not_found(self):
        r = gpupool("run", "--endpoint", "tcp://127.0.0.1:7001", "--", "/nonexistent/program",
                    env=clean_env(GPU_POOL_LIBRARY_DIR=self.libdir))
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/program'", r.stderr)


def start_emu_server(test, *extra):
    """Starts gpupoold on the emu backend on a free port; returns (server, url), or skips."""
    if GPUPOOLD is None:
        test.skipTest("this build has no gpupoold target")
    if not os.path.exists(GPUPOOLD):
        test.skipTest(f"{GPUPOOLD} is not built (build the gpupoold target)")
    server = subprocess.Popen([GPUPOOLD, "--listen", "tcp://127.0.0.1:0", "--backend", "emu",
                               *extra], stdout=subprocess.PIPE, text=True)
    test.addCleanup(server.wait, timeout=10)
    test.addCleanup(server.terminate)
    # `listening on tcp://...` comes last, after those of --rdma-listen and --shm-listen.
    lines = []
    while True:
        lines.append(server.stdout.readline())
        match = re.search(r"listening on (tcp://\S+)", lines[-1])
        if match or not lines[-1].startswith("listening on "):
            break
    test.assertIsNotNone(match, f"unexpected gpupoold output: {lines!r}")
    return server, match.group(1)


class Status(unittest.TestCase):
    def test_unreachable_server(self):
        port = unused_port()
        r = gpupool("status", "--endpoint", f"tcp://127.0.0.1:{port}")
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, rf"^gpupool: cannot reach tcp://127\.0\.0\.1:{port}: \S")

    def test_no_endpoint(self):
        r = gpupool("status")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT", r.stderr)

    def test_live_emu_server(self):
        _, url = start_emu_server(self, "--devices", "2", "--memory", "64MiB")
        r = gpupool("status", "--json", env=clean_env(GPU_POOL_ENDPOINT=url))
        self.assertEqual(r.returncode, 0, r.stderr)
        status = json.loads(r.stdout)
        # The documented fields are all there (newer servers add more, e.g. tenants).
        self.assertLessEqual({"server_version", "backend", "devices", "sessions"}, set(status))
        self.assertEqual(status["backend"], "emu")
        self.assertEqual([d["index"] for d in status["devices"]], [0, 1])
        for device in status["devices"]:
            self.assertLessEqual(
                {"index", "name", "memory_used", "memory_total", "sessions"}, set(device))
            self.assertEqual(device["memory_total"], 64 << 20)
            self.assertEqual(device["memory_used"], 0)
        self.assertEqual(status["sessions"], [])  # status connections are not listed

        r = gpupool("status", "--endpoint", url)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("backend emu", r.stdout)
        self.assertIn("[1] ", r.stdout)


class Smi(unittest.TestCase):
    """`gpupool smi` through the NVML library, answers checked against `gpupool status --json`."""

    def setUp(self):
        libdir = os.path.join(os.path.dirname(os.path.dirname(GPUPOOL)), "lib")
        if not os.path.exists(os.path.join(libdir, "libnvidia-ml.so.1")):
            self.skipTest(f"no libnvidia-ml.so.1 in {libdir} (build the NVML library)")

    def live(self):
        _, url = start_emu_server(self, "--devices", "2", "--memory", "64MiB")
        r = gpupool("status", "--json", env=clean_env(GPU_POOL_ENDPOINT=url))
        self.assertEqual(r.returncode, 0, r.stderr)
        return clean_env(GPU_POOL_ENDPOINT=url), json.loads(r.stdout)["devices"]

    def test_no_endpoint(self):
        r = gpupool("smi")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no endpoint: pass --endpoint or set GPU_POOL_ENDPOINT", r.stderr)

    def test_help_query_gpu_lists_fields(self):
        r = gpupool("smi", "--help-query-gpu")
        self.assertEqual(r.returncode, 0, r.stderr)
        for field in ("memory.total", "utilization.gpu", "pci.bus_id", "temperature.gpu"):
            self.assertIn(field, r.stdout)

    def test_list_gpus(self):
        env, devices = self.live()
        r = gpupool("smi", "-L", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        expected = [f"GPU {d['index']}: {d['name']} (UUID: {d['uuid']})" for d in devices]
        self.assertEqual(r.stdout.splitlines(), expected)

    def test_query_gpu_csv(self):
        env, devices = self.live()
        fields = "index,name,uuid,memory.total,memory.used,temperature.gpu"
        r = gpupool("smi", f"--query-gpu={fields}", "--format=csv,nounits", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "index, name, uuid, memory.total [MiB], memory.used [MiB], "
                                   "temperature.gpu")
        rows = [line.split(", ") for line in lines[1:]]
        # The emu device has no thermal sensor: NVML says NOT_SUPPORTED, shown as nvidia-smi does.
        self.assertEqual(rows, [[str(d["index"]), d["name"], d["uuid"],
                                 str(d["memory_total"] >> 20), str(d["memory_used"] >> 20), "[N/A]"]
                                for d in devices])
        r = gpupool("smi", "--query-gpu=memory.total", "--format=csv,noheader", "-i", "1", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"{devices[1]['memory_total'] >> 20} MiB\n")

    def test_query_gpu_errors(self):
        env, _ = self.live()
        r = gpupool("smi", "--query-gpu=name,bogus.field", "--format=csv", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn('field "bogus.field" is not a valid field to query', r.stderr)
        r = gpupool("smi", "--query-gpu=name", env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--query-gpu needs --format=csv", r.stderr)
        r = gpupool("smi", "-L", "-i", "7", env=env)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no device 7 (there are 2", r.stderr)

    def test_table(self):
        env, devices = self.live()
        r = gpupool("smi", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Driver Version:", r.stdout)
        for d in devices:
            self.assertRegex(r.stdout, rf"\|\s+{d['index']}\s+{re.escape(d['name'][:24])}")
            self.assertIn(f"0MiB / {d['memory_total'] >> 20}MiB", r.stdout)
        self.assertIn("No running processes found", r.stdout)

    def test_dmon_and_pmon(self):
        env, devices = self.live()
        r = gpupool("smi", "dmon", "-c", "2", "-d", "0.1", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("# gpu"), lines)
        data = [line.split() for line in lines if not line.startswith("#")]
        self.assertEqual([row[0] for row in data], ["0", "1", "0", "1"])
        for row in data:
            self.assertEqual(row[2], "-")  # no temperature on the emu
            self.assertEqual(row[5], "0")  # fb: nothing allocated
        r = gpupool("smi", "pmon", "-c", "1", "-i", "0", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = [line.split() for line in r.stdout.splitlines() if not line.startswith("#")]
        self.assertEqual(data, [["0", "-", "-", "-", "-"]])


class Bench(unittest.TestCase):
    THREAD_FIELDS = {"threads", "null_calls_per_second", "launches_per_second",
                     "serialized_null_calls_per_second", "serialized_launches_per_second"}

    IDLE_CLIENTS = 50
    _quick_run = None  # (stderr, result) of the one quick run the series tests share

    def quick_run(self):
        """`bench --quick --json --idle-clients 50` against an emu server, run once."""
        library = os.path.join(os.path.dirname(os.path.realpath(GPUPOOL)), "..", "lib",
                               "libcuda.so.1")
        if not os.path.exists(library):
            self.skipTest(f"{library} is not built (build the gpupool_libcuda target)")
        if Bench._quick_run is None:
            _, url = start_emu_server(self)
            r = gpupool("bench", "--quick", "--json", "--endpoint", url,
                        "--idle-clients", str(self.IDLE_CLIENTS), timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            Bench._quick_run = (r.stderr, json.loads(r.stdout))
        return Bench._quick_run

    def test_emu_interpreter_throughput(self):
        """`bench --emu`: three kernels, one and two interpreter threads and the generic path as
        the same run's baseline, no server needed."""
        r = gpupool("bench", "--emu", "--quick", "--json", timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        self.assertEqual(list(result["emu"]), ["matmul", "vector_add", "divergent_reduce"])
        for kernel, rates in result["emu"].items():
            self.assertEqual(set(rates), {"threads_1", "threads_2", "generic_path_threads_1"},
                             kernel)
            for rate in rates.values():
                self.assertGreater(rate, 0, kernel)
            ratio = result["ratios"]["emu_%s_vs_generic_path" % kernel]
            self.assertAlmostEqual(ratio, rates["threads_1"] / rates["generic_path_threads_1"])
            # Every thread-instruction was counted: at least one per thread the kernel ran.
            settings = result["emu_settings"][kernel]
            threads = settings.get("elements", settings.get("n", 0) ** 2)
            self.assertGreater(settings["thread_instructions"], threads, kernel)
        text = gpupool("bench", "--emu", "--quick", timeout=300)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("divergent_reduce", text.stdout)
        self.assertIn("2 threads", text.stdout)
        self.assertIn("generic path", text.stdout)

    def test_async_launches_in_one_run_and_in_bursts(self):
        """async_launch: one long run, and bursts of a launch queue's size with the issue time."""
        _, result = self.quick_run()
        launches = result["async_launch"]
        self.assertEqual(launches["launches"], 20000)
        self.assertEqual(launches["burst_launches"], 1000)
        self.assertEqual(launches["bursts"], 20)
        for key in ("per_second", "completed_per_second", "burst_per_second"):
            self.assertGreater(launches[key], 0, key)
        # Issuing alone cannot be slower than issuing and completing the same launches.
        self.assertGreaterEqual(launches["per_second"], launches["completed_per_second"])

    def test_idle_clients_flag_is_documented(self):
        r = gpupool("bench", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--idle-clients", r.stdout)

    def test_idle_clients_series_on_emu(self):
        _, result = self.quick_run()
        idle = result["idle_clients"]
        self.assertEqual(set(idle), {"count", "null_call_us_baseline", "null_call_us_loaded",
                                     "ratio", "server_pid", "server_threads", "server_fds",
                                     "rss_bytes_per_idle_client"})
        self.assertEqual(idle["count"], self.IDLE_CLIENTS)
        self.assertGreater(idle["null_call_us_baseline"], 0)
        self.assertGreater(idle["null_call_us_loaded"], 0)
        self.assertAlmostEqual(idle["ratio"],
                               idle["null_call_us_loaded"] / idle["null_call_us_baseline"])
        # The server runs on this host, so the bench found it and counted at least one
        # descriptor per idle session.
        self.assertIsNotNone(idle["server_pid"])
        self.assertGreater(idle["server_threads"], 0)
        self.assertGreater(idle["server_fds"], self.IDLE_CLIENTS)
        # Measured and signed (the server may return memory meanwhile), never unknown here.
        self.assertIsInstance(idle["rss_bytes_per_idle_client"], int)

    def test_shm_needs_the_tcp_endpoint_to_compare_with(self):
        r = gpupool("bench", "--quick", "--transport", "shm", "--endpoint", "shm:///tmp/none.sock")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--transport shm measures shm:// and, in the same run, TCP", r.stderr)

    def test_shm_transport_against_tcp_in_one_run_on_emu(self):
        library = os.path.join(os.path.dirname(os.path.realpath(GPUPOOL)), "..", "lib",
                               "libcuda.so.1")
        if not os.path.exists(library):
            self.skipTest(f"{library} is not built (build the gpupool_libcuda target)")
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        shm = "shm://" + os.path.join(directory, "gpupool.sock")
        _, tcp = start_emu_server(self, "--shm-listen", shm)
        r = gpupool("bench", "--quick", "--json", "--transport", "shm", "--endpoint",
                    f"{shm},{tcp}", timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        # The library's session ran over shm (the bench checks it with the server).
        self.assertEqual(result["transport"], "shm")
        self.assertEqual(result["endpoint"], shm)
        self.assertEqual(result["tcp"]["endpoint"], tcp)
        shm_null = result["gpupool"]["null_call"]["median_us"]
        tcp_null = result["tcp"]["null_call"]["median_us"]
        self.assertGreater(shm_null, 0)
        self.assertGreater(tcp_null, 0)
        self.assertAlmostEqual(result["ratios"]["null_call_shm_vs_tcp"], shm_null / tcp_null)
        self.assertGreater(result["memcpy"]["gb_per_s"], 0)
        self.assertIn("h2d_bandwidth_vs_memcpy", result["ratios"])

    def test_graphs_series_on_emu(self):
        stderr, result = self.quick_run()
        graphs = result["graphs"]
        self.assertEqual([point["nodes"] for point in graphs], [1, 10, 100])
        for point in graphs:
            self.assertEqual(set(point), {"nodes", "graph_launch_us", "separate_launches_us"})
            self.assertGreater(point["graph_launch_us"], 0)
            self.assertGreater(point["separate_launches_us"], 0)
            # Timed to completion against a local emu server: above zero, well below seconds.
            self.assertLess(point["graph_launch_us"], 5e6)
            self.assertLess(point["separate_launches_us"], 5e6)
        # 100 kernels one by one run 100 kernels plus a synchronize; they cannot take less than
        # the one kernel of the 1-node point.
        self.assertGreater(graphs[2]["separate_launches_us"], graphs[0]["separate_launches_us"])
        self.assertIn("graph of 100 kernels against separate launches", stderr)

    def test_host_functions_series_on_emu(self):
        stderr, result = self.quick_run()
        host = result["host_functions"]
        self.assertEqual(set(host), {"one", "burst_functions", "burst_per_function_us"})
        self.assertEqual(host["burst_functions"], 100)
        self.assertEqual(host["one"]["iterations"], 200)
        # Timed to completion against a local emu server: above zero, well below seconds.
        self.assertGreater(host["one"]["min_us"], 0)
        self.assertLessEqual(host["one"]["min_us"], host["one"]["median_us"])
        self.assertLess(host["one"]["median_us"], 5e6)
        self.assertGreater(host["burst_per_function_us"], 0)
        self.assertLess(host["burst_per_function_us"], 5e6)
        self.assertIn("host functions, in bursts of 100", stderr)

    def test_threads_series_on_emu(self):
        stderr, result = self.quick_run()
        # Both runs of the series went through the library: serialized first, then concurrent.
        self.assertLess(stderr.index("threads, serialized calls"),
                        stderr.index("threads, concurrent calls"))
        self.assertEqual([point["threads"] for point in result["threads"]], [1, 2, 4, 8])
        for point in result["threads"]:
            self.assertEqual(set(point), self.THREAD_FIELDS)
            for name in self.THREAD_FIELDS - {"threads"}:
                self.assertGreater(point[name], 0, f"{name} at {point['threads']} threads")
        settings = result["threads_settings"]
        self.assertEqual(settings["launches_per_synchronize"], 100)
        self.assertEqual(settings["serialized_with"], "GPU_POOL_SERIALIZE_CALLS=1")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("gpupool")
    parser.add_argument("--gpupoold")
    args, rest = parser.parse_known_args()
    GPUPOOL = os.path.abspath(args.gpupool)
    GPUPOOLD = args.gpupoold
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
