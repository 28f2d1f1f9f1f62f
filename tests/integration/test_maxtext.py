"""Integration tests of role cvs.cluster.maxtext / playbooks/train_maxtext.yml on the simulated cluster, with the
stand-in trainer: what real MaxText (test_maxtext_real.py) cannot show in CI time or on a CPU (docs/maxtext.md).

Real MaxText runs every backend path (launch, watch, stop, copy, blame) on both backends; the stand-in's scenarios
judge what the role makes of a log, which no backend changes, so each runs on one backend, the two taking turns.

Every scenario runs with 3 nodes. Faults go to the stand-in trainer through a fault file in a
directory of the test's own (``CVS_STAND_IN_DIR``, passed with ``maxtext_env``), written after prepare by
tests/integration/playbooks/maxtext_faults.yml, so nothing another suite uses is touched. The container backend
uses a container name and SSH port of its own for the same reason.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
import yaml

PLAYBOOK = "playbooks/train_maxtext.yml"
FAULTS_PLAYBOOK = "tests/integration/playbooks/maxtext_faults.yml"
NODES = ["node1", "node2", "node3"]
BACKENDS = ["baremetal", "container"]
STEPS = 20
POLL = 0.5
CONTAINER = "cvs-maxtext-test"
ABSL_TIME = re.compile(r"^[IWEF]\d{4} (\d\d):(\d\d):(\d\d)\.(\d{6}) ")


def _run(
    run_playbook: Callable[..., Any],
    cluster: Any,
    node_exec: Callable[..., Any],
    backend: str,
    results_dir: Path,
    *,
    faults: Optional[dict[str, dict[str, Any]]] = None,
    step_seconds: float = 0.05,
    playbook: str = FAULTS_PLAYBOOK,
    **extra: Any,
) -> Any:
    """Run a MaxText playbook; returns the CompletedProcess (never raises on failure)."""
    fault_dir = f"/tmp/cvs-maxtext-test-{uuid.uuid4().hex[:8]}"
    probe_dir = results_dir.parent / f"{results_dir.name}-probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    extravars: dict[str, Any] = {
        "cvs_results_dir": str(results_dir),
        "maxtext_steps": STEPS,
        "maxtext_poll_interval": POLL,
        "maxtext_stall_timeout": 4,
        "maxtext_stop_grace": 5,
        "maxtext_timeout": 300,
        "maxtext_env": {"CVS_STAND_IN_DIR": fault_dir, "TZ": "UTC"},
        "maxtext_test_fault_dir": fault_dir,
        "maxtext_test_defaults": {"step_seconds": step_seconds, "compile_seconds": 0.1},
        "maxtext_test_faults": faults or {},
        "maxtext_test_probe_dir": str(probe_dir),
    }
    if backend == "container":
        settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
        extravars["cvs_container"] = {**settings, "name": CONTAINER, "ssh_port": 2241}
        for node in NODES:  # a test run that was interrupted may have left its container behind
            node_exec(node, f"docker rm -f {CONTAINER} >/dev/null 2>&1 || true")
    extravars.update(extra)
    proc = run_playbook(playbook, backend, extravars, check=False)
    (results_dir.parent / f"{results_dir.name}-output.txt").write_text(_output(proc))
    return proc


def _results(results_dir: Path) -> dict[str, dict[str, Any]]:
    """node -> results record of the newest run under results_dir (every node must have one)."""
    output = results_dir.parent / f"{results_dir.name}-output.txt"
    tail = output.read_text()[-6000:] if output.is_file() else ""
    runs = (
        sorted((p for p in results_dir.iterdir() if (p / "checks").is_dir()), key=lambda p: p.stat().st_mtime)
        if results_dir.is_dir()
        else []
    )
    assert runs, f"no run directory under {results_dir}\n{tail}"
    checks = runs[-1] / "checks"
    results = {p.name: json.loads((p / "maxtext.json").read_text()) for p in sorted(checks.iterdir())}
    assert sorted(results) == NODES, f"results of {sorted(results)} only\n{tail}"
    return results


def _output(proc: Any) -> str:
    return proc.stdout + proc.stderr


def _leftovers(node_exec: Callable[..., Any], node: str, run: str) -> str:
    """Processes on the node (containers included) that belong to the run, as `pid cmdline` lines."""
    script = (
        "for p in /proc/[0-9]*; do "
        f"if tr '\\0' '\\n' <$p/environ 2>/dev/null | grep -qx 'CVS_MAXTEXT_RUN={run}'; then "
        "echo \"${p#/proc/} $(tr '\\0' ' ' <$p/cmdline 2>/dev/null)\"; fi; done; "
        f"pgrep -af 'MaxText/train[.]py .*{run}' || true"
    )
    return node_exec(node, script).stdout.strip()


def _assert_nothing_left(
    node_exec: Callable[..., Any], results: dict[str, dict[str, Any]], results_dir: Optional[Path] = None
) -> None:
    """No process of the run on any node: pgrep inside each workload host before dispose (fault playbook), and
    on each node (containers included) afterwards."""
    if results_dir is not None:
        probe_dir = results_dir.parent / f"{results_dir.name}-probe"
        found = {p.stem: p.read_text().strip() for p in probe_dir.glob("*.txt")}
        assert sorted(found) == sorted(results), f"pgrep before dispose did not run everywhere: {found}"
        assert all(v == "" for v in found.values()), f"train.py left running before dispose: {found}"
    for node, rec in results.items():
        assert _leftovers(node_exec, node, rec["run"]) == "", f"{node}: processes of run {rec['run']} left"


def _step_of(line: str) -> int:
    match = re.search(r"completed step:\s*(\d+)", line)
    assert match, line
    return int(match.group(1))


def _last_step(log: Path) -> int:
    steps = [_step_of(line) for line in log.read_text().splitlines() if "completed step:" in line]
    return steps[-1] if steps else -1


# --------------------------------------------------------------------------- faults


@pytest.mark.parametrize("backend", ["baremetal"])
def test_nan_on_node2_fails_fast_and_stops_every_node(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    nan_step = 5
    long_run = 60  # 30 s if nothing stopped it: the stop check below has room on a loaded 2-core machine
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        backend,
        tmp_path,
        faults={"node2": {"nan_at_step": nan_step}},
        step_seconds=0.5,
        maxtext_steps=long_run,
    )
    out = _output(proc)
    assert proc.returncode != 0
    assert "FAILED on node2: error pattern 'nan_or_inf' matched on node2" in out, out[-5000:]
    results = _results(tmp_path)
    assert sorted(results) == NODES, "dispose or the results of a node are missing"
    bad = results["node2"]
    assert bad["status"] == "FAIL" and bad["failed_node"] == "node2"
    assert bad["error"]["name"] == "nan_or_inf" and "loss: nan" in bad["error"]["line"]
    assert _step_of(bad["error"]["line"]) == nan_step
    assert bad["lines"] == [bad["error"]["line"]] and bad["context"]
    for node in ("node1", "node3"):
        rec = results[node]
        assert rec["status"] == "FAIL" and rec["failed_node"] == "node2"
        assert rec["reason"].startswith("run stopped because node2 failed: error pattern 'nan_or_inf'")
    # detected within about one poll of the line (plus the round that tells the other nodes)
    match = ABSL_TIME.match(bad["error"]["line"])
    assert match, bad["error"]["line"]
    hour, minute, second, micro = (int(g) for g in match.groups())
    detected = datetime.fromisoformat(bad["detected"].replace("Z", "+00:00"))
    written = detected.replace(hour=hour, minute=minute, second=second, microsecond=micro, tzinfo=timezone.utc)
    latency = (detected - written).total_seconds() % 86400
    assert latency < 4 * POLL + 3, f"NaN line written at {written}, failure recorded at {detected}"
    # every node's run was stopped within 12 s of the NaN, long before its 60 x 0.5 s steps were over
    for node, rec in results.items():
        assert rec["stop"].startswith("stopped ") and "processes of group" in rec["stop"], (node, rec["stop"])
        assert _last_step(Path(rec["log"])) < nan_step + 24, node
        # the kept copy is what the watch read plus what log_poll's drain read after the stop: the whole log,
        # byte for byte, with the steps written between the end of the watch and the stop
        on_node = tmp_path.parent / f"{tmp_path.name}-probe" / f"{node}.training.log"
        assert Path(rec["log"]).read_bytes() == on_node.read_bytes(), node
    _assert_nothing_left(node_exec, results, tmp_path)


@pytest.mark.parametrize("backend", ["container"])
def test_hang_on_one_node_fails_as_stalled(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        backend,
        tmp_path,
        faults={"node3": {"hang_at_step": 4}},
        step_seconds=0.3,
        maxtext_stall_timeout=3,
    )
    out = _output(proc)
    assert proc.returncode != 0
    assert "FAILED on node3: node3: stalled: no new log output" in out, out[-5000:]
    results = _results(tmp_path)
    hung = results["node3"]
    assert hung["status"] == "FAIL" and hung["failed_node"] == "node3" and "stall" in hung["reason"]
    assert hung["error"] is None and len(hung["lines"]) == 1 and _step_of(hung["lines"][0]) == 3
    assert hung["stop"].startswith("stopped ") and "(SIGTERM)" in hung["stop"]
    for node in ("node1", "node2"):
        assert results[node]["status"] == "FAIL" and results[node]["failed_node"] == "node3"
    _assert_nothing_left(node_exec, results, tmp_path)


@pytest.mark.parametrize("backend", ["baremetal"])
def test_traceback_after_the_last_step_fails(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    proc = _run(run_playbook, cluster, node_exec, backend, tmp_path, faults={"node2": {"traceback_after_last": True}})
    out = _output(proc)
    assert proc.returncode != 0
    results = _results(tmp_path)
    bad = results["node2"]
    assert bad["status"] == "FAIL" and bad["failed_node"] == "node2", bad["reason"]
    # the completion marker was printed, yet the run fails on what followed it
    assert _last_step(Path(bad["log"])) == STEPS - 1
    assert bad["error"]["name"] in {"jax_coordination", "xla_runtime_error", "python_exception"}, bad["error"]
    assert f"FAILED on node2: error pattern '{bad['error']['name']}' matched on node2" in out
    assert "Traceback (most recent call last)" in Path(bad["log"]).read_text()
    for node in ("node1", "node3"):
        assert results[node]["status"] == "FAIL" and results[node]["failed_node"] == "node2"
    _assert_nothing_left(node_exec, results, tmp_path)


@pytest.mark.parametrize("backend", ["container"])
def test_slow_node_fails_on_the_throughput_threshold(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        backend,
        tmp_path,
        faults={"node2": {"slow_factor": 4.0}},
        maxtext_thresholds={"tflops_per_device": {"min": 100.0}},
    )
    out = _output(proc)
    assert proc.returncode != 0
    results = _results(tmp_path)
    assert results["node1"]["status"] == "PASS" and results["node3"]["status"] == "PASS"
    slow = results["node2"]
    assert slow["status"] == "FAIL" and slow["failed_node"] == "node2" and slow["error"] is None
    check = next(m for m in slow["metrics"] if m["metric"] == "tflops_per_device")
    assert check["status"] == "FAIL" and check["kind"] == "min" and check["threshold"] == {"min": 100.0}
    assert 30 < check["value"] < 45  # 150 TFLOP/s / 4
    # the message names the metric, the value and the threshold
    assert re.search(r"tflops_per_device 3\d\.\d+ TFLOP/s < min 100\.0 TFLOP/s", slow["reason"]), slow["reason"]
    assert re.search(r"FAILED on node2: metric check failed: tflops_per_device 3\d\.\d+ TFLOP/s < min 100\.0", out)
    assert _last_step(Path(slow["log"])) == STEPS - 1
    _assert_nothing_left(node_exec, results, tmp_path)


@pytest.mark.parametrize("backend", ["baremetal"])
def test_second_run_never_reads_the_first_runs_logs(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    run_id = f"mt-twice-{uuid.uuid4().hex[:6]}"
    first = _run(
        run_playbook,
        cluster,
        node_exec,
        backend,
        tmp_path / "first",
        faults={"node2": {"nan_at_step": 3}},
        cvs_run_id=run_id,
    )
    assert first.returncode != 0
    before = _results(tmp_path / "first")
    assert before["node2"]["error"]["name"] == "nan_or_inf"
    # same run id (same scratch directory), healthy and shorter: a reader of the old logs would see NaN or step 19
    second = _run(run_playbook, cluster, node_exec, backend, tmp_path / "second", cvs_run_id=run_id, maxtext_steps=12)
    assert second.returncode == 0, _output(second)[-5000:]
    after = _results(tmp_path / "second")
    for node in NODES:
        old, new = before[node], after[node]
        assert new["status"] == "PASS", new["reason"]
        assert new["run_id"] == old["run_id"] == run_id
        assert new["run"] != old["run"] and new["run_dir"] != old["run_dir"]
        assert new["summary"]["steps"] == 12 and new["summary"]["last_step"] == 11
        assert new["summary"]["nan_steps"] == []
        text = Path(new["log"]).read_text()
        assert "loss: nan" not in text and old["run"] not in text
    _assert_nothing_left(node_exec, after, tmp_path / "second")


# --------------------------------------------------------------------------- bad input


def test_steps_below_one_fail_before_anything_starts(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    proc = _run(run_playbook, cluster, node_exec, "baremetal", tmp_path, playbook=PLAYBOOK, maxtext_steps=0)
    out = _output(proc)
    assert proc.returncode != 0
    for node in NODES:
        assert f"{node}: invalid MaxText settings: maxtext_steps must be an integer >= 1, got 0" in out
    assert "cvs.cluster.prepare : Check the inventory model" not in out  # stopped before prepare
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_threshold_of_unknown_kind_fails_before_anything_starts(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        "baremetal",
        tmp_path,
        playbook=PLAYBOOK,
        maxtext_thresholds={"tflops_per_device": {"minimum": 100}},
    )
    out = _output(proc)
    assert proc.returncode != 0
    for node in NODES:
        assert f"{node}: invalid MaxText settings: maxtext_thresholds: unknown threshold kind 'minimum'" in out
    assert "for metric 'tflops_per_device'" in out
    assert "cvs.cluster.prepare : Check the inventory model" not in out


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_train_script_fails_naming_every_node(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    scripts = ["/nonexistent/maxtext/MaxText/train.py", "/also/missing/train.py"]
    proc = _run(run_playbook, cluster, node_exec, backend, tmp_path, playbook=PLAYBOOK, maxtext_train_scripts=scripts)
    out = _output(proc)
    assert proc.returncode != 0
    results = _results(tmp_path)
    for node in NODES:
        expected = f"{node}: maxtext_train_scripts: no train script at any configured path ({', '.join(scripts)})"
        assert expected in out
        rec = results[node]
        assert rec["status"] == "FAIL" and "not launched on any node" in rec["reason"] and expected in rec["reason"]
        assert rec["stop"] is None and rec["log"] is None
        node_exec(node, f"test ! -e {rec['run_dir']}")
    if backend == "container":  # dispose still ran
        assert "Remove the container" in out


UPSTREAM_THRESHOLDS = Path(__file__).resolve().parent / "fixtures" / "maxtext" / "upstream_threshold.json"


def test_upstream_threshold_file_judges_with_upstream_metric_names(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """An upstream CVS threshold file as it is (the lookup | from_json a user writes), its BF16 cell chosen:
    the slow node fails its per-GPU TFLOP/s minimum, info metrics are recorded with upstream's units."""
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        "baremetal",
        tmp_path,
        faults={"node2": {"slow_factor": 4.0}},
        maxtext_thresholds=json.loads(UPSTREAM_THRESHOLDS.read_text()),
        maxtext_threshold_cell="NNODES=3,STEPS=20,PRECISION=BF16",
    )
    out = _output(proc)
    assert proc.returncode != 0
    results = _results(tmp_path)
    assert results["node1"]["status"] == "PASS" and results["node3"]["status"] == "PASS", out[-3000:]
    rows = {n: {m["metric"]: m for m in rec["metrics"]} for n, rec in results.items()}
    # one row per metric, under this collection's name: upstream's names are aliases (the threshold names one)
    slow = rows["node2"]["tflops_per_device"]
    assert slow["status"] == "FAIL" and slow["threshold"] == {"min": 100.0} and 30 < slow["value"] < 45
    assert slow["aliases"] == ["tflops_per_sec_per_gpu"] and slow["unit"] == "TFLOP/s"
    assert re.search(
        r"FAILED on node2: metric check failed: tflops_per_device 3\d\.\d+ TFLOP/s < min 100\.0 TFLOP/s "
        r"\(threshold given as tflops_per_sec_per_gpu: min 100\.0\)",
        out,
    )
    for node in ("node1", "node3"):
        got = rows[node]
        assert got["tflops_per_device"]["status"] == "PASS"
        assert not {"tflops_per_sec_per_gpu", "step_time_p95_ms", "step_time_seconds"} & set(got), sorted(got)
        total = got["tokens_per_sec_total"]
        assert total["status"] == "RECORD" and total["unit"] == "tokens/s"
        assert total["value"] == pytest.approx(got["tokens_per_device"]["value"] * 8 * 3)
        p95 = got["step_time_p95"]  # upstream's step_time_p95_ms max 3600000 (ms), judged in s
        assert p95["status"] == "PASS" and p95["threshold"] == {"max": 3600.0} and p95["unit"] == "s"
        assert got["loss_decreased"]["status"] == "RECORD" and got["steps_to_target"]["value"] is None


def test_upstream_threshold_file_errors_stop_before_anything_starts(
    run_playbook: Callable[..., Any], cluster: Any, node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    proc = _run(
        run_playbook,
        cluster,
        node_exec,
        "baremetal",
        tmp_path,
        playbook=PLAYBOOK,
        maxtext_thresholds=json.loads(UPSTREAM_THRESHOLDS.read_text()),
    )
    out = _output(proc)
    assert proc.returncode != 0
    for node in NODES:
        assert (
            f"{node}: invalid MaxText settings: maxtext_thresholds: the threshold file has 2 cells; "
            "choose one with maxtext_threshold_cell: NNODES=3,STEPS=20,PRECISION=BF16; NNODES=3,STEPS=20,PRECISION=FP8"
        ) in " ".join(out.split())
    assert "cvs.cluster.prepare : Check the inventory model" not in out


UPSTREAM_CONFIG = Path(__file__).resolve().parent / "fixtures" / "maxtext" / "cvs_train_params_config.json"


def test_upstream_training_config_runs_with_its_settings_and_patterns(
    run_playbook: Callable[..., Any], node_exec: Callable[..., Any], tmp_path: Path
) -> None:
    """An upstream CVS MaxText training config (train_params layout), given with -e @file and its second sweep chosen:
    the launched config.yml and env.sh on every node carry the file's steps, sweep key and overrides, GPU count,
    container.env and XLA flags; its error pattern, which matches the batch size of that sweep, stops the run."""
    tokenizer = "/home/root/cache/maxtext/tokenizer"  # the file's {paths.models_dir}/tokenizer, for user root
    for node in NODES:  # the role's preflight checks that the tokenizer exists, as it would on a real shared fs
        node_exec(node, ["mkdir", "-p", tokenizer])
    try:
        proc = run_playbook(
            PLAYBOOK,
            "baremetal",
            {"cvs_results_dir": str(tmp_path), "maxtext_poll_interval": POLL, "maxtext_stall_timeout": 30,
             "maxtext_timeout": 300, "maxtext_sweep": "BS=2,PRECISION=BF16,SL=64"},
            args=["-e", f"@{UPSTREAM_CONFIG}"],
            check=False,
        )  # fmt: skip
    finally:
        for node in NODES:
            node_exec(node, ["rm", "-rf", "/home/root/cache"])
    out = _output(proc)
    assert proc.returncode != 0
    for key in ("gpu_name", "threshold_json", "paths.hf_token_file", "train_params.hf_model_id"):
        assert key in out, key
    (tmp_path.parent / f"{tmp_path.name}-output.txt").write_text(out)
    results = _results(tmp_path)
    for node in NODES:
        rec = results[node]
        assert rec["status"] == "FAIL" and "error pattern 'batch of two'" in rec["reason"], rec["reason"]
        assert rec["steps"] == 9 and rec["train_script"] == "/workspace/maxtext/MaxText/train.py"
        config = yaml.safe_load(node_exec(node, ["cat", f"{rec['run_dir']}/config.yml"]).stdout)
        assert (config["steps"], config["per_device_batch_size"], config["max_target_length"]) == (9, 2, 64)
        assert config["log_period"] == 100 and config["quantization"] == ""
        assert config["tokenizer_path"] == tokenizer
        env = node_exec(node, ["cat", f"{rec['run_dir']}/env.sh"]).stdout
        for line in ("export CVS_UPSTREAM_MARK=from-container-env", "export HIP_VISIBLE_DEVICES=0,1",
                     "export JAX_DISTRIBUTED_HEARTBEAT_TIMEOUT_SECONDS=77",
                     "export XLA_FLAGS='--xla_gpu_enable_latency_hiding_scheduler=True "
                     "--xla_gpu_enable_command_buffer='"):  # fmt: skip
            assert line in env, (line, env)


def test_upstream_training_config_with_an_unknown_key_stops_before_prepare(
    run_playbook: Callable[..., Any], tmp_path: Path
) -> None:
    config = json.loads(UPSTREAM_CONFIG.read_text())
    config["train_params"]["maxtext_confg"] = config["train_params"].pop("maxtext_config")
    config["train_params"]["maxtext_config"] = {"steps": 3}
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps(config))
    proc = run_playbook(PLAYBOOK, "baremetal", {"cvs_results_dir": str(tmp_path / "r")}, args=["-e", f"@{path}"],
                        check=False)  # fmt: skip
    out = " ".join(_output(proc).split())
    assert proc.returncode != 0
    for node in NODES:
        assert (
            f"{node}: invalid MaxText settings: the upstream CVS MaxText config (-e @{path}): "
            "train_params.maxtext_confg: unknown key; did you mean 'maxtext_config'?"
        ) in out, out[-3000:]
    assert "PLAY [Prepare" not in out
