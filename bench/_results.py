# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a bench prints and keeps: medians, percentiles, sizes and milliseconds, and bench/results/NAME.json."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any, Iterable

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


def write_results(name: str, data: dict) -> Path:
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
