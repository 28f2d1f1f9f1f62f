"""The execution environment of execution-environment.yml, built on this machine and running a job as AWX does.

``scripts/ee_build.sh`` builds the image with ``ansible-builder build`` (Debian trixie base from Debian's packages,
pip from a wheelhouse downloaded on the host; an unchanged definition and collection reuse the image). The job
runs the way AWX's receptor runs one in an EE: ``ansible-runner transmit`` on the controller, ``ansible-runner
worker`` inside the image (``docker run -i``, host networking to reach the simulated nodes), ``ansible-runner
process`` back on the controller. The machine credential travels as runner's ``ssh_key`` (the ssh-agent in the
image), the project is a one-line playbook of the installed collection, the console is the one the image's
``ANSIBLE_STDOUT_CALLBACK`` names. validate.yml runs preflight and RVS on the baremetal backend.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.cvs.cluster.tests.integration.conftest import node_exec

REPO = Path(__file__).resolve().parents[2]
# ansible-runner on the controller side: the main line's (the job's own runner is the image's)
RUNNER = REPO / ".venv" / "bin" / "ansible-runner"
IDENT = "ee-job"
HEARTBEAT_RE = re.compile(r"(?m)^\[cvs\] still running: .+ \(\d+/\d+ hosts? complete.*, elapsed \d+s\)$")
EXTRAVARS: dict[str, Any] = {
    "cvs_validate_checks": ["preflight", "rvs"],
    "rvs_poll_interval": 1,
    "rvs": {"rvs_test_level": "0", "tests": ["gst_single", "mem"]},
}


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CVS_", "AWX_", "RUNNER_"))}
    for name in ("ORIGINAL_STDOUT_CALLBACK", "JOB_ID"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def ee_image() -> str:
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "ee_build.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        env=_clean_env(),
        cwd=REPO,
        check=False,
    )
    log = REPO / ".cache" / "ee" / "build.log"
    assert proc.returncode == 0, proc.stderr[-3000:] + (log.read_text()[-5000:] if log.is_file() else "")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def ee_job(ee_image: str, cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pdd = tmp_path_factory.mktemp("ee") / "job"
    # the RVS tests of this run print slowly (the stand-in's line_delay, in a fault file of this run only), so that a
    # task runs longer than the heartbeat interval below and the console has something to say while it waits
    run_id = f"ee-{uuid.uuid4().hex[:8]}"
    fault = f"/root/.cvs-stand-in/rvs.{run_id}.json"
    for node in cluster.nodes:
        node_exec(node.name, f"mkdir -p /root/.cvs-stand-in && echo '{{\"line_delay\": 0.03}}' > {fault}")
    (pdd / "project").mkdir(parents=True)
    (pdd / "project" / "validate.yml").write_text("- ansible.builtin.import_playbook: cvs.cluster.validate\n")
    # the cluster's inventory as an AWX inventory holds it: the key comes with the machine credential, not a path
    inventory = yaml.safe_load(cluster.inventory("baremetal").read_text())
    assert inventory["all"]["vars"].pop("ansible_ssh_private_key_file")
    (pdd / "inventory").mkdir()
    (pdd / "inventory" / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (pdd / "env").mkdir()
    (pdd / "env" / "extravars").write_text(yaml.safe_dump({**EXTRAVARS, "cvs_run_id": run_id}))
    (pdd / "env" / "ssh_key").write_text(cluster.key.read_text())
    # a job template's extra environment: heartbeat lines every 2 s show which console renders the job (none of
    # the job's own variables names the callback: the image's ANSIBLE_STDOUT_CALLBACK does)
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({"CVS_HEARTBEAT": "2"}))
    name = f"cvs-ee-job-{os.getpid()}"
    pipeline = (
        f"{RUNNER} transmit {pdd} -p validate.yml --ident {IDENT}"
        f" | docker run --rm -i --name {name} --network host {ee_image}"
        " ansible-runner worker --private-data-dir /runner"
        f" | {RUNNER} process {pdd} --ident {IDENT}"
    )
    try:
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", pipeline],
            capture_output=True,
            text=True,
            timeout=1500,
            env=_clean_env(),
            cwd=pdd.parent,
            check=False,
        )
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        for node in cluster.nodes:
            node_exec(node.name, f"rm -f {fault}", check=False)
    artifacts = pdd / "artifacts" / IDENT
    events = [json.loads(p.read_text()) for p in sorted((artifacts / "job_events").glob("*.json"))]
    events.sort(key=lambda e: e["counter"])
    return {"proc": proc, "artifacts": artifacts, "events": events}


def test_image_holds_ansible_core_2_21_on_python_3_13_and_the_collections(ee_image: str) -> None:
    proc = subprocess.run(
        ["docker", "run", "--rm", ee_image, "sh", "-c", "ansible --version; ansible-galaxy collection list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^ansible \[core 2\.21\.\d+\]", proc.stdout, re.M), proc.stdout
    assert re.search(r"python version = 3\.13\.", proc.stdout), proc.stdout
    for collection in ("cvs.cluster", "community.docker"):
        assert re.search(rf"^{re.escape(collection)}\s+\d", proc.stdout, re.M), proc.stdout
    labels = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", ee_image],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(labels.stdout).get("ansible-execution-environment") == "true"


def test_job_in_the_image_passes_with_the_console_and_no_spinner(ee_job: dict[str, Any]) -> None:
    proc = ee_job["proc"]
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    artifacts = ee_job["artifacts"]
    assert (artifacts / "rc").read_text().strip() == "0"
    # the worker ran in the image: its private data dir is the container's /runner
    assert json.loads((artifacts / "command").read_text())["cwd"] == "/runner/project"
    stdout = (artifacts / "stdout").read_text()
    assert "\x1b[K" not in stdout and not re.search(r"\r(?!\n)", stdout), "spinner frames in the job output"
    assert "FAILED - RETRYING" not in stdout, "the default callback, not the image's cvs console, rendered the job"
    plain = re.sub(r"\x1b\[[0-9;]*m", "", stdout)
    # the cvs console's heartbeat lines (the default callback has none)
    assert HEARTBEAT_RE.search(plain), plain[-5000:]


def test_job_artifacts_carry_the_report(ee_job: dict[str, Any]) -> None:
    stats = [e for e in ee_job["events"] if e["event"] == "playbook_on_stats"]
    assert stats, "no playbook_on_stats event"
    report = stats[-1]["event_data"].get("artifact_data", {}).get("cvs_report")
    assert report and report["status"] == "PASS", stats[-1]["event_data"]
    assert report["complete"] is True and report["failing_nodes"] == [] and report["incomplete_nodes"] == []
    assert report["counts"].get("PASS", 0) == 6, report["counts"]  # preflight and rvs on each of the 3 nodes
    (results_file,) = list((ee_job["artifacts"] / "cvs-results").glob("*/results.json"))
    run_dir = results_file.parent
    results = json.loads(results_file.read_text())
    assert results["summary"]["status"] == "PASS" and results["complete"] is True
    assert (run_dir / "junit.xml").is_file()


def test_runner_process_isolation_renders_with_the_image_console(ee_image: str, tmp_path: Path) -> None:
    """``ansible-runner run --process-isolation`` (and ansible-navigator) run runner outside the image."""
    pdd = tmp_path / "job"
    (pdd / "project").mkdir(parents=True)
    (pdd / "project" / "pb.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Wait long enough for a heartbeat\n      ansible.builtin.command: sleep 3\n"
        "      changed_when: false\n"
    )
    (pdd / "inventory").mkdir()
    (pdd / "inventory" / "hosts").write_text("localhost ansible_connection=local\n")
    (pdd / "env").mkdir()
    (pdd / "env" / "envvars").write_text(yaml.safe_dump({"CVS_HEARTBEAT": "1"}))
    proc = subprocess.run(
        [
            str(RUNNER),
            "run",
            str(pdd),
            "-p",
            "pb.yml",
            "--ident",
            "pi",
            "--process-isolation",
            "--process-isolation-executable",
            "docker",
            "--container-image",
            ee_image,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", (pdd / "artifacts" / "pi" / "stdout").read_text())
    assert HEARTBEAT_RE.search(plain), plain
