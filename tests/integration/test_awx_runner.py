"""validate.yml the way AWX runs a job: ansible-runner ``transmit | worker | process``.

The collection comes from its built tarball (installed into a fresh collections path, as in an execution
environment), the project has no ansible.cfg, and the console is chosen as the EE chooses it
(``ANSIBLE_STDOUT_CALLBACK`` in the job's environment). The job runs RVS and MaxText on the simulated cluster's
container backend.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
MAX_EVENT_RES = 700_000  # what ansible-runner keeps of an event's result (AWX's MAX_EVENT_RES default)
AWX_EVENT_LIMIT = 4_000
EVENT_BUDGET = 600_000  # log_poll's default event_budget
LOG_POLL = ("cvs.cluster.log_poll", "log_poll")
STATUS_FIELDS = {"finished", "completed", "cursors", "group", "round", "timed_out", "stalled", "elapsed", "error"}
STEPS = 8

EXTRAVARS: dict[str, Any] = {
    "rvs_poll_interval": 1,
    "rvs": {"rvs_test_level": "0", "tests": ["gst_single", "mem"]},
    "maxtext_steps": STEPS,
    "maxtext_poll_interval": 0.5,
    "maxtext_stall_timeout": 60,
    "maxtext_stop_grace": 5,
    "maxtext_timeout": 300,
    "maxtext_coordinator_port": 12393,
    "maxtext_env": {"CVS_STAND_IN_DIR": "/tmp/cvs-awx-test-no-faults"},
}


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CVS_", "AWX_", "RUNNER_"))}
    env.pop("ORIGINAL_STDOUT_CALLBACK", None)
    env.pop("JOB_ID", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _install_collection(tmp: Path) -> Path:
    """The collection as an EE holds it: built tarball + community.docker, nothing from this checkout."""
    build = tmp / "build"
    build.mkdir()
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(build), str(REPO)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        cwd=tmp,  # not the checkout: its ansible.cfg would make the checkout count as installed
    )
    (tarball,) = build.glob("cvs-cluster-*.tar.gz")
    collections = tmp / "collections"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(collections), str(tarball)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        cwd=tmp,
    )
    community = REPO / ".cache" / "collections" / "ansible_collections" / "community"
    shutil.copytree(community, collections / "ansible_collections" / "community", symlinks=True)
    installed = collections / "ansible_collections" / "cvs" / "cluster"
    assert (installed / "MANIFEST.json").is_file() and not installed.is_symlink()
    return collections


@pytest.fixture(scope="module")
def awx_job(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("awx")
    collections = _install_collection(tmp)
    pdd = tmp / "job"
    (pdd / "project").mkdir(parents=True)
    (pdd / "project" / "validate.yml").write_text("- ansible.builtin.import_playbook: cvs.cluster.validate\n")
    (pdd / "inventory").mkdir()
    shutil.copy(cluster.inventory("container"), pdd / "inventory" / "hosts.yml")
    (pdd / "env").mkdir()
    (pdd / "env" / "extravars").write_text(yaml.safe_dump(EXTRAVARS))
    (pdd / "env" / "envvars").write_text(
        yaml.safe_dump(
            {
                "ANSIBLE_COLLECTIONS_PATH": str(collections),
                # what execution-environment.yml sets in the image
                "ANSIBLE_STDOUT_CALLBACK": "cvs.cluster.cvs",
            }
        )
    )
    worker_dir = tmp / "worker"
    pipeline = (
        f"{BIN}/ansible-runner transmit {pdd} -p validate.yml --ident awx-job"
        f" | {BIN}/ansible-runner worker --private-data-dir {worker_dir}"
        f" | {BIN}/ansible-runner process {pdd} --ident awx-job"
    )
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline],
        capture_output=True,
        text=True,
        timeout=1500,
        env=_clean_env(),
        cwd=tmp,
    )
    artifacts = pdd / "artifacts" / "awx-job"
    events = [json.loads(p.read_text()) for p in sorted((artifacts / "job_events").glob("*.json"))]
    events.sort(key=lambda e: e["counter"])
    return {"proc": proc, "artifacts": artifacts, "events": events, "worker_dir": worker_dir}


def test_job_passes_and_stdout_has_no_spinner_or_cursor_control(awx_job: dict[str, Any]) -> None:
    proc = awx_job["proc"]
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert (awx_job["artifacts"] / "rc").read_text().strip() == "0"
    stdout = (awx_job["artifacts"] / "stdout").read_text()
    assert "\x1b[K" not in stdout and not re.search(r"\r(?!\n)", stdout), "spinner frames in the job output"
    assert "FAILED - RETRYING" not in stdout, "the default callback, not the cvs console, rendered the job"
    # the cvs console's line for a log_poll result (the default callback prints a bare "ok: [host]")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stdout)
    watched = re.findall(r"(?m)^ok: \[(node\d-ctr)\]: complete \(elapsed \d+s\)$", plain)
    assert sorted(watched) == ["node1-ctr", "node2-ctr", "node3-ctr"], plain[-5000:]


def test_every_log_poll_event_keeps_its_result_within_the_budget(awx_job: dict[str, Any]) -> None:
    rounds = [
        e
        for e in awx_job["events"]
        if e["event"] in ("runner_retry", "runner_on_ok", "runner_on_failed")
        and e["event_data"].get("task_action") in LOG_POLL
    ]
    assert rounds, "no log_poll round reached the job events"
    for e in rounds:
        res = e["event_data"].get("res", {})
        size = max(len(json.dumps(res)), len(str(res)))  # runner measures str(); JSON can be the longer one
        assert size <= EVENT_BUDGET < MAX_EVENT_RES, (e["event_data"]["task"], size)
        # Ansible itself drops "failed": false from ok results; the status fields of log_poll must all be there
        # an arm or a drain (maxtext's read after the stop) decides nothing: it has no round, group or deadline
        one_shot = next((key for key in ("armed", "drained") if key in res), None)
        wanted = {"finished", "cursors", one_shot} if one_shot else STATUS_FIELDS
        assert wanted <= set(res), (e["event_data"]["task"], sorted(wanted - set(res)))
    assert len(awx_job["events"]) < AWX_EVENT_LIMIT
    # call_seconds is on by default under runner: a poll result stands for several rounds
    polled = [e["event_data"]["res"] for e in rounds if "rounds_in_call" in e["event_data"]["res"]]
    assert polled and max(res["rounds_in_call"] for res in polled) > 1
    assert sum(res["rounds_in_call"] for res in polled) > len(polled)


def test_set_stats_artifacts_carry_the_report(awx_job: dict[str, Any]) -> None:
    stats = [e for e in awx_job["events"] if e["event"] == "playbook_on_stats"]
    assert stats, "no playbook_on_stats event"
    artifact = stats[-1]["event_data"].get("artifact_data", {})
    report = artifact.get("cvs_report")
    assert report and report["status"] == "PASS", artifact
    assert report["complete"] is True and report["failing_nodes"] == [] and report["incomplete_nodes"] == []
    assert report["counts"].get("PASS", 0) == 9, report["counts"]  # preflight, rvs and maxtext on each of the 3 nodes


def test_results_come_back_with_the_job_artifacts_and_logs_hold_every_line_once(awx_job: dict[str, Any]) -> None:
    runs = [p for p in (awx_job["artifacts"] / "cvs-results").iterdir() if p.is_dir()]  # not the run index
    assert len(runs) == 1, runs
    run_dir = runs[0]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["summary"]["status"] == "PASS" and results["complete"] is True
    logs = sorted((run_dir / "logs").rglob("*.log"))
    nodes = {p.relative_to(run_dir / "logs").parts[0] for p in logs}
    assert nodes == {"node1", "node2", "node3"}, logs
    for log in logs:
        lines = log.read_bytes().split(b"\n")
        assert lines[-1] == b"", f"{log}: last line cut"
        body = [line for line in lines[:-1] if line]
        assert len(body) == len(set(body)), f"{log}: a line delivered twice"
        steps = [int(m.group(1)) for line in body if (m := re.search(rb"completed step: (\d+),", line))]
        if steps:
            assert steps == list(range(STEPS)), f"{log}: steps {steps}"
