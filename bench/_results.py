# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a bench prints and keeps: medians, percentiles, sizes and milliseconds, targets and their verdict, and
bench/results/NAME.json.

A bench's summary says whether it met its target only when it has one: ``target`` (a sentence) or ``targets``
(a sentence, or the list ``judge`` makes) next to ``meets_target`` (true, false, or null when a target was not
measured in this run). A summary without a target has no ``meets_target``; ``verdict`` then says "no target".
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from _env import EXPERIMENT, RESULTS


def say(*parts: Any) -> None:
    print(*parts, flush=True)


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def human_size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def med(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def pct(values: Iterable[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@dataclass(frozen=True)
class Target:
    """One target of a bench: ``measured`` (None when this run did not measure it) at most, or at least, ``limit``."""

    what: str
    measured: float | None
    limit: float
    at_most: bool = True

    @property
    def met(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured <= self.limit if self.at_most else self.measured >= self.limit


def judge(targets: Sequence[Target]) -> dict:
    """The summary keys of a bench's targets: each target with what was measured and whether it was met, and
    ``meets_target``: False when a measured target was missed, None when one was not measured, else True."""
    rows = [{"target": t.what, "measured": t.measured, "limit": t.limit, "met": t.met} for t in targets]
    if not rows:
        raise ValueError("judge() needs at least one target; a bench without one leaves meets_target out")
    met = [r["met"] for r in rows]
    meets = False if False in met else None if None in met else True
    return {"targets": rows, "meets_target": meets}


def target_line(row: dict) -> str:
    """One row of ``judge``'s targets as printed: what, then met / MISSED / not measured, and the value measured."""
    state = {True: "met", False: "MISSED", None: "not measured"}[row["met"]]
    return f"{row['target']}: {state}" + ("" if row["measured"] is None else f" (measured {row['measured']:.4g})")


def verdict(summary: dict) -> str:
    """What run_all prints after a bench's line."""
    if not (summary.get("target") or summary.get("targets")):
        return "no target"
    meets = summary.get("meets_target")
    return "meets target" if meets is True else "MISSES target" if meets is False else "target not measured"


def check_summary(summary: dict) -> None:
    """Refuse a summary that claims a verdict without a target (or a target without a verdict)."""
    has_target = bool(summary.get("target") or summary.get("targets"))
    if has_target != ("meets_target" in summary):
        verdict_state = "set" if "meets_target" in summary else "missing"
        raise ValueError(
            "a bench summary has meets_target exactly when it has a target (target or targets): "
            f"target {'set' if has_target else 'missing'}, meets_target {verdict_state}"
        )
    if has_target and summary["meets_target"] not in (True, False, None):
        raise ValueError(f"meets_target must be true, false or null, got {summary['meets_target']!r}")


def write_results(name: str, data: dict) -> Path:
    if isinstance(data.get("summary"), dict):
        check_summary(data["summary"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    tag = os.environ.get("CVS_BENCH_TAG")
    if tag:
        name = f"{name}-{tag}"
    if EXPERIMENT:
        data = dict(data, experiment_collections=EXPERIMENT)
    data = dict(data, bench=name, finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), machine=machine_info())
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


LOAD_AT_START = [round(x, 2) for x in os.getloadavg()]


def machine_info() -> dict:
    load = os.getloadavg()
    return {
        "loadavg_at_start": LOAD_AT_START,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "loadavg_at_end": [round(x, 2) for x in load],
    }
