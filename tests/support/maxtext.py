"""What the MaxText integration tests share (test_maxtext_real.py, test_slurm.py): the CPU settings of the real
MaxText, and finding its processes and what the role's log watch read."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CPU_VARS = yaml.safe_load((REPO / "tests/cluster/maxtext/cpu.yml").read_text())
TRAINER = "trainers/pre_train/train[.]py"


def trainer_processes(node_exec: Callable[..., Any], node: str) -> list[tuple[int, str]]:
    """(pid, CVS_MAXTEXT_RUN) of the real trainer processes on a node, containers included."""
    script = (
        "for p in /proc/[0-9]*; do "
        f"if tr '\\0' ' ' <$p/cmdline 2>/dev/null | grep -q '{TRAINER}'; then "
        "r=$(tr '\\0' '\\n' <$p/environ 2>/dev/null | sed -n 's/^CVS_MAXTEXT_RUN=//p'); "
        '[ -n "$r" ] && echo "${p#/proc/} $r"; fi; done; true'
    )
    found = []
    for line in node_exec(node, script).stdout.split("\n"):
        if line.strip():
            pid, run = line.split(" ", 1)
            found.append((int(pid), run.strip()))
    return found


def wait_for(what: str, predicate: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """The first true value of ``predicate()``; the test fails naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:g}s waiting for {what}", pytrace=False)


def watched_lines(results_dir: Path, index: int) -> str:
    """What the role's log watch has read so far from the node of rank ``index`` (saved on the controller)."""
    return "".join(p.read_text(errors="replace") for p in results_dir.glob(f"*/watch/*/{index}/*/maxtext.log"))
