"""Run history, run comparison and burn-in on the simulated cluster (baremetal nodes, RVS's pebb_single only).

History (one module fixture, three validate.yml runs in one results directory): runs 1 and 2 healthy, in run 3
node3's PCIe bandwidth is 10 % lower (the RVS stand-in's ``bandwidth_scale`` fault). Run 3 goes through
examples/run_from_python.py (ansible-runner, as AWX runs it) so the ``cvs_report`` artifact is read too. Then
playbooks/compare.yml compares runs 1 and 3.

Burn-in: playbooks/burn_in.yml with ``cvs_repeat: 2`` while pebb_single fails on node2: both iterations run to the
end, and node2 is ranked first.

The stand-in reads a run's own faults from ``/root/.cvs-stand-in/rvs.<run id>.json`` on each node (so other suites'
faults leave these runs alone); this suite chooses its run ids, writes those files before a run and removes them
after. A run that finds the nodes leased by another suite's run (the shared cluster) is run again, under a new run
id, once that lease is gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"
CTL = REPO / "tests" / "cluster" / "ctl.sh"
EXAMPLE = REPO / "examples" / "run_from_python.py"
FAULT_DIR = "/root/.cvs-stand-in"
NODES = ("node1", "node2", "node3")
METRIC = "pebb_single bandwidth_gbps"
LEASE_WAIT = 1200  # seconds a run may wait for other suites' runs to give the nodes back
EXTRAVARS: dict[str, Any] = {
    "cvs_validate_checks": ["rvs"],
    "rvs_poll_interval": 1,
    "rvs": {"rvs_test_level": "0", "tests": ["pebb_single"]},
}


def _node_exec(node: str, cmd: str, input: str | None = None) -> None:
    subprocess.run([str(CTL), "exec", node, "sh", "-c", cmd], input=input, text=True, check=True, timeout=120)


def _playbook(cluster: Any, playbook: str, extravars: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """ansible-playbook from the repo's venv and ansible.cfg on the baremetal inventory (the module fixtures here
    cannot use the function-scoped run_playbook fixture)."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    cmd = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(cluster.inventory("baremetal")), playbook]
    cmd += ["-e", json.dumps(extravars)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)


def _leased(run_dir: Path) -> bool:
    """Whether the run found its nodes leased by another run (nothing ran: try again)."""
    data = json.loads((run_dir / "results.json").read_text())
    return any("is in use by run" in f["reason"] for f in data["summary"]["failures"])


def _faults(run_ids: list[str], faults: dict[str, dict[str, Any]]) -> None:
    """The stand-in's faults of these runs only (``rvs.<run id>.json``: other suites' faults leave them alone)."""
    for node in NODES:
        for run_id in run_ids:
            path = f"{FAULT_DIR}/rvs.{run_id}.json"
            _node_exec(node, f"mkdir -p {FAULT_DIR} && cat > {path}", input=json.dumps(faults.get(node, {})))


def _clear(run_ids: list[str]) -> None:
    for node in NODES:
        _node_exec(node, "rm -f " + " ".join(f"{FAULT_DIR}/rvs.{r}.json" for r in run_ids))


def _until_not_leased(start: Callable[[str], Any], results: Path, faults: dict[str, dict[str, Any]]) -> Any:
    """``start(run_id)`` (one validate run into ``results``, with these stand-in faults) again, under a new run id,
    until it was not refused by another suite's lease; a refused run's directory and index entry are removed."""
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        run_id = time.strftime("%Y%m%d-%H%M%S-hist", time.gmtime()) + uuid.uuid4().hex[:4]
        _faults([run_id], faults)
        try:
            out = start(run_id)
        finally:
            _clear([run_id])
        run_dir = results / run_id
        assert (run_dir / "results.json").is_file(), out
        if not _leased(run_dir):
            return out, run_dir
        assert time.monotonic() < deadline, f"the nodes stayed leased by other runs for {LEASE_WAIT} s"
        shutil.rmtree(run_dir)
        index = results / "index.json"
        data = json.loads(index.read_text())
        data["runs"] = [r for r in data["runs"] if r["run_id"] != run_id]
        index.write_text(json.dumps(data))
        time.sleep(10)


@pytest.fixture(scope="module")
def history(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("history")
    results = tmp / "results"
    extra = {**EXTRAVARS, "cvs_results_dir": str(results)}
    runs = []
    for _ in range(2):
        proc, run_dir = _until_not_leased(
            lambda run_id: _playbook(cluster, "playbooks/validate.yml", {**extra, "cvs_run_id": run_id}), results, {}
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        runs.append(run_dir)

    def third(run_id: str) -> subprocess.CompletedProcess[str]:
        extra_file = tmp / "extra.json"
        extra_file.write_text(json.dumps({**extra, "cvs_run_id": run_id}))
        return subprocess.run(
            [str(PYTHON), str(EXAMPLE), "-i", str(cluster.inventory("baremetal")), "-e", f"@{extra_file}"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=900,
        )

    runner, run3 = _until_not_leased(third, results, {"node3": {"bandwidth_scale": 0.9}})
    runs.append(run3)
    pair = [runs[0].name, runs[2].name]
    compare = _playbook(cluster, "playbooks/compare.yml", {"cvs_results_dir": str(results), "cvs_compare_runs": pair})
    assert compare.returncode == 0, compare.stdout[-4000:] + compare.stderr[-2000:]
    return {"results": results, "runs": runs, "runner": runner, "compare": compare}


def _record(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "results.json").read_text())


def test_the_index_lists_the_three_runs_in_order(history: dict[str, Any]) -> None:
    index = json.loads((history["results"] / "index.json").read_text())
    assert [r["run_id"] for r in index["runs"]] == [p.name for p in history["runs"]]
    for run in index["runs"]:
        assert run["status"] == "PASS" and set(run["nodes"]) == {"node1", "node2", "node3"}
        assert all(METRIC in n["metrics"]["rvs"] for n in run["nodes"].values())


def test_the_report_flags_node3_against_its_own_history(history: dict[str, Any]) -> None:
    first, second, third = (_record(p) for p in history["runs"])
    assert first["history"]["status"] == "NOT_COMPARED"
    assert second["history"]["regressed_nodes"] == [] and second["history"]["notes"]  # one earlier run: not judged
    hist = third["history"]
    assert third["summary"]["status"] == "PASS"  # a regression is reported, it does not fail the run
    assert hist["regressed_nodes"] == ["node3"], hist["regressions"]
    (reg,) = [r for r in hist["regressions"] if r["metric"] == METRIC]
    before = first["history"]["values"]["node3"]["rvs"][METRIC]
    assert reg["value"] == pytest.approx(before * 0.9, rel=0.01) and reg["baseline"] == pytest.approx(before, rel=0.01)
    assert re.match(
        r"node3 rvs pebb_single bandwidth_gbps [\d.]+ GB/s is 10\.\d% below its own median [\d.]+ GB/s of 2 earlier",
        reg["reason"],
    ), reg["reason"]
    trend = next(r for r in hist["nodes"]["node3"] if r["metric"] == METRIC)
    assert [p["run_id"] for p in trend["points"]] == [history["runs"][0].name, history["runs"][1].name]
    assert third["nodes"]["node3"]["checks"]["rvs"]["history"]["status"] == "REGRESSED"
    page = (history["runs"][2] / "report.html").read_text()
    assert '<section id="history">' in page and 'data-node="node3" data-status="REGRESSED"' in page


def test_the_awx_artifact_carries_the_regression_and_the_trends(history: dict[str, Any]) -> None:
    out = history["runner"].stdout
    assert history["runner"].returncode == 0, out[-4000:]
    report = json.loads(next(s for s in out.splitlines() if s.startswith("cvs_report: "))[len("cvs_report: ") :])
    assert report["history_status"] == "REGRESSED" and report["regressed_nodes"] == ["node3"]
    assert report["regressions"][0]["metric"] == METRIC
    values = report["trends"]["node3"][f"rvs {METRIC}"]
    assert len(values) == 3 and values[2] == pytest.approx(values[0] * 0.9, rel=0.01)


def test_compare_names_the_metric_and_both_values(history: dict[str, Any]) -> None:
    first, third = _record(history["runs"][0]), _record(history["runs"][2])
    a = first["history"]["values"]["node3"]["rvs"][METRIC]
    b = third["history"]["values"]["node3"]["rvs"][METRIC]
    out = history["compare"].stdout
    m = re.search(r"node3 rvs pebb_single bandwidth_gbps: ([\d.]+) GB/s -> ([\d.]+) GB/s \((-\d+\.\d)%, worse\)", out)
    assert m, out[-3000:]
    assert float(m.group(1)) == pytest.approx(a, rel=1e-3) and float(m.group(2)) == pytest.approx(b, rel=1e-3)
    assert float(m.group(3)) == pytest.approx(-10.0, abs=0.6)
    assert not re.search(r'"node[12] rvs pebb_single', out)  # the healthy nodes did not change


@pytest.fixture(scope="module")
def burn_in(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    results = tmp_path_factory.mktemp("burn-in") / "results"
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        bid = time.strftime("%Y%m%d-%H%M%S-burn", time.gmtime()) + uuid.uuid4().hex[:4]
        iterations = [f"{bid}-i01", f"{bid}-i02"]
        _faults(iterations, {"node2": {"fail": ["pebb_single"]}})
        try:
            extravars = {**EXTRAVARS, "cvs_results_dir": str(results), "cvs_repeat": 2, "cvs_burn_in_id": bid}
            proc = _playbook(cluster, "playbooks/burn_in.yml", extravars)
        finally:
            _clear(iterations)
        runs = [results / r for r in iterations if (results / r / "results.json").is_file()]
        if not any(_leased(p) for p in runs):
            break
        assert time.monotonic() < deadline, f"the nodes stayed leased by other runs for {LEASE_WAIT} s"
        shutil.rmtree(results)
        time.sleep(10)
    doc = json.loads((results / f"burn-in-{bid}" / "burn_in.json").read_text())
    return {"proc": proc, "runs": runs, "doc": doc, "results": results, "bid": bid}


def test_burn_in_goes_on_past_a_failing_node_and_ranks_the_nodes(burn_in: dict[str, Any]) -> None:
    proc, doc = burn_in["proc"], burn_in["doc"]
    out = proc.stdout
    assert proc.returncode == 2, out[-4000:] + proc.stderr[-2000:]  # the play fails naming the failing node
    assert [it["rc"] for it in doc["iterations"]] == [2, 2], doc["iterations"]  # each iteration ran to its verdict
    bid = doc["burn_in_id"]
    assert bid == burn_in["bid"]
    assert [p.name for p in burn_in["runs"]] == [f"{bid}-i01", f"{bid}-i02"]
    for run_dir in burn_in["runs"]:
        data = _record(run_dir)
        assert data["summary"]["failing_nodes"] == ["node2"] and data["complete"] is True
        assert data["history"]["burn_in_id"] == bid
    node2 = doc["nodes"][0]
    assert node2["node"] == "node2" and node2["rank"] == 1
    assert node2["failures"] == 2 and node2["failed_checks"] == {"rvs FAIL": 2}
    assert {n["node"]: n["failures"] for n in doc["nodes"][1:]} == {"node1": 0, "node3": 0}
    assert doc["failing_nodes"] == ["node2"]
    assert doc["lines"][0].startswith("1. node2: failed 2 of 2 iteration(s) (rvs FAIL x2)")
    assert all("largest spread" in line for line in doc["lines"][1:])
    assert "1. node2: failed 2 of 2 iteration(s)" in out  # the ranking is printed
    assert f"burn-in {bid}: 2 iteration(s); failing: node2" in out
    index = json.loads((burn_in["results"] / "index.json").read_text())
    assert [r.get("burn_in_id") for r in index["runs"]] == [bid, bid]
