"""Human formatting of report values (controller only, pure logic).

Used by the renderers (junit.xml, report.html, the console table) and by the
fleet comparison's messages, so a number reads the same everywhere: the unit
a metric row declares (``unit``, set where the metric is made), a sensible
number of significant digits, durations as ``1.2 s`` / ``3 min 04 s``,
booleans as yes/no, empty lists as a dash. Only a row without a declared unit
(a check record of an older or third-party check) and the run's facts fall
back on what the name implies (:func:`unit_of`).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any, Optional

# metric name pattern -> unit, first match wins (the fallback for rows that declare none)
_UNITS = (
    (re.compile(r"(^|_)ms$", re.I), "ms"),
    (re.compile(r"(^|_)pct$", re.I), "%"),
    (re.compile(r"tflop", re.I), "TFLOP/s"),
    (re.compile(r"gflop", re.I), "GFLOP/s"),
    (re.compile(r"tokens?", re.I), "tokens/s"),
    (re.compile(r"gbps|bandwidth", re.I), "GB/s"),
    (re.compile(r"(^|_)(time|seconds|latency|duration)|step_time", re.I), "s"),
    (re.compile(r"memory_gib", re.I), "GiB"),
)
_DURATION = re.compile(r"^(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)$")


def unit_of(metric: Any) -> str:
    """The unit a metric's name implies ('' when none does): the fallback for a row without a declared unit."""
    name = str(metric or "")
    for pattern, unit in _UNITS:
        if pattern.search(name):
            return unit
    return ""


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number(value: float, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits, no exponent for everyday magnitudes, no trailing zeros."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 100000 else str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    if mag >= 15 or mag < -4:
        return f"{value:.{digits - 1}e}"
    if mag >= digits:
        return f"{value:,.0f}"
    decimals = max(0, digits - 1 - mag)
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def seconds_from(value: Any) -> Optional[float]:
    """Seconds from a number or an ``H:MM:SS[.ffffff]`` text (Ansible's ``delta``), else None."""
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value.strip())
        if m:
            days, h, mi, s = m.groups()
            return int(days or 0) * 86400 + int(h) * 3600 + int(mi) * 60 + float(s)
    return None


def duration(value: Any) -> str:
    """``0.03 s``, ``12.4 s``, ``3 min 04 s``, ``1 h 02 min``; '' for None; other text unchanged."""
    secs = seconds_from(value)
    if secs is None:
        return "" if value is None else str(value)
    if not math.isfinite(secs):
        return number(secs)
    if secs < 60:
        return f"{number(secs, 2 if secs < 1 else 3)} s"
    if secs < 3600:
        return f"{int(secs // 60)} min {int(secs % 60):02d} s"
    return f"{int(secs // 3600)} h {int(secs % 3600 // 60):02d} min"


def value(v: Any, metric: Any = None, unit: Optional[str] = None) -> str:
    """A metric or fact value for people: number with its unit, duration, yes/no, lists joined.

    ``unit``: the unit the row declares ('' for a plain number); None: the unit ``metric``'s name implies."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(value(x) for x in v) if v else "\u2014"
    if isinstance(v, dict):
        return ", ".join(f"{k} {value(x)}" for k, x in v.items()) if v else "\u2014"
    if unit is None:
        unit = unit_of(metric)
    if unit == "s" or (isinstance(v, str) and _DURATION.match(v.strip())):
        return duration(v)
    if is_number(v):
        text = number(v)
        if not unit or not math.isfinite(v):
            return text
        return f"{text}{unit}" if unit == "%" else f"{text} {unit}"
    return str(v)


def percent(fraction: float) -> str:
    """A signed percentage (``-15.0%``, ``+2.1%``) of a fraction."""
    if not math.isfinite(fraction):
        return number(fraction)
    return f"{fraction * 100:+.1f}%"


def parse_time(value: Any) -> Optional[datetime]:
    """An ISO 8601 timestamp of a check record (``Z`` or no zone means UTC), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)
