# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Upstream CVS training threshold files and the metric names they use.

Upstream's ``*_threshold.json`` maps a sweep name (a "cell") to ``{"training.<metric>": {"kind": "min" | "max" |
"info", "value": N}}``. :func:`threshold_cell` maps one cell onto this collection's threshold form (min, max, record);
:func:`upstream_metrics` computes upstream's metric names from the metrics of ``cvs.cluster.maxtext_metrics``, the node
count and the GPUs per node, so both name sets can be checked in one run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest

PREFIX = "training."
KINDS = {"min": "min", "max": "max"}
RECORD_KINDS = ("info",)
# Upstream metric name -> how it is computed here (for messages and docs).
UPSTREAM_METRICS = {
    "tflops_per_sec_per_gpu": "tflops_per_device",
    "tokens_per_sec_per_gpu": "tokens_per_device",
    "tokens_per_sec_total": "tokens_per_device x GPUs per node x nodes",
    "scaling_efficiency_pct": "100 x tokens_per_sec_total / (baseline tokens/s x nodes / baseline nodes)",
    "step_time_seconds": "step_time_mean",
    "step_time_mean_ms": "1000 x step_time_mean",
    "step_time_p50_ms": "1000 x step_time_p50",
    "step_time_p95_ms": "1000 x step_time_p95",
    "final_loss": "final_loss",
    "loss_decreased": "loss_decreased (true or false; min 1 = must be true, max 0 = must be false)",
    "eval_loss": "final_eval_loss",
    "steps_to_target": "not computed (upstream's convergence test)",
    "time_to_target_seconds": "not computed (upstream's convergence test)",
}
NOT_COMPUTED = ("steps_to_target", "time_to_target_seconds")


class CvsThresholdError(ValueError):
    """A threshold file or cell that cannot be honoured; the message names the cell and metric."""


def _number(value: Any) -> Optional[float]:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _times(value: Any, factor: float) -> Optional[float]:
    number = _number(value)
    return None if number is None else number * factor


def is_threshold_file(doc: Any) -> bool:
    """True when ``doc`` has upstream's form: cells whose keys are ``training.<metric>``."""
    if not isinstance(doc, Mapping):
        return False
    cells = [v for k, v in doc.items() if not str(k).startswith("_")]
    return bool(cells) and all(
        isinstance(c, Mapping) and c and all(str(m).startswith(PREFIX) for m in c) for c in cells
    )


def threshold_cell(doc: Any, cell: Optional[str] = None) -> dict[str, Any]:
    """One cell of an upstream threshold file in this collection's form, keyed by upstream metric name.

    ``cell`` names the sweep; it may be omitted when the file has a single cell. ``min``/``max`` become bounds,
    ``info`` becomes ``{record: true}`` (upstream records those and always passes them).
    """
    if not isinstance(doc, Mapping):
        raise CvsThresholdError("expected an upstream CVS threshold file (a mapping of sweep names)")
    cells = {str(k): v for k, v in doc.items() if not str(k).startswith("_")}
    if not cells:
        raise CvsThresholdError("the threshold file has no cell (only comments)")
    if cell in (None, ""):
        if len(cells) > 1:
            raise CvsThresholdError(
                f"the threshold file has {len(cells)} cells; choose one with maxtext_threshold_cell: "
                + "; ".join(sorted(cells))
            )
        cell = next(iter(cells))
    if cell not in cells:
        raise CvsThresholdError(f"no cell {cell!r} in the threshold file" + closest(cell, cells, "cells"))
    raw = cells[cell]
    at = f"cell {cell!r}"
    if not isinstance(raw, Mapping):
        raise CvsThresholdError(f"{at}: expected a mapping of training.<metric> to {{kind, value}}")
    out: dict[str, Any] = {}
    for key, spec in raw.items():
        key = str(key)
        if key.startswith("_"):
            continue
        if not key.startswith(PREFIX):
            raise CvsThresholdError(f"{at}, {key}: only training.<metric> thresholds apply to a MaxText run")
        metric = key[len(PREFIX) :]
        if metric not in UPSTREAM_METRICS:
            raise CvsThresholdError(
                f"{at}, {key}: unknown upstream metric" + closest(metric, UPSTREAM_METRICS, "metrics")
            )
        if not isinstance(spec, Mapping) or "kind" not in spec:
            raise CvsThresholdError(f"{at}, {key}: expected {{kind: min|max|info, value: N}}, got {spec!r}")
        extra = sorted(set(map(str, spec)) - {"kind", "value"} - {k for k in map(str, spec) if k.startswith("_")})
        if extra:
            raise CvsThresholdError(
                f"{at}, {key}.{extra[0]}: is not a key of a threshold" + closest(extra[0], ("kind", "value"))
            )
        kind = spec["kind"]
        if kind in RECORD_KINDS:
            out[metric] = {"record": True}
            continue
        if kind not in KINDS:
            raise CvsThresholdError(f"{at}, {key}.kind: got {kind!r}; upstream's kinds are min, max, info")
        if metric in NOT_COMPUTED:
            raise CvsThresholdError(
                f"{at}, {key}: kind {kind} needs upstream's convergence test, which cvs.cluster does not run; "
                "use kind info (record only) or remove it"
            )
        value = spec.get("value")
        if _number(value) is None:
            raise CvsThresholdError(f"{at}, {key}.value: expected a finite number, got {value!r}")
        out[metric] = _loss_decreased(kind, value) if metric == "loss_decreased" else {KINDS[kind]: value}
    return out


def _loss_decreased(kind: str, value: float) -> dict[str, Any]:
    """Upstream counts loss_decreased as 1/0; here it is a boolean, so a bound becomes a target (or a record)."""
    if kind == "min":
        return {"record": True} if value <= 0 else {"target": True}
    return {"record": True} if value >= 1 else {"target": False}


def upstream_metrics(
    metrics: Mapping[str, Any], nodes: int, gpus_per_node: int, baseline: Optional[Mapping[str, Any]] = None
) -> dict[str, Any]:
    """Upstream's metric names computed from ``cvs.cluster.maxtext_metrics`` output (None where the data is missing).

    final_loss and loss_decreased have the same name and meaning in both and are not repeated.

    ``gpus_per_node`` 0 (visible devices left alone) means the total is unknown. ``baseline`` is upstream's
    ``scaling_baseline`` (``tokens_per_sec_total`` of a run on ``num_nodes`` nodes); absent or 0 = no efficiency.
    """
    per_gpu = _number(metrics.get("tokens_per_device"))
    total = per_gpu * gpus_per_node * nodes if per_gpu is not None and gpus_per_node > 0 and nodes > 0 else None
    efficiency = None
    base = baseline or {}
    base_total = _number(base.get("tokens_per_sec_total"))
    base_nodes = _number(base.get("num_nodes", 1))
    if total is not None and base_total and base_nodes and base_total > 0 and base_nodes > 0:
        efficiency = 100.0 * total / (base_total * nodes / base_nodes)
    return {
        "tflops_per_sec_per_gpu": _number(metrics.get("tflops_per_device")),
        "tokens_per_sec_per_gpu": per_gpu,
        "tokens_per_sec_total": total,
        "scaling_efficiency_pct": efficiency,
        "step_time_seconds": _number(metrics.get("step_time_mean")),
        "step_time_mean_ms": _times(metrics.get("step_time_mean"), 1000.0),
        "step_time_p50_ms": _times(metrics.get("step_time_p50"), 1000.0),
        "step_time_p95_ms": _times(metrics.get("step_time_p95"), 1000.0),
        "eval_loss": _number(metrics.get("final_eval_loss")),
        "steps_to_target": None,
        "time_to_target_seconds": None,
    }
