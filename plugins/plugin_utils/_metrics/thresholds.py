# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evaluate metrics against thresholds (pure Python, >= 3.9).

Threshold forms, keyed by metric name::

    tflops_per_device: {min: 100.0}                  # value >= min
    step_time_p95:     {max: 6.5}                    # value <= max
    step_time_mean:    {min: 1.0, max: 6.5}          # min <= value <= max
    tokens_per_device: {target: 8600, tolerance: 0.05}      # |value - target| <= 5% of |target|
    tokens_per_device: {target: 8600, tolerance: "5%"}      # same
    final_loss:        {target: 0.0, abs_tolerance: 0.5}    # |value - target| <= 0.5
    loss_decreased:    {target: true}                # booleans compare for equality
    steps:             {record: true}                # only record the value
    last_step:         ~                             # same as record ({} too)

``tolerance`` is a FRACTION of the target (0.05 = +/-5 %; a string ending in
``%`` is read as a percentage); values above 1 are rejected because they are
almost always a percentage written as a plain number. ``abs_tolerance`` is an
absolute band. A target without either must be met exactly. Bounds are
inclusive.

A missing, None, non-numeric or NaN value checked against a bound FAILs;
``inf`` is compared like any number. Metrics without a threshold are
RECORDed, as are thresholds of the record form.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["ALLOWED_KEYS", "STATUSES", "evaluate_thresholds"]

STATUSES = ("PASS", "FAIL", "RECORD")
#: Keys a threshold mapping may hold.
ALLOWED_KEYS = ("min", "max", "target", "tolerance", "abs_tolerance", "record")
_KINDS_TEXT = "min, max (or both), target (with optional tolerance as a fraction or 'N%', or abs_tolerance), record"


def _fmt(value: Any) -> str:
    """Short human form of a value for messages (full precision stays in ``value``)."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return repr(float(f"{value:.7g}"))
    return repr(value)


def _threshold_number(metric: str, key: str, raw: Any) -> float:
    if isinstance(raw, bool) or raw is None:
        raise ValueError(f"threshold {key!r} for metric {metric!r} must be a number, got {raw!r}")
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"threshold {key!r} for metric {metric!r} must be a number, got {raw!r}") from None
    if math.isnan(number):
        raise ValueError(f"threshold {key!r} for metric {metric!r} must not be NaN")
    return number


def _tolerance(metric: str, raw: Any) -> float:
    text = raw.strip() if isinstance(raw, str) else None
    if text is not None and text.endswith("%"):
        fraction = _threshold_number(metric, "tolerance", text[:-1].strip()) / 100.0
    else:
        fraction = _threshold_number(metric, "tolerance", raw)
        if fraction > 1:
            raise ValueError(
                f"threshold 'tolerance' for metric {metric!r} is a fraction of the target (0.05 = +/-5%), "
                f"got {raw!r}; write {fraction / 100:g} or '{raw}%' for a percentage, "
                "or use abs_tolerance for an absolute band"
            )
    if fraction < 0 or not math.isfinite(fraction):
        raise ValueError(f"threshold 'tolerance' for metric {metric!r} must be a finite number >= 0, got {raw!r}")
    return fraction


def _value_number(value: Any) -> Optional[float]:
    """The metric value as a float, or None if it is not a number (bools are not)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _parse(metric: str, threshold: Any) -> Tuple[str, Dict[str, Any]]:
    """Validate one threshold; return (kind, normalised bounds)."""
    if threshold is None:
        return "record", {}
    if not isinstance(threshold, Mapping):
        raise ValueError(
            f"threshold for metric {metric!r} must be a mapping, got {type(threshold).__name__} "
            f"{threshold!r}; allowed kinds: {_KINDS_TEXT}"
        )
    keys = [str(k) for k in threshold]
    unknown = [k for k in keys if k not in ALLOWED_KEYS]
    if unknown:
        raise ValueError(
            f"unknown threshold kind {', '.join(repr(k) for k in unknown)} for metric {metric!r}; "
            f"allowed kinds: {_KINDS_TEXT}"
        )
    bounds = {k: threshold[k] for k in keys if k != "record"}
    record = threshold.get("record", False)
    if not isinstance(record, bool):
        raise ValueError(f"threshold 'record' for metric {metric!r} must be true or false, got {record!r}")
    if not bounds:
        return "record", {}
    if record:
        raise ValueError(
            f"threshold for metric {metric!r} sets record: true together with bounds "
            f"{', '.join(sorted(bounds))}; use one or the other"
        )

    if "target" in bounds:
        extra = set(bounds) - {"target", "tolerance", "abs_tolerance"}
        if extra:
            raise ValueError(
                f"threshold for metric {metric!r} mixes target with {', '.join(sorted(extra))}; "
                f"allowed kinds: {_KINDS_TEXT}"
            )
        if "tolerance" in bounds and "abs_tolerance" in bounds:
            raise ValueError(f"threshold for metric {metric!r} sets both tolerance and abs_tolerance; use one")
        target = bounds["target"]
        if isinstance(target, bool):
            if len(bounds) > 1:
                raise ValueError(f"threshold for metric {metric!r}: a boolean target takes no tolerance")
            return "target", {"target": target}
        spec: Dict[str, Any] = {"target": _threshold_number(metric, "target", target)}
        if not math.isfinite(spec["target"]):
            raise ValueError(f"threshold 'target' for metric {metric!r} must be finite, got {target!r}")
        if "tolerance" in bounds:
            spec["tolerance"] = _tolerance(metric, bounds["tolerance"])
        elif "abs_tolerance" in bounds:
            spec["abs_tolerance"] = _threshold_number(metric, "abs_tolerance", bounds["abs_tolerance"])
            if spec["abs_tolerance"] < 0 or not math.isfinite(spec["abs_tolerance"]):
                raise ValueError(
                    f"threshold 'abs_tolerance' for metric {metric!r} must be a finite number >= 0, "
                    f"got {bounds['abs_tolerance']!r}"
                )
        return "target", spec

    stray = [k for k in ("tolerance", "abs_tolerance") if k in bounds]
    if stray:
        raise ValueError(f"threshold for metric {metric!r}: {stray[0]} needs a target")
    spec = {k: _threshold_number(metric, k, bounds[k]) for k in ("min", "max") if k in bounds}
    if "min" in spec and "max" in spec:
        if spec["min"] > spec["max"]:
            raise ValueError(f"threshold for metric {metric!r} has min {_fmt(spec['min'])} > max {_fmt(spec['max'])}")
        return "range", spec
    return ("min" if "min" in spec else "max"), spec


def _describe(kind: str, spec: Dict[str, Any]) -> str:
    if kind == "min":
        return f"min {_fmt(spec['min'])}"
    if kind == "max":
        return f"max {_fmt(spec['max'])}"
    if kind == "range":
        return f"range [{_fmt(spec['min'])}, {_fmt(spec['max'])}]"
    target = spec["target"]
    if isinstance(target, bool):
        return f"target {_fmt(target)}"
    if "tolerance" in spec:
        return f"target {_fmt(target)} +/-{spec['tolerance'] * 100:g}%"
    if "abs_tolerance" in spec:
        return f"target {_fmt(target)} +/-{_fmt(spec['abs_tolerance'])}"
    return f"target {_fmt(target)} (exact)"


def _check(metric: str, value: Any, kind: str, spec: Dict[str, Any], present: bool) -> Tuple[str, str]:
    """Return (status, message) for a bounded threshold."""
    want = _describe(kind, spec)
    if not present or value is None:
        state = "is missing" if not present else "has no data (None)"
        return "FAIL", f"{metric} {state}; required {want}"

    if kind == "target" and isinstance(spec["target"], bool):
        if isinstance(value, bool) and value == spec["target"]:
            return "PASS", f"{metric} {_fmt(value)} == {want}"
        return "FAIL", f"{metric} {_fmt(value)} != {want}"

    number = _value_number(value)
    if number is None:
        return "FAIL", f"{metric} value {value!r} is not a number; required {want}"
    if math.isnan(number):
        return "FAIL", f"{metric} is NaN; required {want}"
    shown = _fmt(value if isinstance(value, (int, float)) else number)

    if kind == "min":
        if number >= spec["min"]:
            return "PASS", f"{metric} {shown} >= min {_fmt(spec['min'])}"
        return "FAIL", f"{metric} {shown} < min {_fmt(spec['min'])}"
    if kind == "max":
        if number <= spec["max"]:
            return "PASS", f"{metric} {shown} <= max {_fmt(spec['max'])}"
        return "FAIL", f"{metric} {shown} > max {_fmt(spec['max'])}"
    if kind == "range":
        if number < spec["min"]:
            return "FAIL", f"{metric} {shown} < min {_fmt(spec['min'])} ({want})"
        if number > spec["max"]:
            return "FAIL", f"{metric} {shown} > max {_fmt(spec['max'])} ({want})"
        return "PASS", f"{metric} {shown} within {want}"

    target = spec["target"]
    band = abs(target) * spec["tolerance"] if "tolerance" in spec else spec.get("abs_tolerance", 0.0)
    deviation = number - target
    # isclose: 0.05 of 100 must accept exactly 95 and 105 despite binary floating point.
    ok = abs(deviation) <= band or math.isclose(abs(deviation), band, rel_tol=1e-9, abs_tol=1e-12)
    if math.isinf(number):
        ok = False
    relative = f", {deviation / abs(target) * 100:+.2f}%" if target != 0 else ""
    detail = f"off by {_fmt(deviation)}{relative}"
    if ok:
        return "PASS", f"{metric} {shown} within {want} ({detail})"
    return "FAIL", f"{metric} {shown} outside {want} ({detail})"


def evaluate_thresholds(metrics: Mapping[str, Any], thresholds: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Check ``metrics`` against ``thresholds``; return one result per metric.

    Each result is ``{"metric", "value", "status", "kind", "threshold", "message"}``
    with ``status`` one of PASS, FAIL, RECORD and ``kind`` one of ``min``, ``max``,
    ``range``, ``target``, ``record``; ``threshold`` is the threshold as given
    (None when the metric has none). Metrics come first in their own order,
    then thresholded metrics that are absent from ``metrics`` (FAIL, unless
    the threshold only records).

    All thresholds are validated before anything is evaluated: an unknown
    key or a malformed bound raises ValueError naming the metric and the
    allowed kinds.
    """
    if not isinstance(metrics, Mapping):
        raise ValueError(f"metrics must be a mapping of metric name to value, got {type(metrics).__name__}")
    if thresholds is None:
        thresholds = {}
    if not isinstance(thresholds, Mapping):
        raise ValueError(f"thresholds must be a mapping of metric name to threshold, got {type(thresholds).__name__}")

    parsed = {str(name): _parse(str(name), spec) for name, spec in thresholds.items()}
    given = {str(name): spec for name, spec in thresholds.items()}
    names = [str(name) for name in metrics] + [name for name in parsed if name not in {str(n) for n in metrics}]
    values = {str(name): value for name, value in metrics.items()}

    results: List[Dict[str, Any]] = []
    for name in names:
        present = name in values
        value = values.get(name)
        kind, spec = parsed.get(name, ("record", {}))
        threshold = dict(given[name]) if isinstance(given.get(name), Mapping) else given.get(name)
        if kind == "record":
            note = "recorded, no threshold"
            if name in parsed:
                note = "recorded" if present else "recorded, missing"
            status, message = "RECORD", f"{name} {_fmt(value)} ({note})"
        else:
            status, message = _check(name, value, kind, spec, present)
        results.append(
            {
                "metric": name,
                "value": value,
                "status": status,
                "kind": kind,
                "threshold": threshold,
                "message": message,
            }
        )
    return results
