"""The head's job script of cvs.cluster.mpi (roles/mpi/files/mpi_job.sh), run for real: prepare, launch, stop."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ansible_collections.cvs.cluster.plugins.plugin_utils._mpi import exit_code

SCRIPT = Path(__file__).resolve().parents[4] / "roles" / "mpi" / "files" / "mpi_job.sh"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", *argv], capture_output=True, text=True, timeout=60, check=False)


def test_prepare_writes_the_hostfile_a_copy_of_itself_and_a_key_and_prints_the_public_key(tmp_path: Path) -> None:
    job = tmp_path / "job"
    done = _run(str(SCRIPT), "prepare", str(job), "cvs-mpi-run1-tag", "10.0.0.1 slots=2", "10.0.0.2 slots=2")
    assert done.returncode == 0, done.stderr
    assert (job / "hostfile").read_text() == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    assert (job / "mpi_job.sh").read_bytes() == SCRIPT.read_bytes() and (job / "out").is_dir()
    assert done.stdout.splitlines()[-1] == (job / "id_ed25519.pub").read_text().strip()
    assert done.stdout.strip().endswith(" cvs-mpi-run1-tag") and oct(job.stat().st_mode & 0o777) == "0o700"


def test_launch_detaches_the_job_and_stop_reads_its_exit_status(tmp_path: Path) -> None:
    job = tmp_path / "job"
    assert _run(str(SCRIPT), "prepare", str(job), "c", "localhost slots=1").returncode == 0
    launched = _run(str(job / "mpi_job.sh"), "launch", str(job), "30", "2", "/bin/sh", "-c", "echo ran; exit 3")
    assert launched.returncode == 0 and launched.stdout.strip().isdigit(), launched
    for _ in range(100):
        if (job / "exit_code").exists():
            break
        time.sleep(0.1)
    stopped = _run(str(job / "mpi_job.sh"), "stop", str(job), "2")
    assert "stopped 0 processes (already ended)" in stopped.stdout and exit_code({"stdout": stopped.stdout}) == 3
    assert (job / "mpirun.log").read_text() == "ran\n"


def test_stop_ends_a_running_job_which_then_has_no_exit_status(tmp_path: Path) -> None:
    job = tmp_path / "job"
    assert _run(str(SCRIPT), "prepare", str(job), "c", "localhost slots=1").returncode == 0
    launched = _run(str(job / "mpi_job.sh"), "launch", str(job), "60", "2", "/bin/sleep", "30")
    assert launched.returncode == 0, launched
    stopped = _run(str(job / "mpi_job.sh"), "stop", str(job), "2")
    assert "(SIGTERM)" in stopped.stdout and stopped.stdout.splitlines()[-1] == "exit_code: "
    assert exit_code({"stdout": stopped.stdout}) is None
