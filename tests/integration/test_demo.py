"""`make demo` on the simulated cluster: the run it makes, and the report a newcomer reads first.

The test runs the command line of the Makefile's ``demo`` target as `make -n demo` prints it (its inventory,
tests/cluster/generated/inventory-demo.yml: the container backend with the image that carries real MaxText, and
``-e @tests/cluster/maxtext/cpu.yml``), adding only a results directory of its own. One run (module fixture) for
every assertion: it passes; its report has no warning (the GPU facts agree: as many render nodes as amd-smi lists
GPUs); MaxText was the real one (the installed package, JAX on the CPU) and its metrics are in the report with their
units; the report's first screen shows the verdict and folds what every node agrees on.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.cvs.cluster.tests.support.report_browser import measure

REPO = Path(__file__).resolve().parents[2]
NODES = ["node1", "node2", "node3"]


def demo_argv() -> list[str]:
    """The command `make demo` runs after bringing the cluster up (what `make -n demo` prints for it)."""
    out = subprocess.run(
        ["make", "-n", "-s", "--no-print-directory", "demo"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    lines = [line for line in out.splitlines() if "ansible-playbook" in line]
    assert len(lines) == 1, out
    return shlex.split(lines[0])


@pytest.fixture(scope="module")
def demo(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    results = tmp_path_factory.mktemp("demo") / "results"
    argv = [*demo_argv(), "-e", json.dumps({"cvs_results_dir": str(results)})]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    out = proc.stdout + proc.stderr
    runs = [p for p in results.iterdir() if (p / "results.json").is_file()] if results.is_dir() else []
    assert len(runs) == 1, f"rc {proc.returncode}, runs {runs}\n{out[-6000:]}"
    return {"argv": argv, "rc": proc.returncode, "out": out, "run_dir": runs[0]}


def test_the_demo_runs_validate_with_real_maxtext_on_its_inventory(demo: dict[str, Any]) -> None:
    argv = demo["argv"]
    assert argv[argv.index("-i") + 1] == "tests/cluster/generated/inventory-demo.yml"
    assert "playbooks/validate.yml" in argv and "@tests/cluster/maxtext/cpu.yml" in argv
    assert demo["rc"] == 0, demo["out"][-6000:]


def test_the_demo_report_has_no_warning(demo: dict[str, Any]) -> None:
    data = json.loads((demo["run_dir"] / "results.json").read_text())
    summary = data["summary"]
    assert summary["status"] == "PASS" and summary["counts"]["PASS"] == 9, summary
    assert summary["fact_issues"] == [] and data["fleet"]["facts"] == [], summary["fact_issues"]
    assert data["fleet"]["status"] == "OK" and data["fleet"]["outliers"] == []
    for node in NODES:
        facts = data["nodes"][node]["facts"]
        # the workload namespace shows as many GPUs (render nodes) as the stand-in amd-smi lists
        assert facts["gpus"] == 8 and facts["gpu_model"] == "AMD Instinct MI300X", facts
    page = (demo["run_dir"] / "report.html").read_text()
    assert 'data-status="FACTS"' not in page and "all 3 node(s) passed every check" in page


def test_the_demo_trains_real_maxtext_and_reports_its_metrics(demo: dict[str, Any]) -> None:
    data = json.loads((demo["run_dir"] / "results.json").read_text())
    for node in NODES:
        record = json.loads((demo["run_dir"] / "checks" / node / "maxtext.json").read_text())
        # the installed MaxText package (not the stand-in trainer the nodes also carry), JAX on the CPU
        assert record["train_script"].endswith("/maxtext/trainers/pre_train/train.py"), record["train_script"]
        log = Path(record["log"]).read_text()
        assert "Jax distributed system initialized on GPU!" in log and "Jax Backend: cpu" in log
        assert re.search(r"completed step: 19, seconds: [\d.]+, TFLOP/s/device: .*, lm_loss: ", log)
        rows = {m["metric"]: m for m in data["nodes"][node]["checks"]["maxtext"]["metrics"]}
        assert rows["steps"]["value"] == 20 and rows["loss_decreased"]["value"] is True, rows
        assert rows["tokens_per_device"]["value"] > 0 and rows["tokens_per_device"]["unit"] == "tokens/s"
        assert rows["step_time_mean"]["unit"] == "s" and rows["tflops_per_device"]["unit"] == "TFLOP/s"
        assert all(isinstance(m["unit"], str) for m in rows.values()), rows


def test_the_demo_report_first_screen_is_the_verdict_with_the_agreeing_metrics_folded(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    run_dir = demo["run_dir"]
    data = json.loads((run_dir / "results.json").read_text())
    rows = data["fleet"]["metrics"]
    differ = [r["metric"] for r in rows if r["spread"] is not None and r["spread"] >= 0.01]
    first = measure(run_dir / "report.html", 1400, 900, tmp_path)["first"]
    assert "all 3 node(s) passed every check" in first, first
    folded = (
        f"{len(rows) - len(differ)} more metric(s) agree on every node (values within 1% of the median, no outlier)"
    )
    assert folded in first, first
    # no fleet row whose values every node shares is on the first screen
    agree = {r["metric"] for r in rows} - set(differ)
    assert not agree & set(first), sorted(agree & set(first))
