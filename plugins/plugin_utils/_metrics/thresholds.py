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

One name per metric: a check that knows other names for its metrics (MaxText's
upstream CVS names, ``step_time_p95_ms`` for ``step_time_p95`` in ms) passes
them as ``aliases``; a threshold given under an alias is converted to the
metric's own name and unit, and the alias is only shown as one
(``aliases`` of the row, and the message). Each row carries the ``unit`` its
check declares for the metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["ALLOWED_KEYS", "STATUSES", "canonical_thresholds", "evaluate_thresholds"]

STATUSES = ("PASS", "FAIL", "RECORD")
#: Keys a threshold mapping may hold.
ALLOWED_KEYS = ("min", "max", "target", "tolerance", "abs_tolerance", "record")
#: Keys whose value is in the metric's unit (converted with an alias's factor); ``tolerance`` is a fraction.
_SCALED_KEYS = ("min", "max", "target", "abs_tolerance")
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


def _quantity(unit: Optional[str]) -> Callable[[Any], str]:
    """``_fmt`` followed by the unit (none for '' or None)."""
    return lambda value: f"{_fmt(value)} {unit}" if unit else _fmt(value)


def _describe(kind: str, spec: Dict[str, Any], unit: str = "") -> str:
    q = _quantity(unit)
    if kind == "min":
        return f"min {q(spec['min'])}"
    if kind == "max":
        return f"max {q(spec['max'])}"
    if kind == "range":
        return f"range [{q(spec['min'])}, {q(spec['max'])}]"
    target = spec["target"]
    if isinstance(target, bool):
        return f"target {_fmt(target)}"
    if "tolerance" in spec:
        return f"target {q(target)} +/-{spec['tolerance'] * 100:g}%"
    if "abs_tolerance" in spec:
        return f"target {q(target)} +/-{q(spec['abs_tolerance'])}"
    return f"target {q(target)} (exact)"


def _check(metric: str, value: Any, kind: str, spec: Dict[str, Any], present: bool, unit: str = "") -> Tuple[str, str]:
    """Return (status, message) for a bounded threshold (numbers followed by ``unit``)."""
    q = _quantity(unit)
    want = _describe(kind, spec, unit)
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
    shown = q(value if isinstance(value, (int, float)) else number)

    if kind == "min":
        if number >= spec["min"]:
            return "PASS", f"{metric} {shown} >= min {q(spec['min'])}"
        return "FAIL", f"{metric} {shown} < min {q(spec['min'])}"
    if kind == "max":
        if number <= spec["max"]:
            return "PASS", f"{metric} {shown} <= max {q(spec['max'])}"
        return "FAIL", f"{metric} {shown} > max {q(spec['max'])}"
    if kind == "range":
        if number < spec["min"]:
            return "FAIL", f"{metric} {shown} < min {q(spec['min'])} ({want})"
        if number > spec["max"]:
            return "FAIL", f"{metric} {shown} > max {q(spec['max'])} ({want})"
        return "PASS", f"{metric} {shown} within {want}"

    target = spec["target"]
    band = abs(target) * spec["tolerance"] if "tolerance" in spec else spec.get("abs_tolerance", 0.0)
    deviation = number - target
    # isclose: 0.05 of 100 must accept exactly 95 and 105 despite binary floating point.
    ok = abs(deviation) <= band or math.isclose(abs(deviation), band, rel_tol=1e-9, abs_tol=1e-12)
    if math.isinf(number):
        ok = False
    relative = f", {deviation / abs(target) * 100:+.2f}%" if target != 0 else ""
    detail = f"off by {q(deviation)}{relative}"
    if ok:
        return "PASS", f"{metric} {shown} within {want} ({detail})"
    return "FAIL", f"{metric} {shown} outside {want} ({detail})"


def _scaled(spec: Any, factor: float) -> Any:
    """A threshold given in an alias's unit (alias value = ``factor`` x metric value), in the metric's unit."""
    if factor == 1 or not isinstance(spec, Mapping):
        return dict(spec) if isinstance(spec, Mapping) else spec
    out = dict(spec)
    for key in _SCALED_KEYS:
        value = out.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value / factor
    return out


def canonical_thresholds(
    thresholds: Optional[Mapping[str, Any]], aliases: Optional[Mapping[str, Any]] = None
) -> Tuple[Dict[str, Any], Dict[str, Tuple[str, Any]]]:
    """(thresholds keyed by the metrics' own names, {metric: (alias, threshold as given)} for those given by alias).

    ``aliases``: ``{alias: (metric, factor)}``, the alias's value being ``factor`` x the metric's (1000 for a time
    in ms of a metric in s). Each threshold is validated under the name it was given; two thresholds for one metric
    (its name and an alias, or two aliases) raise ValueError naming both.
    """
    if thresholds is None:
        thresholds = {}
    if not isinstance(thresholds, Mapping):
        raise ValueError(f"thresholds must be a mapping of metric name to threshold, got {type(thresholds).__name__}")
    aliases = aliases or {}
    out: Dict[str, Any] = {}
    given_as: Dict[str, Tuple[str, Any]] = {}
    named: Dict[str, str] = {}
    for raw_name, spec in thresholds.items():
        name = str(raw_name)
        _parse(name, spec)  # a bad threshold is named as the user wrote it
        metric, factor = aliases.get(name, (name, 1))
        if metric in named:
            first = named[metric]
            both = f"{first!r} and {name!r}"
            raise ValueError(
                f"thresholds {both} name the same metric {metric!r}"
                + (f" ({', '.join(repr(n) for n in (first, name) if n != metric)} being another name for it)")
                + "; keep one of them"
            )
        named[metric] = name
        out[metric] = _scaled(spec, float(factor))
        if metric != name:
            given_as[metric] = (name, spec)
    return out, given_as


def evaluate_thresholds(
    metrics: Mapping[str, Any],
    thresholds: Optional[Mapping[str, Any]],
    *,
    units: Optional[Mapping[str, str]] = None,
    aliases: Optional[Mapping[str, Any]] = None,
    drop_missing: bool = False,
) -> List[Dict[str, Any]]:
    """Check ``metrics`` against ``thresholds``; return one result per metric.

    Each result is ``{"metric", "value", "status", "kind", "threshold", "message"}``
    with ``status`` one of PASS, FAIL, RECORD and ``kind`` one of ``min``, ``max``,
    ``range``, ``target``, ``record``; ``threshold`` is the threshold as given
    (None when the metric has none). Metrics come first in their own order,
    then thresholded metrics that are absent from ``metrics`` (FAIL, unless
    the threshold only records).

    ``units``: ``{metric: unit}`` the check declares; with it every row also has ``unit`` (None for a metric it
    does not name). ``aliases``: ``{alias: (metric, factor)}`` (see :func:`canonical_thresholds`): values of
    ``metrics`` under an alias are left out (the metric's own row stands for them), thresholds under an alias
    judge the metric, and rows of metrics that have aliases list them (``aliases``). ``drop_missing``: leave out
    metrics whose value is None and that have no threshold (nothing to say about them).

    All thresholds are validated before anything is evaluated: an unknown
    key or a malformed bound raises ValueError naming the metric and the
    allowed kinds.
    """
    if not isinstance(metrics, Mapping):
        raise ValueError(f"metrics must be a mapping of metric name to value, got {type(metrics).__name__}")
    aliases = aliases or {}
    thresholds, given_as = canonical_thresholds(thresholds, aliases)
    known_as: Dict[str, List[str]] = {}
    for alias, (metric, _factor) in aliases.items():
        known_as.setdefault(str(metric), []).append(str(alias))

    parsed = {str(name): _parse(str(name), spec) for name, spec in thresholds.items()}
    given = {str(name): spec for name, spec in thresholds.items()}
    own = [str(name) for name in metrics if str(name) not in aliases]
    names = own + [name for name in parsed if name not in set(own)]
    values = {str(name): value for name, value in metrics.items()}

    results: List[Dict[str, Any]] = []
    for name in names:
        present = name in values
        value = values.get(name)
        if drop_missing and value is None and name not in parsed:
            continue
        kind, spec = parsed.get(name, ("record", {}))
        threshold = dict(given[name]) if isinstance(given.get(name), Mapping) else given.get(name)
        if kind == "record":
            note = "recorded, no threshold"
            if name in parsed:
                note = "recorded" if present else "recorded, missing"
            status, message = "RECORD", f"{name} {_quantity((units or {}).get(name))(value)} ({note})"
        else:
            status, message = _check(name, value, kind, spec, present, (units or {}).get(name) or "")
        if name in given_as:
            alias, as_given = given_as[name]
            shown = ", ".join(f"{k} {_fmt(v)}" for k, v in as_given.items()) if isinstance(as_given, Mapping) else ""
            message += f" (threshold given as {alias}" + (f": {shown})" if shown else ")")
        row: Dict[str, Any] = {
            "metric": name,
            "value": value,
            "status": status,
            "kind": kind,
            "threshold": threshold,
            "message": message,
        }
        if units is not None:
            row["unit"] = units.get(name)
        if known_as.get(name):
            row["aliases"] = sorted(known_as[name])
        results.append(row)
    return results
