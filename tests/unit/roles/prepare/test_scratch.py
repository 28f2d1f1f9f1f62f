"""roles/prepare/files/scratch.sh: the run's scratch directory, its marker and the retention, in one node call."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[4] / "roles" / "prepare" / "files" / "scratch.sh"
DAY = 86400


def scratch(root: Path, run: str, node: str, days: int) -> list[str]:
    argv = ["/bin/sh", "-c", SCRIPT.read_text(), "scratch.sh", str(root), run, str(root / run / node), str(days)]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.splitlines()


def old_run(root: Path, name: str, age_days: float, marked: bool = True) -> Path:
    path = root / name
    (path / "node1").mkdir(parents=True)
    stamp = time.time() - age_days * DAY
    if marked:
        (path / ".cvs-scratch").write_text(name + "\n")
        os.utime(path / ".cvs-scratch", (stamp, stamp))
    return path


def test_creates_the_scratch_directory_and_marks_the_run_once(tmp_path: Path) -> None:
    assert scratch(tmp_path, "r1", "node1", 7) == []
    node_dir, marker = tmp_path / "r1" / "node1", tmp_path / "r1" / ".cvs-scratch"
    assert stat.S_IMODE(node_dir.stat().st_mode) == 0o755 and stat.S_IMODE(marker.stat().st_mode) == 0o644
    assert marker.read_text() == "r1\n"
    marker.write_text("kept\n")
    scratch(tmp_path, "r1", "node2", 7)  # a second node of the same run: the marker is written once
    assert marker.read_text() == "kept\n" and (tmp_path / "r1" / "node2").is_dir()


def test_removes_only_marked_runs_at_least_the_retention_old(tmp_path: Path) -> None:
    old = old_run(tmp_path, "old", 7.01)
    recent = old_run(tmp_path, "recent", 6.9)
    foreign = old_run(tmp_path, "foreign", 30, marked=False)
    deep = old_run(tmp_path / "a" / "b", "deep", 30)  # deeper than ROOT/<run>/.cvs-scratch: not ours
    assert scratch(tmp_path, "r1", "node1", 7) == [str(old)]
    assert not old.exists()
    assert recent.is_dir() and foreign.is_dir() and deep.is_dir() and (tmp_path / "r1" / "node1").is_dir()


def test_a_retention_of_zero_days_removes_every_marked_run(tmp_path: Path) -> None:
    recent = old_run(tmp_path, "recent", 0.01)
    removed = scratch(tmp_path, "r1", "node1", 0)
    assert sorted(removed) == sorted([str(recent), str(tmp_path / "r1")])  # as ansible.builtin.find's age 0d
    assert not recent.exists()


def test_values_are_arguments_never_shell_text(tmp_path: Path) -> None:
    run = "r1; touch pwned"
    scratch(tmp_path, run, "$(touch pwned2)", 7)
    assert (tmp_path / run / "$(touch pwned2)").is_dir()
    assert not any(p.name.startswith("pwned") for p in tmp_path.rglob("*")) and not Path("pwned").exists()
