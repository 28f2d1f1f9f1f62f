"""Run results and reports of playbooks/validate.yml on the simulated cluster.

One run (module fixture) of validate.yml through examples/run_from_python.py (ansible-runner's Python API) with
an RVS fault on node2: the runner prints live log_poll progress and exits 1; the run directory holds results.json,
junit.xml (valid against tests/integration/fixtures/report/junit.xsd and Jenkins' junit-10.xsd in
tests/unit/fixtures/) and report.html, which a headless chromium renders at 1400x900 and 390x844 (no horizontal
scroll, the failing node named in the first screen, plots drawn; screenshots kept under tests/output/report/).
Needs Debian's ``chromium`` package on the controller.
A second test interrupts a run with SIGINT: the run disposes of its containers and keeps a report marked incomplete.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
import yaml

from ansible_collections.cvs.cluster.tests.support.report_browser import chromium, measure, screenshot

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"
EXAMPLE = REPO / "examples" / "run_from_python.py"
XSD = Path(__file__).resolve().parent / "fixtures" / "report" / "junit.xsd"
JUNIT10 = REPO / "tests" / "unit" / "fixtures" / "junit-10.xsd"
CTL = REPO / "tests" / "cluster" / "ctl.sh"
OUTPUT = REPO / "tests" / "output" / "report"
FAULT = "/root/.cvs-stand-in/rvs.json"
NODES = ["node1", "node2", "node3"]
GST_GPU2 = "36479"  # the stand-in's GPU id of device index 2

EXTRAVARS: dict[str, Any] = {
    "rvs_poll_interval": 1,
    "rvs": {"rvs_test_level": "0", "tests": ["gst_single", "mem"]},
    "maxtext_steps": 8,
    "maxtext_poll_interval": 0.5,
    "maxtext_stall_timeout": 60,
    "maxtext_stop_grace": 5,
    "maxtext_timeout": 300,
    "maxtext_coordinator_port": 12391,  # other suites use (and block) the default port on the shared cluster
    # the stand-in trainer reads faults from here: a directory of this suite's own, without faults
    "maxtext_env": {"CVS_STAND_IN_DIR": "/tmp/cvs-report-test-no-faults"},
}


def _node_exec(node: str, cmd: str, input: str | None = None) -> None:
    subprocess.run([str(CTL), "exec", node, "sh", "-c", cmd], input=input, text=True, check=True, timeout=120)


def _run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="module")
def failed_run(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """validate.yml via the ansible-runner example, gst_single failing on GPU index 2 of node2."""
    tmp = tmp_path_factory.mktemp("report")
    results = tmp / "results"
    extra = tmp / "extra.json"
    extra.write_text(json.dumps({**EXTRAVARS, "cvs_results_dir": str(results)}))
    _node_exec(
        "node2", f"mkdir -p /root/.cvs-stand-in && cat > {FAULT}", json.dumps({"fail": ["gst_single"], "fail_gpu": 2})
    )
    lines: list[tuple[float, str]] = []
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [str(PYTHON), str(EXAMPLE), "-i", str(cluster.inventory("baremetal")), "-e", f"@{extra}"],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        rc = proc.wait(timeout=900)
    finally:
        _node_exec("node2", f"rm -f {FAULT}")
    return {"rc": rc, "lines": lines, "elapsed": time.monotonic() - started, "run_dir": _run_dir(results)}


def test_runner_prints_live_log_poll_progress_and_fails(failed_run: dict[str, Any]) -> None:
    lines = failed_run["lines"]
    text = "\n".join(t for _, t in lines)
    assert failed_run["rc"] == 1, text[-4000:]
    progress = [(t, s) for t, s in lines if re.match(r"^\[node\d\] .*: round \d+, \+\d+ line\(s\), group ", s)]
    assert {s.split("]")[0][1:] for _, s in progress} == set(NODES), text[-4000:]
    assert any(s.endswith("polling") for _, s in progress) and any(s.endswith("done") for _, s in progress)
    # live: the first poll round was printed well before the run ended (the run goes on to dispose + report)
    assert progress[0][0] < failed_run["elapsed"] - 3
    assert "status: failed, rc: 2" in text
    report = json.loads(next(s for _, s in lines if s.startswith("cvs_report: "))[len("cvs_report: ") :])
    assert report["status"] == "FAIL" and report["failing_nodes"] == ["node2"]
    assert report["counts"] == {"PASS": 8, "FAIL": 1, "ERROR": 0, "UNREACHABLE": 0, "MISSING": 0}


def test_results_json_names_node_check_and_line(failed_run: dict[str, Any]) -> None:
    run_dir = failed_run["run_dir"]
    data = json.loads((run_dir / "results.json").read_text())
    assert data["complete"] is True and data["checks"] == ["preflight", "rvs", "maxtext"]
    assert list(data["nodes"]) == NODES
    (fail,) = data["summary"]["failures"]
    assert (fail["node"], fail["check"], fail["status"]) == ("node2", "rvs", "FAIL")
    assert f"GPU {GST_GPU2}" in fail["line"] and "met: FALSE" in fail["line"]
    node2 = data["nodes"]["node2"]
    assert node2["facts"]["hostname"] == "node2" and node2["facts"]["rvs_version"]
    # the model as amd-smi names it (preflight runs first; RVS's configuration folder is MI300X)
    assert node2["facts"]["gpu_model"] == "AMD Instinct MI300X" and node2["facts"]["backend"] == "baremetal"
    rvs = node2["checks"]["rvs"]
    assert rvs["duration"] is not None and rvs["started"] and rvs["backend"] == "baremetal"
    assert any(m["metric"] == "test gst_single" and m["status"] == "FAIL" for m in rvs["metrics"])
    mt = data["nodes"]["node1"]["checks"]["maxtext"]
    assert mt["status"] == "PASS" and any(m["metric"] == "tflops_per_device" for m in mt["metrics"])


def test_junit_validates_and_counts_one_failure(failed_run: dict[str, Any]) -> None:
    text = (failed_run["run_dir"] / "junit.xml").read_text()
    xmlschema.XMLSchema(str(XSD)).validate(text)
    xmlschema.XMLSchema(str(JUNIT10)).validate(text)
    root = ET.fromstring(text)
    # 3 nodes x preflight, rvs, maxtext
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("9", "1", "0")
    assert root.get("skipped") is None and "." in (root.get("time") or "")
    failures = root.findall(".//testcase/failure/..")
    assert [(c.get("classname"), c.get("name")) for c in failures] == [("cvs.rvs", "node2")]
    assert "met: FALSE" in (failures[0].find("failure").text or "")  # type: ignore[union-attr]


def test_html_report_renders_in_headless_chromium(failed_run: dict[str, Any], tmp_path: Path) -> None:
    page = failed_run["run_dir"] / "report.html"
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # self-contained
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile-dom").stdout
    rows = re.findall(r'<tr class="node" data-node="([^"]+)"', dom)
    assert rows == ["node2", "node1", "node3"]  # failing nodes first
    cells = re.findall(r'<td class="cell (\w+)" data-node="(\w+)" data-check="(\w+)"', dom)
    assert [c for c in cells if c[0] != "PASS"] == [("FAIL", "node2", "rvs")], cells
    assert len(cells) == 9
    assert "<details" in dom and "met: FALSE" in dom
    OUTPUT.mkdir(parents=True, exist_ok=True)
    shot = OUTPUT / "report.png"
    chromium(f"--screenshot={shot}", "--window-size=1600,1400", page.as_uri(), profile=tmp_path / "profile-shot")
    assert shot.stat().st_size > 10_000
    shutil.copy(page, OUTPUT / "report.html")


@pytest.mark.parametrize(("width", "height"), [(1400, 900), (390, 844)])
def test_html_report_fits_desktop_and_phone(
    failed_run: dict[str, Any], tmp_path: Path, width: int, height: int
) -> None:
    """The report of the real run: no horizontal scroll, node2 and its offending RVS line in the first screen, the
    loss/step-time/throughput plots and the RVS per-GPU grid drawn."""
    page = failed_run["run_dir"] / "report.html"
    m = measure(page, width, height, tmp_path)
    assert m["innerWidth"] == width and m["scrollWidth"] <= m["innerWidth"], m["wide"]
    first = "\n".join(m["first"])
    assert "node2" in first and "met: FALSE" in first and "1 of 3 node(s) failing: node2" in first, first[:2000]
    plots = {p["id"]: p for p in m["plots"]}
    for fid in ("plot-loss-maxtext", "plot-steptime-maxtext", "plot-maxtext-tflops_per_device", "plot-rvs-gpus"):
        assert fid in plots and plots[fid]["marks"] > 3, sorted(plots)
    shot = screenshot(page, width, height, OUTPUT / f"real-run-{width}x{height}.png", tmp_path)
    assert shot.stat().st_size > 10_000


# upstream CVS's names of MaxText metrics: accepted in thresholds, never a row of their own
UPSTREAM_NAMES = {
    "tflops_per_sec_per_gpu",
    "tokens_per_sec_per_gpu",
    "step_time_seconds",
    "step_time_mean_ms",
    "step_time_p50_ms",
    "step_time_p95_ms",
    "eval_loss",
}


def test_metrics_carry_their_units_one_row_each_and_targets_as_thresholds(failed_run: dict[str, Any]) -> None:
    """Every metric row says its unit (declared by the check that made it), every metric is one row under one name,
    and RVS's target GFLOPS is the threshold of the measured GFLOPS, not a measurement of its own."""
    data = json.loads((failed_run["run_dir"] / "results.json").read_text())
    for node, row in data["nodes"].items():
        for check, rec in row["checks"].items():
            names = [m["metric"] for m in rec["metrics"]]
            assert len(names) == len(set(names)), (node, check, names)
            for m in rec["metrics"]:
                assert isinstance(m["unit"], str), (node, check, m)
                assert "target" not in m["metric"] and m["metric"] not in UPSTREAM_NAMES, (node, check, m)
    maxtext = {m["metric"]: m for m in data["nodes"]["node1"]["checks"]["maxtext"]["metrics"]}
    units = [maxtext[k]["unit"] for k in ("tflops_per_device", "tokens_per_device", "step_time_mean", "steps")]
    assert units == ["TFLOP/s", "tokens/s", "s", ""], units
    assert maxtext["step_time_mean"]["aliases"] == ["step_time_mean_ms", "step_time_seconds"]
    gst = next(m for m in data["nodes"]["node2"]["checks"]["rvs"]["metrics"] if m["metric"] == "gst_single gflops")
    assert gst["unit"] == "GFLOP/s" and gst["status"] == "FAIL" and list(gst["threshold"]) == ["min"], gst
    fleet = [(r["check"], r["metric"], r["unit"]) for r in data["fleet"]["metrics"]]
    names = [f"{c} {m}" for c, m, _u in fleet]
    assert len(names) == len(set(names)), names
    assert not [n for n in names if "target" in n or n.split()[-1] in UPSTREAM_NAMES], names
    assert all(isinstance(u, str) and u for _c, _m, u in fleet), fleet
    page = (failed_run["run_dir"] / "report.html").read_text()
    assert "target_gflops" not in page and "tflops_per_sec_per_gpu</td>" not in page


def test_first_screen_shows_what_differs_and_folds_the_rest(failed_run: dict[str, Any], tmp_path: Path) -> None:
    """The fleet table on the first screen holds the metrics with an outlier or a spread between nodes; the ones
    every node agrees on are one line (a closed details section); recorded-only metrics are folded per node."""
    run_dir = failed_run["run_dir"]
    data = json.loads((run_dir / "results.json").read_text())
    rows = data["fleet"]["metrics"]
    differ = {r["metric"] for r in rows if r["spread"] is not None and r["spread"] >= 0.01}
    differ |= {r["metric"] for r in rows if any(c["status"] == "OUTLIER" for c in r["nodes"].values())}
    agree = {r["metric"] for r in rows} - differ
    assert "gst_single gflops" in differ and {"tflops_per_device", "step_time_mean"} <= agree, (differ, agree)
    first = measure(run_dir / "report.html", 1400, 900, tmp_path)["first"]
    folded = (
        f"{len(rows) - len(differ)} more metric(s) agree on every node (values within 1% of the median, no outlier)"
    )
    assert folded in first, first
    assert "gst_single gflops" in first and not agree & set(first), sorted(agree & set(first))
    page = (run_dir / "report.html").read_text()
    start = page.index('data-node="node1" data-check="maxtext"')
    checked, recorded = page[start : page.index("</details></td>", start)].split('<details class="recorded">')
    assert 'class="RECORD"' not in checked and re.match(r"<summary>\d+ recorded metric\(s\)</summary>", recorded)
    junit = ET.fromstring((run_dir / "junit.xml").read_text())
    out = junit.find("./testsuite[@name='maxtext']/testcase[@name='node1']/system-out").text or ""  # type: ignore[union-attr]
    assert "[RECORD]" not in out and re.search(r"^recorded: steps 8; ", out, re.M), out


def test_sigint_disposes_and_keeps_partial_results(cluster: Any, tmp_path: Path) -> None:
    """Ctrl-C during the container run: ansible-playbook stops, the finish_on_interrupt callback disposes of the
    run's containers on every node and writes the final report, marked incomplete, under the same run id."""
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    name = f"cvs-report-{uuid.uuid4().hex[:6]}"
    extra = {
        **EXTRAVARS,
        "cvs_results_dir": str(tmp_path),
        "cvs_container": {**settings, "name": name, "ssh_port": 2251},
        "rvs": {"rvs_test_level": "0", "tests": [{"name": "iet_stress", "timeout": 120}]},
    }
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    inventory = str(cluster.inventory("container"))
    cmd = [str(REPO / ".venv/bin/ansible-playbook"), "-i", inventory, "playbooks/validate.yml"]
    proc = subprocess.Popen(
        [*cmd, "-e", json.dumps(extra)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out: list[str] = []
    running_before: dict[str, str] = {}
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            out.append(line)
            if "PLAY [Run the ROCm Validation Suite]" in line:
                # iet_stress hangs inside node2's container: the fault file goes in through the container's engine
                _node_exec(
                    "node2",
                    f"docker exec -i {name} sh -c 'mkdir -p /root/.cvs-stand-in && cat > {FAULT}'",
                    json.dumps({"hang": ["iet_stress"]}),
                )
            if "TASK [cvs.cluster.rvs : Run the RVS tests" in line:
                time.sleep(6)
                running_before = {n: _containers(n, name) for n in NODES}
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal does
                break
        rest, _ = proc.communicate(timeout=600)
        out.append(rest)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = "".join(out)
    assert all(running_before.values()), (running_before, text[-3000:])
    assert proc.returncode == 99, text[-3000:]  # ansible-core's exit code for a user interrupt
    assert "User interrupted execution" in text
    run_dir = _run_dir(tmp_path)
    assert f"[cvs] run {run_dir.name} was interrupted: disposing of what it started, then write its report" in text
    assert f"[cvs] run {run_dir.name} finished after the interrupt" in text, text[-3000:]
    assert "PLAY [Dispose of what this run started]" in text.split("was interrupted")[1]
    for n in NODES:
        assert _containers(n, name) == "", (n, text[-3000:])
    data = json.loads((run_dir / "results.json").read_text())
    assert data["complete"] is False and data["summary"]["status"] == "INCOMPLETE"
    assert data["checks"] == ["preflight", "rvs", "maxtext"]
    assert data["summary"]["incomplete_nodes"] == NODES
    assert all(r["checks"]["maxtext"]["status"] == "MISSING" for r in data["nodes"].values())
    assert (run_dir / "junit.xml").is_file() and (run_dir / "report.html").is_file()


def _containers(node: str, name: str) -> str:
    """IDs of the containers called ``name`` on ``node``, running or not."""
    return subprocess.run([str(CTL), "exec", node, "docker", "ps", "-aq", "--filter", f"name={name}"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip


def test_unwritable_results_dir_stops_before_touching_nodes(run_playbook: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_playbook(
        "playbooks/validate.yml", "baremetal", {"cvs_results_dir": str(blocker / "results")}, check=False
    )
    assert proc.returncode != 0
    assert f"cannot write run results to {blocker}/results: Not a directory" in proc.stdout
    assert "PLAY [Prepare the workload namespace" not in proc.stdout


def test_runner_example_finishes_an_interrupted_run(cluster: Any, tmp_path: Path) -> None:
    """SIGINT to examples/run_from_python.py: it cancels the run, disposes of the container, reports, exits 130."""
    settings = yaml.safe_load(cluster.inventory("container").read_text())["all"]["vars"]["cvs_container"]
    name = f"cvs-report-py-{uuid.uuid4().hex[:6]}"
    extra = tmp_path / "extra.json"
    extra.write_text(
        json.dumps(
            {
                **EXTRAVARS,
                "cvs_results_dir": str(tmp_path / "results"),
                "cvs_container": {**settings, "name": name, "ssh_port": 2252},
                "rvs": {"rvs_test_level": "0", "tests": [{"name": "iet_stress", "timeout": 120}]},
            }
        )
    )
    proc = subprocess.Popen(
        [str(PYTHON), str(EXAMPLE), "-i", str(cluster.inventory("container")), "-e", f"@{extra}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            out.append(line)
            if line.startswith("== Run the ROCm Validation Suite"):
                _node_exec(
                    "node2",
                    f"docker exec -i {name} sh -c 'mkdir -p /root/.cvs-stand-in && cat > {FAULT}'",
                    json.dumps({"hang": ["iet_stress"]}),
                )
                time.sleep(10)
                proc.send_signal(signal.SIGINT)
                break
        rest, _ = proc.communicate(timeout=600)
        out.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(out)
    assert proc.returncode == 130, text[-3000:]
    assert "interrupted (SIGINT)" in text and "finishing run" in text
    data = json.loads((_run_dir(tmp_path / "results") / "results.json").read_text())
    assert data["complete"] is False and data["summary"]["status"] == "INCOMPLETE"
    assert data["summary"]["incomplete_nodes"] == NODES
    report = json.loads(text.split("cvs_report: ", 1)[1].splitlines()[0])
    assert report["status"] == "INCOMPLETE" and report["counts"]["MISSING"] == 6
    for n in NODES:
        ps = subprocess.run([str(CTL), "exec", n, "docker", "ps", "-aq", "--filter", f"name={name}"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert ps.strip() == "", (n, text[-3000:])
