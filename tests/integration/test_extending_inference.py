"""The worked example of docs/extending.md ("Adding a workload suite") on the simulated cluster, over real SSH.

Runs examples/inference/inference.yml exactly as shipped: an inference-server stand-in on every node (server log
everywhere), a benchmark client on the head node (client log there), readiness by log_poll's HTTP probe,
completion by the head's result artifact. Only the knobs the example exposes are changed: a port, a container name
and an SSH port of this test's own (so nothing another suite runs collides), short poll and load times, and a
fault for the stand-in server through ``inference_env`` (``STANDIN_FAULTS``, read by the stand-in only).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import yaml

PLAYBOOK = "examples/inference/inference.yml"
NODES = ["node1", "node2", "node3"]
BACKENDS = ["baremetal", "container"]
CONTAINER = "cvs-inference-test"
CONTAINER_SSH_PORT = 2261
NUM_PROMPTS = 45
HIP_OOM = "torch.OutOfMemoryError: HIP out of memory"


def _run(
    run_playbook: Callable[..., Any],
    cluster: Any,
    node_exec: Callable[..., Any],
    backend: str,
    results_dir: Path,
    port: int,
    faults: Optional[dict[str, str]] = None,
    request_interval: float = 0.2,
) -> Any:
    """Run the example; returns the CompletedProcess (never raises on a failed run)."""
    extravars: dict[str, Any] = {
        "cvs_results_dir": str(results_dir),
        "inference_port": port,
        "inference_num_prompts": NUM_PROMPTS,
        "inference_poll_interval": 0.5,
        "inference_ready_timeout": 120,
        "inference_timeout": 300,
        "inference_stop_grace": 5,
        "inference_server_args": ["--load-seconds", "2", "--stats-seconds", "2"],
        "inference_client_args": ["--request-interval", str(request_interval)],
        "inference_env": {"STANDIN_FAULTS": json.dumps(faults or {})},
    }
    if backend == "container":
        settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
        extravars["cvs_container"] = {**settings, "name": CONTAINER, "ssh_port": CONTAINER_SSH_PORT}
        for node in NODES:  # an interrupted earlier run of this test may have left its container behind
            node_exec(node, f"docker rm -f {CONTAINER} >/dev/null 2>&1 || true")
    proc = run_playbook(PLAYBOOK, backend, extravars, check=False)
    (results_dir.parent / f"{results_dir.name}-output.txt").write_text(proc.stdout + proc.stderr)
    return proc


def _run_dir(results_dir: Path) -> Path:
    runs = [p for p in results_dir.iterdir() if (p / "checks").is_dir()] if results_dir.is_dir() else []
    assert len(runs) == 1, f"expected one run directory under {results_dir}, found {runs}"
    return runs[0]


def _records(run_dir: Path) -> dict[str, dict[str, Any]]:
    records = {p.name: json.loads((p / "inference.json").read_text()) for p in sorted((run_dir / "checks").iterdir())}
    assert sorted(records) == NODES, f"check records for {sorted(records)} only"
    return records


def _leftovers(node_exec: Callable[..., Any], node: str, job_dir: str, port: int) -> str:
    """Processes of the run on the node (containers included: same kernel) and listeners on the port."""
    script = (
        "for p in /proc/[0-9]*; do "
        f"if tr '\\0' '\\n' <$p/environ 2>/dev/null | grep -q '^CVS_EXAMPLE_JOB={job_dir}/'; then "
        "echo \"process ${p#/proc/} $(tr '\\0' ' ' <$p/cmdline 2>/dev/null)\"; fi; done; "
        f"ss -Hltn 'sport = :{port}' | sed 's/^/listener /'"
    )
    return node_exec(node, script).stdout.strip()


def _assert_nothing_left(
    node_exec: Callable[..., Any], records: dict[str, dict[str, Any]], port: int, backend: str
) -> None:
    for node, rec in records.items():
        assert rec["stopped"] is True, f"{node}: stop.sh did not confirm the stop: {rec['stop']}"
        assert _leftovers(node_exec, node, rec["run_dir"], port) == "", f"{node}: left running after the run"
        if backend == "container":
            ps = node_exec(node, f"docker ps -a --filter name=^{CONTAINER}$ --format '{{{{.Names}}}}'").stdout
            assert ps.strip() == "", f"{node}: container {CONTAINER} not disposed"


def _health_sequence(log: str) -> list[str]:
    """The readiness story of a server log: '503' / '200' health answers and 'ready' (startup complete), in order."""
    seq = []
    for line in log.splitlines():
        m = re.search(r'"GET /health HTTP/1\.1" (\d{3})', line)
        if m:
            seq.append(m.group(1))
        elif "Application startup complete." in line:
            seq.append("ready")
    return seq


# --------------------------------------------------------------------------- happy path


@pytest.mark.parametrize("backend", BACKENDS)
def test_example_serves_benchmarks_and_reports(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    port = 18461
    results_dir = tmp_path / "results"
    proc = _run(run_playbook, cluster, node_exec, backend, results_dir, port)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    run_dir = _run_dir(results_dir)
    records = _records(run_dir)
    hosts = {node: rec["host"] for node, rec in records.items()}

    # every node served, the head also ran the client; all passed
    for index, node in enumerate(NODES):
        rec = records[node]
        assert rec["status"] == "PASS", rec
        assert rec["node_index"] == index and rec["backend"] == backend
        assert rec["role"] == ("server+client" if index == 0 else "server")
        assert rec["failed_node"] is None and rec["error"] is None

    # readiness by HTTP: each server answered 503 while loading, the watch kept probing, 200 only after startup
    for node in NODES:
        seq = _health_sequence((run_dir / "logs" / hosts[node] / "server.log").read_text())
        assert "ready" in seq, f"{node}: no startup line in the saved server log: {seq}"
        ready = seq.index("ready")
        assert "503" in seq[:ready], f"{node}: readiness was not probed while the server loaded: {seq}"
        assert "200" in seq[ready:] and "200" not in seq[:ready], f"{node}: {seq}"

    # completion by the artifact: collected from the head, complete, and no request failed (so the client did not
    # start before every server was ready)
    artifact = run_dir / "artifacts" / "node1" / "result.json"
    assert artifact.is_file(), f"result artifact not collected: {sorted(p.name for p in run_dir.rglob('*'))}"
    result = json.loads(artifact.read_text())
    assert result == records["node1"]["benchmark"]
    assert result["completed"] == NUM_PROMPTS and result["failed"] == 0
    assert sorted(result["servers"]) == sorted(f"http://{cluster.node(n).ip}:{port}" for n in NODES), (
        "the client did not request every node's server"
    )
    assert all(s["completed"] == NUM_PROMPTS // 3 for s in result["servers"].values()), result["servers"]
    assert not (run_dir / "artifacts" / "node2").exists() and not (run_dir / "artifacts" / "node3").exists()
    metrics = {m["metric"]: m for m in records["node1"]["metrics"]}
    assert metrics["failed"]["status"] == "PASS" and metrics["completed"]["status"] == "PASS"
    assert metrics["request_throughput"]["status"] == "RECORD" and metrics["request_throughput"]["value"] > 0
    client_log = (run_dir / "logs" / hosts["node1"] / "client.log").read_text()
    assert "Serving Benchmark Result" in client_log and "Saved the result to" in client_log
    for node in ["node2", "node3"]:  # the client log exists on the head only
        assert not (run_dir / "logs" / hosts[node] / "client.log").exists()

    if backend == "baremetal":  # the run directories are still on the nodes (a container's went with it)
        remote = node_exec("node1", ["cat", records["node1"]["run_dir"] + "/result.json"]).stdout
        assert json.loads(remote) == result
        for node in NODES:  # the saved log is the remote log, line for line, up to the end of the watch
            saved = (run_dir / "logs" / hosts[node] / "server.log").read_text().splitlines()
            full = node_exec(node, ["cat", records[node]["run_dir"] + "/server.log"]).stdout.splitlines()
            assert saved and full[: len(saved)] == saved, f"{node}: saved server log is not a prefix of the remote log"

    # the servers were running until the example stopped them, the client had ended by itself
    for node in NODES:
        assert any(re.match(r"server: stopped [1-9]\d* processes \(SIGTERM\)", s) for s in records[node]["stop"]), (
            node,
            records[node]["stop"],
        )
    assert "client: stopped 0 processes (already ended)" in records["node1"]["stop"]
    _assert_nothing_left(node_exec, records, port, backend)

    # the report of the run
    report = json.loads((run_dir / "results.json").read_text())
    assert report["checks"] == ["inference"]
    assert report["summary"]["status"] == "PASS" and report["summary"]["counts"]["PASS"] == 3
    assert (run_dir / "junit.xml").is_file() and (run_dir / "report.html").is_file()


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("backend", BACKENDS)
def test_oom_on_node2_fails_fast_naming_node2_and_the_line(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    port = 18462
    results_dir = tmp_path / "results"
    # node2 dies on its 3rd request (~4 s in); the client alone would run ~26 s more. Detection, the stop of every
    # node and the finish tasks must all happen in between, also on a busy machine (container rounds are slow).
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        backend,
        results_dir,
        port,
        faults={"node2": "oom_after:2"},
        request_interval=2.0,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-6000:]
    assert re.search(
        rf"inference FAILED on node2: error pattern 'oom' matched in the server log on node2: {HIP_OOM}", out
    )
    for node in ["node1", "node3"]:
        assert re.search(rf"inference FAILED on {node}: run stopped because node2 failed: .*{HIP_OOM}", out)

    run_dir = _run_dir(results_dir)
    records = _records(run_dir)
    bad = records["node2"]
    assert bad["status"] == "FAIL" and bad["failed_node"] == "node2"
    assert bad["error"]["name"] == "oom" and bad["error"]["line"].startswith(HIP_OOM)
    assert any("Traceback (most recent call last)" in line for line in bad["context"]), bad["context"]
    assert bad["lines"] == [bad["error"]["line"]]
    for node in ["node1", "node3"]:
        rec = records[node]
        assert rec["status"] == "FAIL" and rec["failed_node"] == "node2" and rec["error"] is None, rec
        assert rec["reason"].startswith("run stopped because node2 failed: error pattern 'oom'"), rec["reason"]

    # failed fast: the client was still running when the example stopped it, so it never wrote its result
    head_stop = records["node1"]["stop"]
    assert any(re.match(r"client: stopped [1-9]\d* processes", s) for s in head_stop), head_stop
    assert not (run_dir / "artifacts").exists(), "a result artifact was collected from a failed run"
    assert records["node1"]["benchmark"] is None
    # the healthy servers were stopped by the example, the dead one had exited
    for node in ["node1", "node3"]:
        assert any(re.match(r"server: stopped [1-9]\d* processes", s) for s in records[node]["stop"]), records[node]
    assert bad["stop"] == ["server: stopped 0 processes (already ended)"]
    _assert_nothing_left(node_exec, records, port, backend)

    report = json.loads((run_dir / "results.json").read_text())
    assert report["summary"]["status"] == "FAIL"
    node2_failure = next(f for f in report["summary"]["failures"] if f["node"] == "node2")
    assert node2_failure["line"].startswith(HIP_OOM)


def test_server_dying_while_loading_fails_readiness_and_never_starts_the_client(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    port = 18463
    results_dir = tmp_path / "results"
    proc = _run(run_playbook, cluster, node_exec, "baremetal", results_dir, port, faults={"node3": "oom_at_load"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-6000:]
    assert re.search(
        rf"inference FAILED on node3: error pattern 'oom' matched in the server log on node3: {HIP_OOM}", out
    )
    run_dir = _run_dir(results_dir)
    records = _records(run_dir)
    assert records["node3"]["error"]["name"] == "oom"
    assert all(records[n]["failed_node"] == "node3" for n in NODES)
    # the readiness watch failed, so the head never launched its client
    assert "client: not launched" in " ".join(records["node1"]["stop"]), records["node1"]["stop"]
    client_log = node_exec("node1", f"test -e {records['node1']['run_dir']}/client.log && echo present || true")
    assert client_log.stdout.strip() == ""
    _assert_nothing_left(node_exec, records, port, "baremetal")
