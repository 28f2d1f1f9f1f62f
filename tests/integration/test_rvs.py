"""Integration tests of role cvs.cluster.rvs / playbooks/health_rvs.yml on the simulated cluster."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

PLAYBOOK = "playbooks/health_rvs.yml"
FAULT = "/root/.cvs-stand-in/rvs.json"
NOT_RVS = Path(__file__).resolve().parent / "fixtures" / "rvs" / "not_rvs.sh"


def _results(results_dir: Path) -> dict[str, dict[str, Any]]:
    runs = sorted(results_dir.iterdir(), key=lambda p: p.stat().st_mtime)
    assert runs, f"no run directory under {results_dir}"
    checks = runs[-1] / "checks"
    return {p.name: json.loads((p / "rvs.json").read_text()) for p in sorted(checks.iterdir())}


@pytest.fixture
def faults(node_exec: Callable[..., Any]) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Write the RVS stand-in fault file on a node; removed when the test ends."""
    touched: list[str] = []

    def _set(node: str, data: dict[str, Any]) -> None:
        touched.append(node)
        node_exec(node, f"mkdir -p /root/.cvs-stand-in && cat > {FAULT}", input=json.dumps(data))

    yield _set
    for node in touched:
        node_exec(node, f"rm -f {FAULT}", check=False)


@pytest.mark.parametrize("backend", ["baremetal", "container"])
def test_healthy_run_passes_everywhere(
    run_playbook: Callable[..., Any], cluster: Any, tmp_path: Path, backend: str
) -> None:
    extravars: dict[str, Any] = {"cvs_results_dir": str(tmp_path), "rvs_poll_interval": 1}
    if backend == "container":
        # own container name and port: other suites share the cluster and its default container
        settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
        extravars["cvs_container"] = {**settings, "name": "cvs-rvs-test", "ssh_port": 2231}
    run_playbook(PLAYBOOK, backend, extravars)
    results = _results(tmp_path)
    assert sorted(results) == ["node1", "node2", "node3"]
    for node, rec in results.items():
        assert rec["check"] == "rvs" and rec["node"] == node
        assert rec["status"] == "PASS", rec["reason"]
        assert rec["backend"] == backend
        assert rec["mode"] == "level" and rec["config_folder"] == "MI300X"
        assert rec["tests"] and all(t["status"] == "PASS" for t in rec["tests"])
        assert rec["tests"][0]["metrics"] and rec["started"] and rec["finished"]


def test_failing_gst_and_hung_test_fail_only_node2(
    run_playbook: Callable[..., Any], faults: Callable[..., None], tmp_path: Path
) -> None:
    """GST fails on GPU index 2 of node2 and iet_stress hangs there (cut at 4 s); nodes 1 and 3 pass."""
    faults("node2", {"fail": ["gst_single"], "fail_gpu": 2, "hang": ["iet_stress"]})
    tests = [{"name": "gst_single"}, {"name": "iet_stress", "timeout": 4}, "mem"]
    started = time.monotonic()
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {
            "cvs_results_dir": str(tmp_path),
            "rvs_poll_interval": 1,
            "rvs_kill_grace": 2,
            # upstream CVS health-config block, taken unchanged
            "rvs": {"rvs_test_level": "0", "tests": tests},
        },
        check=False,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    assert elapsed < 120, elapsed
    results = _results(tmp_path)
    assert results["node1"]["status"] == "PASS" and results["node3"]["status"] == "PASS"
    assert [t["name"] for t in results["node1"]["tests"]] == ["gst_single", "iet_stress", "mem"]
    bad = results["node2"]
    assert bad["status"] == "FAIL" and bad["mode"] == "individual"
    by_name = {t["name"]: t for t in bad["tests"]}
    gst = by_name["gst_single"]
    assert gst["status"] == "FAIL"
    assert 36479 in {f["gpu"] for f in gst["failures"]}  # device index 2
    assert "met: FALSE" in gst["failures"][0]["line"]
    iet = by_name["iet_stress"]
    assert iet["status"] == "FAIL" and iet["timed_out"] is True
    assert "timed out after 4 s" in iet["reason"]
    assert by_name["mem"]["status"] == "PASS"  # the test after the hang still ran
    out = proc.stdout
    assert "fatal: [node2]" in out and "fatal: [node1]" not in out and "fatal: [node3]" not in out
    assert "node2: rvs test gst_single FAIL" in out and "GPU 36479" in out and "met: FALSE" in out
    assert "rvs test iet_stress FAIL (timed out after 4 s" in out
    # dispose ran after the failure
    assert "PLAY [Dispose of what prepare started]" in out


def test_missing_rvs_names_node_and_path(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {"cvs_results_dir": str(tmp_path), "rvs_path": "/opt/nowhere/bin/rvs"},
        check=False,
    )
    assert proc.returncode != 0
    for node in ("node1", "node2", "node3"):
        assert f"{node}: rvs binary not found or not executable at /opt/nowhere/bin/rvs" in proc.stdout
    results = _results(tmp_path)
    assert all(r["status"] == "ERROR" for r in results.values())
    assert "PLAY [Dispose of what prepare started]" in proc.stdout


def test_bad_input_is_named(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {
            "cvs_results_dir": str(tmp_path),
            "rvs_test_level": 0,
            "rvs_tests": ["mem", {"name": "bogus"}],
        },
        check=False,
    )
    assert proc.returncode != 0
    assert "node1: rvs test bogus is unknown" in proc.stdout


@pytest.mark.parametrize("level", ["6", "-1", "high"])
def test_level_outside_0_to_5_is_named_before_preparing(
    run_playbook: Callable[..., Any], tmp_path: Path, level: str
) -> None:
    proc = run_playbook(PLAYBOOK, "baremetal", {"cvs_results_dir": str(tmp_path), "rvs_test_level": level}, check=False)
    assert proc.returncode != 0
    for node in ("node1", "node2", "node3"):
        assert f"{node}: rvs_test_level must be 0 (individual tests) or 1-5 (RVS level mode), got '{level}'" in (
            proc.stdout
        )
    assert "PLAY [Prepare the nodes]" not in proc.stdout  # stopped before anything was started
    assert not any(tmp_path.iterdir())


def test_missing_config_file_names_node_test_and_paths(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    tests = ["mem", {"name": "my_gst", "config_file": "no_such_gst.conf"}]
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {"cvs_results_dir": str(tmp_path), "rvs_test_level": 0, "rvs_tests": tests},
        check=False,
    )
    assert proc.returncode != 0
    conf = "/opt/rocm/share/rocm-validation-suite/conf"
    for node in ("node1", "node2", "node3"):
        assert (
            f"{node}: configuration file of rvs test my_gst not found "
            f"(tried {conf}/MI300X/no_such_gst.conf, {conf}/no_such_gst.conf)"
        ) in proc.stdout
    assert "TASK [cvs.cluster.rvs : Run the RVS tests" not in proc.stdout
    results = _results(tmp_path)
    assert all(r["status"] == "ERROR" and "my_gst" in r["reason"] for r in results.values())


def test_old_rvs_falls_back_to_individual_tests(
    run_playbook: Callable[..., Any], faults: Callable[..., None], tmp_path: Path
) -> None:
    """RVS 1.1.0 on node2 has no -r: level 2 becomes the individual tests there; the others run the level."""
    faults("node2", {"version": "1.1.0"})
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {"cvs_results_dir": str(tmp_path), "rvs_poll_interval": 1, "rvs_test_level": 2, "rvs_tests": ["mem", "peqt"]},
    )
    assert "node2: RVS version '1.1.0' has no test levels (needs >= 1.3.0); running the individual tests" in (
        proc.stdout
    )
    results = _results(tmp_path)
    assert all(r["status"] == "PASS" for r in results.values()), {n: r["reason"] for n, r in results.items()}
    assert results["node2"]["mode"] == "individual"
    assert [t["name"] for t in results["node2"]["tests"]] == ["mem", "peqt"]
    assert results["node1"]["mode"] == results["node3"]["mode"] == "level"
    assert [t["name"] for t in results["node1"]["tests"]] == ["level2"]


def test_unparseable_output_is_an_error_naming_node_and_test(run_playbook: Callable[..., Any], tmp_path: Path) -> None:
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {"cvs_results_dir": str(tmp_path), "rvs_path": str(NOT_RVS), "rvs_test_level": 0, "rvs_tests": ["mem"]},
        check=False,
    )
    assert proc.returncode != 0
    results = _results(tmp_path)
    for node in ("node1", "node2", "node3"):
        rec = results[node]
        assert rec["status"] == "ERROR", rec
        (test,) = rec["tests"]
        assert test["name"] == "mem" and test["status"] == "ERROR"
        assert "unparseable output" in test["reason"], test
        assert f"{node}: rvs test mem ERROR" in proc.stdout and "unparseable output" in proc.stdout


CVS_HEALTH_CONFIG = Path(__file__).resolve().parent / "fixtures" / "rvs" / "cvs_health_config.json"


def test_upstream_health_config_runs_with_its_timeouts_and_patterns(
    run_playbook: Callable[..., Any], faults: Callable[..., None], tmp_path: Path
) -> None:
    """An upstream CVS health configuration, given with -e @file: its level_config entry is the level run.

    The file's 3 s level timeout cuts node2's hung level run (the role's default is 1800 s); its fail
    pattern, upper-case like upstream's and matched case-insensitively, fails the healthy nodes on a line
    their output always has; its installer-only keys are named as ignored; path is rvs's directory.
    """
    faults("node2", {"hang": ["level4"]})
    proc = run_playbook(
        PLAYBOOK,
        "baremetal",
        {"cvs_results_dir": str(tmp_path), "rvs_poll_interval": 1, "rvs_kill_grace": 1},
        args=["-e", f"@{CVS_HEALTH_CONFIG}"],
        check=False,
    )
    assert proc.returncode != 0
    for key in ("git_install_path", "git_url", "nfs_install", "rocm_path", "config_path_mi300x"):
        assert f"rvs.{key}: ignored" in proc.stdout, key
    results = _results(tmp_path)
    hung = results["node2"]["tests"]
    assert [t["name"] for t in hung] == ["level4"] and hung[0]["timeout"] == 3
    assert hung[0]["timed_out"] is True and "timed out after 3 s" in hung[0]["reason"]
    assert hung[0]["command"] == "/opt/rocm/bin/rvs -r 4"
    for node in ("node1", "node3"):
        (run,) = results[node]["tests"]
        assert run["status"] == "FAIL" and not run["timed_out"], run
        lines = [f["line"] for f in run["failures"]]
        assert any("Package rccl installed version is 2.22" in line for line in lines), lines


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"test": []}, "rvs.test: is not a key of upstream's rvs schema; did you mean 'tests'?"),
        ({"path": "<changeme>/bin"}, "rvs.path: still holds the placeholder '<changeme>'"),
        (
            {"tests": [{"name": "level_config", "fail_regex_patterns": ["met:(FALSE"]}]},
            "rvs.tests[0].fail_regex_patterns[0]: invalid regular expression 'met:(FALSE'",
        ),
    ],
    ids=["unknown-key", "placeholder", "bad-regex"],
)
def test_upstream_health_config_errors_stop_before_prepare(
    run_playbook: Callable[..., Any], tmp_path: Path, block: dict[str, Any], message: str
) -> None:
    config = tmp_path / "health.json"
    config.write_text(json.dumps({"rvs": block}))
    proc = run_playbook(
        PLAYBOOK, "baremetal", {"cvs_results_dir": str(tmp_path / "results")}, args=["-e", f"@{config}"], check=False
    )
    assert proc.returncode != 0
    assert message in proc.stdout
    assert "PLAY [Prepare" not in proc.stdout
