"""Synthetic run results for the report tests and bench/report_render.py (test fixture, no product code).

``synth_found(n)`` gives what :func:`_report.read_checks` returns for an ``n``-node run of rvs + maxtext, in the
shapes the roles write (roles/rvs/tasks/main.yml, roles/maxtext/tasks/finish.yml); ``write_run`` puts the same on
disk (check files and MaxText logs) so :func:`_report.write_report` reads it like a real run.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Mapping, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import upstream_metrics
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import metric_rows, parse_steps
from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.fleet import series_from_steps
from ansible_collections.cvs.cluster.plugins.plugin_utils._report.check_record import SCHEMA
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.record import check_rows

GPU_IDS = [36479 + 1000 * i for i in range(8)]


def node_name(i: int) -> str:
    return f"node{i + 1:03d}"


def maxtext_log(node: str, slow: float = 1.0, steps: int = 20, nan_at: Optional[int] = None, seed: int = 0) -> str:
    rnd = random.Random(f"{node}-{seed}")
    out = []
    for s in range(steps):
        secs = (0.05 * slow + (0.2 if s == 0 else 0.0)) * (1 + rnd.uniform(-0.01, 0.01))
        loss = (
            float("nan") if nan_at is not None and s >= nan_at else 10.5 * math.exp(-s / 12) + 1 + rnd.uniform(0, 0.05)
        )
        out.append(
            f"I1202 10:00:{s % 60:02d}.000000 139 metric_logger.py:180] completed step: {s}, seconds: {secs:.3f}, "
            f"TFLOP/s/device: {150 * 0.05 / secs:.3f}, Tokens/s/device: {9000 * 0.05 / secs:.3f}, "
            f"total_weights: 196608, loss: {loss:.3f}"
        )
    return "\n".join(out) + "\n"


MAXTEXT_THRESHOLDS = {"tflops_per_device": {"min": 100.0}, "final_loss": {"record": True}}


def _maxtext(node: str, slow: float, status: str = "PASS", log: Optional[str] = None) -> dict[str, Any]:
    tflops = 150.0 / slow
    summary = {
        "steps": 20, "last_step": 19, "tflops_per_device": tflops, "tokens_per_device": 9000.0 / slow,
        "step_time_mean": 0.05 * slow, "step_time_p50": 0.05 * slow, "step_time_p95": 0.0505 * slow,
        "final_loss": 1.2882000000000002, "loss_decreased": True, "nan_steps": [], "measured_steps": 19,
        "eval_steps": 0, "final_eval_loss": None,
    }  # fmt: skip
    summary = {**upstream_metrics(summary, 1, 8, None), **summary}  # as _maxtext/verdict.py keeps it
    return {
        "schema": SCHEMA,
        "check": "maxtext",
        "node": node,
        "status": status,
        "reason": "completed 20 steps; 1 threshold(s) met",
        "metrics": metric_rows(summary, MAXTEXT_THRESHOLDS),
        "summary": summary,
        "lines": [],
        "started": "2026-01-01T10:01:00Z",
        "finished": "2026-01-01T10:01:30Z",
        "backend": "baremetal",
        "log": log,
    }  # fmt: skip


def _rvs(node: str, fail_gpu: Optional[int] = None) -> dict[str, Any]:
    failures = []
    if fail_gpu is not None:
        gid = GPU_IDS[fail_gpu]
        failures = [
            {
                "gpu": gid,
                "line": f"[RESULT] [302017.167195] [gst-Tflops-2K2K2K-trig-fp4] [GPU:: {gid}] GFLOPS 8123 "
                "Target GFLOPS: 1063560 met: FALSE",
            }
        ]
    record = {
        "schema": SCHEMA,
        "check": "rvs",
        "node": node,
        "facts": {"rvs_version": "1.3.0", "gpu_model": "MI300X"},
        "status": "FAIL" if failures else "PASS",
        "reason": (f"{node}: rvs test gst_single FAIL (1 failure) - GPU {failures[0]['gpu']}: " + "x" * 400)
        if failures
        else "all 2 test(s) passed",
        "rvs_version": "1.3.0",
        "config_folder": "MI300X",
        "tests": [
            {"name": "gst_single", "status": "FAIL" if failures else "PASS",
             "reason": "1 failure" if failures else "ok",
             "duration": "0:00:00.029455", "failures": failures, "gpus": GPU_IDS,
             "metrics": {"gflops": {"min": 1000000.0, "max": 1100000.0, "mean": 1063560.0, "count": 8},
                         "target_gflops": {"min": 900000.0, "max": 900000.0, "mean": 900000.0, "count": 8}}},
            {"name": "mem", "status": "PASS", "reason": "ok", "duration": "0:00:01.5", "failures": [], "gpus": GPU_IDS},
        ],
        "started": "2026-01-01T10:00:00Z",
        "finished": "2026-01-01T10:00:30Z",
        "backend": "baremetal",
    }  # fmt: skip
    return {**record, **check_rows(record["tests"])}  # as the rvs role writes it


def synth_found(
    n: int,
    slow: Optional[Mapping[int, float]] = None,
    fail_rvs: Optional[Mapping[int, int]] = None,
    names: Optional[list[str]] = None,
) -> dict[str, dict[str, Any]]:
    """{node: {check: raw record}}: node i's MaxText is ``slow[i]`` times slower, node j's RVS fails on GPU
    index ``fail_rvs[j]``."""
    slow = slow or {}
    fail_rvs = fail_rvs or {}
    names = names or [node_name(i) for i in range(n)]
    return {
        name: {"rvs": _rvs(name, fail_rvs.get(i)), "maxtext": _maxtext(name, slow.get(i, 1.0))}
        for i, name in enumerate(names)
    }


def write_run(
    run_dir: Path,
    found: Mapping[str, Mapping[str, Any]],
    slow: Optional[Mapping[str, float]] = None,
    with_series: bool = True,
) -> None:
    """Check files under ``run_dir`` like a real run: a MaxText record carries its step ``series`` (the report's
    plots) and references a copy of its log (``log``); ``with_series=False`` leaves out the series a record
    does not have already."""
    slow = slow or {}
    for node, per in found.items():
        d = run_dir / "checks" / node
        d.mkdir(parents=True, exist_ok=True)
        for check, raw in per.items():
            if check == "maxtext" and isinstance(raw, dict):
                log = run_dir / "logs" / node / "training.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                text = maxtext_log(node, slow.get(node, 1.0))
                log.write_text(text)
                raw = {**raw, "log": str(log)}
                if with_series and "series" not in raw:
                    raw["series"] = series_from_steps(parse_steps(text))
            (d / f"{check}.json").write_text(json.dumps(raw))
