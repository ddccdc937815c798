#!/usr/bin/env python3
"""Checks of the files under deploy/: they parse, the Kubernetes objects are objects, the
configurations they embed agree with each other, and every metric the Grafana dashboard and the
Prometheus alert rules query is one that a real gpupoold serves at /metrics.

usage: deploy_files_test.py DEPLOY_DIR --gpupoold GPUPOOLD --libcuda-dir DIR --program PROGRAM

PROGRAM is a self-checking CUDA program (tests/programs) run as a tenant, so that the tenant's
counters have counted something when /metrics is read.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import unittest
import urllib.request

try:
    import yaml
except ImportError:  # Debian python3-yaml (scripts/install-deps.sh)
    sys.exit("deploy_files_test: python3-yaml is not installed (scripts/install-deps.sh)")

DEPLOY = None
GPUPOOLD = None
LIBCUDA_DIR = None
PROGRAM = None

# Series that Prometheus makes itself for every scrape target, not gpupoold.
PROMETHEUS_SERIES = {"up"}


def deploy_files(*patterns):
    found = set()
    for pattern in patterns:
        found.update(glob.glob(os.path.join(DEPLOY, "**", pattern), recursive=True))
    return sorted(found)


def yaml_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# --- PromQL: the metric names an expression reads ---------------------------------------------

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
                   "and", "or", "unless", "atan2", "inf", "nan"}


def promql_metrics(expr):
    """The metric names `expr` selects: identifiers that are not functions, keywords or labels."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # string literals
    text = re.sub(r"\{[^{}]*\}", " ", text)  # label matchers (and Grafana's {{legend}} never here)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries
    # Label lists of aggregations and vector matching.
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables outside brackets
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        name = match.group(0)
        after = text[match.end():].lstrip()
        if after.startswith("("):  # a function
            continue
        before = text[:match.start()]
        if re.search(r"[0-9.]$", before):  # the exponent or unit of a number (1e3, 5m)
            continue
        if name.lower() in PROMQL_KEYWORDS:
            continue
        names.add(name)
    return names


def dashboard_queries(dashboard):
    """Every PromQL expression of a Grafana dashboard: panel targets and query variables."""
    exprs = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                exprs.append(target["expr"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if not query:
            continue
        # label_values(METRIC, label), or a plain PromQL query.
        match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query)
        exprs.append(match.group(1) if match else query)
    return exprs


def alert_rule_queries(rules):
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def unknown_metrics(exprs, served):
    """{metric: [expressions]} for metrics the expressions read that `served` does not have."""
    unknown = {}
    for expr in exprs:
        for name in promql_metrics(expr):
            if name not in served and name not in PROMETHEUS_SERIES:
                unknown.setdefault(name, []).append(expr)
    return unknown


def served_metrics(text):
    """The metric names of a Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return names


def metric_value(text, sample):
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return None


class PromqlExtraction(unittest.TestCase):
    """The extractor itself, so that a check that finds nothing cannot pass by accident."""

    def test_names_functions_labels_and_variables(self):
        self.assertEqual(
            promql_metrics('sum by (tenant) (rate(gpupool_tenant_queue_seconds_total'
                           '{instance=~"$instance", tenant=~"a|b"}[$__rate_interval])) / '
                           'on (tenant) group_left max(gpupool_tenant_launches_total) > 0.5'),
            {"gpupool_tenant_queue_seconds_total", "gpupool_tenant_launches_total"})
        self.assertEqual(promql_metrics('count(up{job=~"$job"} == 0) or vector(0)'), {"up"})
        self.assertEqual(promql_metrics("max_over_time(x_bytes[1h]) unless x_bytes offset 5m"),
                         {"x_bytes"})

    def test_a_metric_that_does_not_exist_is_reported(self):
        dashboard = {"panels": [{"type": "row", "panels": [
            {"targets": [{"expr": "rate(gpupool_tenant_calls_total[5m])"}]},
            {"targets": [{"expr": "gpupool_device_temperature_celsius"}]}]}],
            "templating": {"list": [{"type": "query",
                                     "query": "label_values(gpupool_made_up, tenant)"}]}}
        unknown = unknown_metrics(dashboard_queries(dashboard), {"gpupool_tenant_calls_total"})
        self.assertEqual(set(unknown), {"gpupool_device_temperature_celsius", "gpupool_made_up"})


class Manifests(unittest.TestCase):
    def test_every_yaml_file_parses(self):
        files = deploy_files("*.yaml", "*.yml")
        self.assertGreaterEqual(len(files), 6, files)
        for path in files:
            with self.subTest(path=os.path.relpath(path, DEPLOY)):
                self.assertTrue(yaml_documents(path), "no document")

    def test_kubernetes_objects_are_named_objects(self):
        files = deploy_files("kubernetes/*.yaml")
        self.assertTrue(files)
        for path in files:
            for i, doc in enumerate(yaml_documents(path)):
                with self.subTest(path=os.path.relpath(path, DEPLOY), document=i):
                    self.assertIsInstance(doc, dict)
                    self.assertIsInstance(doc.get("apiVersion"), str)
                    self.assertIsInstance(doc.get("kind"), str)
                    self.assertIsInstance(doc.get("metadata"), dict)
                    self.assertRegex(doc["metadata"].get("name", ""),
                                     r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")

    def objects(self, name):
        docs = yaml_documents(os.path.join(DEPLOY, "kubernetes", name))
        return {(d["kind"], d["metadata"]["name"]): d for d in docs}

    def test_device_plugin_configuration(self):
        objects = self.objects("device-plugin.yaml")
        config = tomllib.loads(
            objects["ConfigMap", "gpupool-device-plugin-config"]["data"]["device-plugin.toml"])
        self.assertLessEqual(
            {"kubelet_dir", "pod_resources_socket", "mig_strategy", "library_dir",
             "container_library_dir", "token_dir", "allocation_dir", "poll_seconds",
             "memory_shares", "server"}, set(config))
        self.assertIn(config["mig_strategy"], {"none", "single", "mixed"})
        for server in config["server"]:
            self.assertRegex(server["endpoint"], r"^(tcp|tls)://[^:/]+:\d+$")
            self.assertTrue(server["token_file"])
        daemonset = objects["DaemonSet", "gpupool-device-plugin"]
        pod = daemonset["spec"]["template"]["spec"]
        self.assertNotIn("nodeSelector", pod, "the plugin runs on every node")
        (container,) = pod["containers"]
        self.assertEqual(container["command"],
                         ["gpupool-device-plugin", "--config", "/etc/gpupool/device-plugin.toml"])
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        # The node paths the plugin hands the kubelet are the node's own: hostPath volumes
        # mounted at the same place.
        for path in (config["kubelet_dir"], os.path.dirname(config["pod_resources_socket"]),
                     config["library_dir"], config["allocation_dir"]):
            with self.subTest(path=path):
                self.assertEqual(volumes[mounts[path]]["hostPath"]["path"], path)
        self.assertEqual(volumes[mounts[config["token_dir"]]]["secret"]["secretName"],
                         "gpupool-tenant-tokens")
        self.assertIn("/etc/gpupool/device-plugin.toml", mounts)
        for server in config["server"]:
            self.assertIn(server["token_file"], mounts)
        (init,) = pod["initContainers"]
        self.assertIn("libcuda.so.1", init["command"][-1])
        self.assertIn("libnvidia-ml.so.1", init["command"][-1])

    def test_tenants_are_namespaces_with_a_token(self):
        objects = self.objects("gpupool.yaml")
        pool = tomllib.loads(objects["ConfigMap", "gpupool-config"]["data"]["pool.toml"])
        tokens = objects["Secret", "gpupool-tenant-tokens"]["stringData"]
        self.assertEqual({t["name"] for t in pool["tenant"]}, set(tokens))
        for tenant in pool["tenant"]:
            self.assertEqual(tenant["token_file"], "/etc/gpupool/tenant-tokens/" + tenant["name"])

    def test_example_pods_ask_for_gpupool_resources(self):
        asked = set()
        for name in ("example-pods.yaml", "kueue.yaml", "volcano.yaml"):
            for obj in self.objects(name).values():
                text = json.dumps(obj)
                asked.update(re.findall(r'"(gpupool\.io/[a-z0-9.\-]+)"', text))
        self.assertLessEqual({"gpupool.io/gpu", "gpupool.io/gpu-memory"}, asked)
        self.assertTrue(any(r.startswith("gpupool.io/mig-") for r in asked), asked)

    def test_kueue_queues_cover_the_resources_they_quota(self):
        for queue in (o for (kind, _), o in self.objects("kueue.yaml").items()
                      if kind == "ClusterQueue"):
            with self.subTest(queue=queue["metadata"]["name"]):
                self.assertTrue(queue["spec"]["cohort"])
                for group in queue["spec"]["resourceGroups"]:
                    for flavor in group["flavors"]:
                        self.assertEqual([r["name"] for r in flavor["resources"]],
                                         group["coveredResources"])


def shell_environment():
    """The environment for the Slurm scripts: none of the pool's variables, and no sanitizer
    runtime (scripts/sanitizers.sh preloads it into every process; bash and coreutils are not ours
    to leak-check)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("GPU_POOL_") and k not in ("CUDA_VISIBLE_DEVICES", "LD_PRELOAD")}


class Slurm(unittest.TestCase):
    """The GRES recipe's TaskProlog and job script, with stand-ins for scontrol and srun."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.bin = os.path.join(self.dir, "bin")
        os.mkdir(self.bin)
        self.write("endpoints", "# the pool\ntls://a:7000\ntls://b:7000\n")
        self.write("devices", "0\n1\nGPU-0123abcd\n")
        # srun and gpupool run: print what the program would see.
        self.write("bin/srun", '#!/bin/sh\necho "ENDPOINT=$GPU_POOL_ENDPOINT"\n'
                               'echo "VISIBLE=$CUDA_VISIBLE_DEVICES"\necho "ARGS=$*"\n', 0o755)

    def write(self, name, text, mode=0o644):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    def run_script(self, script, job_id, tres, *args):
        self.write("bin/scontrol", f"#!/bin/sh\necho 'JobId={job_id} JobName=x'\n"
                                   f"echo '   TresPerNode={tres} TresPerTask=cpu=8'\n", 0o755)
        env = shell_environment()
        env.update(PATH=self.bin + ":" + os.environ["PATH"], SLURM_JOB_ID=str(job_id),
                   GPUPOOL_ENDPOINTS_FILE=os.path.join(self.dir, "endpoints"),
                   GPUPOOL_DEVICES_FILE=os.path.join(self.dir, "devices"),
                   GPUPOOL_TASK_PROLOG=os.path.join(DEPLOY, "slurm", "gpupool-task-prolog.sh"))
        return subprocess.run([os.path.join(DEPLOY, "slurm", script), *args], env=env,
                              capture_output=True, text=True, timeout=30)

    def test_scripts_are_valid_bash(self):
        for path in deploy_files("*.sh"):
            with self.subTest(path=os.path.relpath(path, DEPLOY)):
                r = subprocess.run(["bash", "-n", path], env=shell_environment(),
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)

    def test_task_prolog_maps_the_count_to_devices(self):
        r = self.run_script("gpupool-task-prolog.sh", 43, "gres/gpu:1,gres/gpupool:2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "export GPU_POOL_ENDPOINT=tls://a:7000,tls://b:7000",
            "export CUDA_VISIBLE_DEVICES=1,GPU-0123abcd"])
        # From job 44 on the devices wrap around; an older Slurm's spelling of the count.
        r = self.run_script("gpupool-task-prolog.sh", 44, "gpupool:3")
        self.assertIn("export CUDA_VISIBLE_DEVICES=GPU-0123abcd,0,1", r.stdout.splitlines())

    def test_task_prolog_sets_nothing_without_gpupool(self):
        r = self.run_script("gpupool-task-prolog.sh", 43, "gres/gpu:1")
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)

    def test_job_script_runs_the_program_on_its_devices(self):
        r = self.run_script("gpupool-gres-job.sh", 42, "gres/gpupool:2", "./train", "--epochs=1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ENDPOINT=tls://a:7000,tls://b:7000", r.stdout)
        self.assertIn("VISIBLE=0,1", r.stdout)
        self.assertIn("ARGS=gpupool run -- ./train --epochs=1", r.stdout)


class Dashboards(unittest.TestCase):
    """Every metric the dashboard and the alerts query exists in a live gpupoold's /metrics."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        config = os.path.join(cls.tmp.name, "pool.toml")
        with open(config, "w") as f:
            f.write(f'[metering]\ndatabase = "{cls.tmp.name}/usage.db"\nflush_ms = 100\n'
                    '[[device]]\nmemory = "256MiB"\n'
                    '[[tenant]]\nname = "team-a"\ntoken = "a"\nmemory_quota = "128MiB"\n'
                    '[[tenant]]\nname = "team-b"\ntoken = "b"\n')
        cls.server = subprocess.Popen(
            [GPUPOOLD, "--config", config, "--listen", "tcp://127.0.0.1:0", "--emu-threads", "1",
             "--metrics-listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
        endpoint = metrics = None
        lines = []
        while endpoint is None or metrics is None:
            line = cls.server.stdout.readline()
            if not line:
                break
            lines.append(line)
            if m := re.search(r"metrics on (http://\S+)", line):
                metrics = m.group(1)
            if m := re.search(r"listening on (tcp://\S+)", line):
                endpoint = m.group(1)
        if endpoint is None or metrics is None:
            cls.tearDownClass()
            raise RuntimeError(f"gpupoold did not start: {lines!r}")
        cls.metrics_url = metrics
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_POOL_")}
        env.update(GPU_POOL_ENDPOINT=endpoint, GPU_POOL_TOKEN="a", LD_LIBRARY_PATH=LIBCUDA_DIR)
        env.pop("CUDA_VISIBLE_DEVICES", None)
        cls.program = subprocess.run([PROGRAM], env=env, capture_output=True, text=True,
                                     timeout=120)
        with urllib.request.urlopen(cls.metrics_url, timeout=30) as response:
            cls.exposition = response.read().decode()
        cls.served = served_metrics(cls.exposition)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait(timeout=10)
        cls.server.stdout.close()
        cls.tmp.cleanup()

    def test_the_program_ran_as_a_tenant(self):
        self.assertEqual(self.program.returncode, 0, self.program.stdout + self.program.stderr)
        self.assertGreater(
            metric_value(self.exposition, 'gpupool_tenant_calls_total{tenant="team-a"}') or 0, 0,
            self.exposition)
        self.assertIsNotNone(
            metric_value(self.exposition, 'gpupool_tenant_memory_quota_bytes{tenant="team-b"}'))

    def test_every_json_file_parses(self):
        files = deploy_files("*.json")
        self.assertTrue(files)
        for path in files:
            with self.subTest(path=os.path.relpath(path, DEPLOY)), open(path) as f:
                json.load(f)

    def check(self, what, exprs):
        self.assertTrue(exprs, f"{what}: no queries found")
        read = set().union(*(promql_metrics(e) for e in exprs))
        self.assertTrue(any(name.startswith("gpupool_") for name in read), read)
        unknown = unknown_metrics(exprs, self.served)
        self.assertEqual(unknown, {}, f"{what} queries metrics gpupoold does not serve; "
                                      f"it serves {sorted(self.served)}")

    def test_dashboard_metrics_exist(self):
        files = deploy_files("grafana/*.json")
        self.assertTrue(files)
        for path in files:
            with open(path) as f:
                dashboard = json.load(f)
            with self.subTest(path=os.path.relpath(path, DEPLOY)):
                self.check(path, dashboard_queries(dashboard))

    def test_alert_rule_metrics_exist(self):
        files = deploy_files("prometheus/*.yaml")
        self.assertTrue(files)
        for path in files:
            (rules,) = yaml_documents(path)
            with self.subTest(path=os.path.relpath(path, DEPLOY)):
                for group in rules["groups"]:
                    for rule in group["rules"]:
                        self.assertTrue(rule.get("alert") or rule.get("record"), rule)
                self.check(path, alert_rule_queries(rules))


def main():
    global DEPLOY, GPUPOOLD, LIBCUDA_DIR, PROGRAM
    parser = argparse.ArgumentParser()
    parser.add_argument("deploy")
    parser.add_argument("--gpupoold", required=True)
    parser.add_argument("--libcuda-dir", required=True)
    parser.add_argument("--program", required=True)
    args, rest = parser.parse_known_args()
    DEPLOY, GPUPOOLD = os.path.abspath(args.deploy), args.gpupoold
    LIBCUDA_DIR, PROGRAM = args.libcuda_dir, args.program
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
