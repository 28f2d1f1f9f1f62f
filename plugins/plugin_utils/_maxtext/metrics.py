# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse MaxText training logs and derive run metrics (pure Python, >= 3.9).

MaxText reports one line per training step through absl logging, so a prefix
such as ``I1202 10:00:51.000000 139 metric_logger.py:180] `` precedes it::

    completed step: 9, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758,
    total_weights: 196608, loss: 10.374        (one line in the log)

Facts the parser relies on (see docs/formats.md):

* steps start at 0, the last step of an N-step run is N-1;
* the line for step N is written when step N+1 is recorded, the last one at
  shutdown (so a crash can lose the last line, and errors can follow it);
* step 0 includes compilation: it is warm-up and excluded from means;
* ``nan``, ``inf`` and ``-inf`` appear literally (``[\\d.]+`` misses them);
* extra fields (``main_model_loss``, ``mtp_loss``, ...) may follow ``loss``.

Nothing here is anchored at the start of a line.

The metrics' units and names are declared here, where they are made: :data:`UNITS` (each metric of
:func:`maxtext_metrics` and of upstream CVS's that has no name here), :data:`ALIASES` (upstream CVS's names for
metrics of :func:`maxtext_metrics`, accepted in thresholds and shown as aliases only) and :func:`metric_rows`, the
record's metric rows.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ansible_collections.cvs.cluster.plugins.plugin_utils._metrics.thresholds import evaluate_thresholds

__all__ = [
    "ALIASES",
    "DEFAULT_ERROR_PATTERNS",
    "DEFAULT_IGNORE_ERROR_PATTERNS",
    "ECHO_ERRORS",
    "EVAL_RE",
    "JOINING_RE",
    "STEP_RE",
    "UNITS",
    "completion_marker",
    "maxtext_metrics",
    "metric_rows",
    "parse_eval",
    "parse_steps",
]

# A number as Python/NumPy print it, including non-finite values.
_NUM = r"[-+]?(?:nan|inf(?:inity)?|\d+(?:\.\d*)?(?:e[-+]?\d+)?|\.\d+(?:e[-+]?\d+)?)"

#: Start of a step line; the fields after it are parsed as ``key: value`` pairs.
STEP_RE = re.compile(r"completed step:\s*(?P<step>\d+)\s*,(?P<fields>.*)$", re.IGNORECASE)
#: Start of an eval line; the fields after it are ``key=value`` pairs.
EVAL_RE = re.compile(r"eval metrics after step:\s*(?P<step>\d+)\s*,(?P<fields>.*)$", re.IGNORECASE)

_STEP_FIELD_RE = re.compile(r"(?:^|,)\s*(?P<key>[A-Za-z_][\w/.-]*)\s*:\s*(?P<value>" + _NUM + r")(?![\w.])", re.I)
_EVAL_FIELD_RE = re.compile(r"(?:^|,)\s*(?P<key>[A-Za-z_][\w/.-]*)\s*=\s*(?P<value>" + _NUM + r")(?![\w.])", re.I)
_INT_RE = re.compile(r"[-+]?\d+\Z")

# Step-line field name (lower case) -> key in the parsed dict.
_STEP_FIELDS = {
    "seconds": "seconds",
    "tflop/s/device": "tflops_per_device",
    "tokens/s/device": "tokens_per_device",
    "total_weights": "total_weights",
    "loss": "loss",
}

Number = Union[int, float]

_ERROR_SIGNATURES = [
    # MaxText's own stop (abort_on_nan_loss: true); with false the run goes on printing loss: nan and exits 0
    ("nan_loss_abort", r"Aborting training due to NaN loss"),
    # loss: nan, main_model_loss: inf, TFLOP/s/device: -inf, eval loss=nan, jax_debug_nans
    (
        "nan_or_inf",
        r"\b(?:\w*loss|TFLOP/s/device|Tokens/s/device)\s*[:=]\s*[-+]?(?:nan|inf(?:inity)?)\b|FloatingPointError",
    ),
    (
        "out_of_memory",
        r"RESOURCE_EXHAUSTED|\bout of memory\b|Failed to allocate request|std::bad_alloc"
        r"|hipErrorOutOfMemory|HIP_ERROR_OutOfMemory",
    ),
    # a MaxText config key the installed version does not have: ValueError: 'no_such_key' not in 'emb_dim', ...
    ("unknown_config_key", r"ValueError: '[^']+' not in '"),
    # the survivors of a rank that died: their collective lost its peer (Gloo on CPU and in JAX's host collectives)
    ("collective_peer_lost", r"Gloo \w+(?:-\w+)* failed|Connection reset by peer|Connection closed by peer"),
    ("jax_heartbeat", r"missing heartbeats|heartbeat timeout"),
    (
        "jax_coordination",
        r"DEADLINE_EXCEEDED|Barrier timed out|Shutdown barrier has failed|CoordinationServiceError|BarrierError"
        r"|JAX distributed service detected fatal errors",
    ),
    # Slurm ended the step (another task exited non-zero under -K1, a scancel, the job's time limit):
    # slurmstepd-node1: error: *** STEP 7.0 ON node1 CANCELLED AT 2026-12-07T05:00:34 ***
    ("slurm_step_cancelled", r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO [A-Z ]+)? \*\*\*"),
    ("rccl_timeout", r"\b[NR]CCL timeout|collective operation timeout"),
    (
        "rccl_error",
        r"\b[NR]CCL (?:WARN|ERROR)\b|\b[nr]ccl\w*\(.*\) failed|\b[NR]CCL operation \w+.* failed"
        r"|local work queue catastrophic error|\b[nr]ccl(?:System|Internal|Remote|InvalidUsage|Unhandled\w*)Error\b",
    ),
    (
        "gpu_fault",
        r"HW Exception by GPU|GPU Hang|Uncorrectable error|GPU Reset|Memory access fault by GPU|HSA_STATUS_ERROR\w*",
    ),
    (
        "no_gpu",
        r"No visible GPU devices|failed call to hipInit|HIP_ERROR_NoDevice|hipErrorNoDevice"
        r"|librocm reported version is: NOT_FOUND|Unable to initialize backend '(?:rocm|gpu)'",
    ),
    ("xla_runtime_error", r"XlaRuntimeError|JaxRuntimeError"),
    (
        "crash",
        r"Segmentation fault|SIGSEGV|core dumped|\*\*\* SIG[A-Z]+ received at time="
        r"|terminate called after throwing|\bCheck failed:",
    ),
    ("python_fatal", r"Fatal Python error"),
    ("python_exception", r"Traceback \(most recent call last\)|ModuleNotFoundError"),
]

#: Signatures that report another task's failure, not this node's own: a rank that died, or one that never
#: joined, makes every other rank print one of these. They never name the culprit of a run (_maxtext/failure.py).
ECHO_ERRORS = ("collective_peer_lost", "jax_heartbeat", "jax_coordination", "slurm_step_cancelled")

#: The line every MaxText process prints before it joins the JAX distributed system (GPU and CPU backends).
JOINING_RE = re.compile(r"Attempting to initialize the jax distributed system", re.IGNORECASE)

#: Ordered error signatures for ``cvs.cluster.log_poll`` ``error_patterns``
#: (name -> regex, never anchored). Every regex carries a scoped ``(?i:...)``
#: flag, so it matches case-insensitively however the consumer compiles it,
#: alone or joined into one alternation. Specific causes come before generic
#: ones, so ``XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory`` is named
#: ``out_of_memory`` by a first-match scanner, not ``xla_runtime_error``.
DEFAULT_ERROR_PATTERNS: Dict[str, str] = OrderedDict((name, f"(?i:{rx})") for name, rx in _ERROR_SIGNATURES)

#: Known-benign lines that match a default error pattern; pass as log_poll's
#: ``ignore_error_patterns``. RCCL prints these as ``NCCL WARN`` on healthy
#: nodes with an untuned kernel; the validation of kernel settings belongs to
#: host checks, not to the training run.
DEFAULT_IGNORE_ERROR_PATTERNS: Dict[str, str] = OrderedDict(
    [
        # MaxText >= 0.2 at start-up, for each optional cloud integration it lacks:
        # [NO-OP] mldiagnostics: dependency missing; using stub. (ModuleNotFoundError)
        ("maxtext_optional_stub", r"(?i:\[NO-OP\] [^\n]*dependency missing; using stubs?\b)"),
        ("rccl_numa_balancing", r"(?i:NCCL WARN NUMA auto balancing enabled)"),
        ("rccl_iommu_pt", r"(?i:NCCL WARN Missing \"?iommu=pt\"? from kernel command line)"),
    ]
)


def _to_number(text: str) -> Number:
    """Convert a number as printed in the log; integers stay ``int``."""
    if _INT_RE.match(text):
        return int(text)
    return float(text)


def _lines(text: Union[str, bytes, Iterable[str], None]) -> List[str]:
    if text is None:
        return []
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if isinstance(text, str):
        return text.splitlines()
    lines: List[str] = []
    for item in text:
        if isinstance(item, bytes):
            item = item.decode("utf-8", errors="replace")
        lines.extend(str(item).splitlines())
    return lines


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_steps(text: Union[str, bytes, Iterable[str], None]) -> List[Dict[str, Any]]:
    """Return every MaxText step line in ``text`` in log order.

    ``text`` is the log (str or bytes) or an iterable of lines. Each entry is::

        {"step": int, "seconds": float|None, "tflops_per_device": float|None,
         "tokens_per_device": float|None, "total_weights": int|float|None,
         "loss": float|None, "extra": {"mtp_loss": float, ...}, "lineno": int}

    ``lineno`` is 1-based. Non-finite values (``nan``, ``inf``, ``-inf``) are
    kept as floats. A field missing from the line (older MaxText) is None.
    """
    steps: List[Dict[str, Any]] = []
    for lineno, line in enumerate(_lines(text), start=1):
        match = STEP_RE.search(line)
        if not match:
            continue
        entry: Dict[str, Any] = {
            "step": int(match.group("step")),
            "seconds": None,
            "tflops_per_device": None,
            "tokens_per_device": None,
            "total_weights": None,
            "loss": None,
            "extra": {},
            "lineno": lineno,
        }
        found = False
        for field in _STEP_FIELD_RE.finditer(match.group("fields")):
            key = field.group("key")
            value = _to_number(field.group("value"))
            target = _STEP_FIELDS.get(key.lower())
            if target is None:
                entry["extra"][key] = value
                continue
            found = True
            if target != "total_weights" and isinstance(value, int):
                value = float(value)
            entry[target] = value
        if found:
            steps.append(entry)
    return steps


def parse_eval(text: Union[str, bytes, Iterable[str], None]) -> List[Dict[str, Any]]:
    """Return every ``eval metrics after step: N, loss=..., total_weights=...`` line.

    Each entry is ``{"step": int, "loss": float|None, "total_weights": int|float|None,
    "extra": {...}, "lineno": int}``; other ``key=value`` fields go to ``extra``.
    """
    evals: List[Dict[str, Any]] = []
    for lineno, line in enumerate(_lines(text), start=1):
        match = EVAL_RE.search(line)
        if not match:
            continue
        entry: Dict[str, Any] = {
            "step": int(match.group("step")),
            "loss": None,
            "total_weights": None,
            "extra": {},
            "lineno": lineno,
        }
        for field in _EVAL_FIELD_RE.finditer(match.group("fields")):
            key = field.group("key")
            value = _to_number(field.group("value"))
            if key.lower() == "loss":
                entry["loss"] = float(value)
            elif key.lower() == "total_weights":
                entry["total_weights"] = value
            else:
                entry["extra"][key] = value
        evals.append(entry)
    return evals


def _mean(values: List[float]) -> Optional[float]:
    return math.fsum(values) / len(values) if values else None


def _percentile(values: List[float], pct: float) -> Optional[float]:
    """Percentile with linear interpolation between closest ranks (NumPy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if isinstance(value, float) and value != number:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return number


def maxtext_metrics(
    text: Union[str, bytes, Iterable[str], None],
    warmup_steps: int = 1,
    window: Optional[int] = 10,
) -> Dict[str, Any]:
    """Summarise a MaxText log.

    Steps whose number is below ``warmup_steps`` are warm-up (step 0 carries
    the compile time) and never enter a mean or percentile. ``window`` is the
    number of last non-warm-up step lines that ``tflops_per_device`` and
    ``tokens_per_device`` average over (None: all of them). Non-finite values
    are left out of means and percentiles and reported in ``nan_steps``.

    Returns::

        {"steps": int,                 # number of step lines
         "last_step": int|None,        # step number of the last step line
         "tflops_per_device": float|None, "tokens_per_device": float|None,
         "step_time_mean": float|None, "step_time_p50": float|None,
         "step_time_p95": float|None,  # linear interpolation
         "final_loss": float|None,     # loss of the last step line (may be nan)
         "loss_decreased": bool|None,  # last loss < first non-warm-up loss
         "nan_steps": [int, ...],      # non-finite loss/TFLOP/s/tokens, sorted
         "measured_steps": int,        # non-warm-up step lines
         "eval_steps": int, "final_eval_loss": float|None}

    ``loss_decreased`` is False as soon as any step's loss is non-finite, and
    None with fewer than two non-warm-up losses.
    """
    warmup = _check_int("warmup_steps", warmup_steps, 0)
    win = None if window is None else _check_int("window", window, 1)

    steps = parse_steps(text)
    evals = parse_eval(text)
    measured = [s for s in steps if s["step"] >= warmup]
    recent = measured if win is None else measured[max(0, len(measured) - win) :]

    def finite(entries: List[Dict[str, Any]], key: str) -> List[float]:
        return [float(e[key]) for e in entries if _is_finite(e[key])]

    nan_steps = sorted(
        {
            s["step"]
            for s in steps
            if any(
                isinstance(s[key], float) and not math.isfinite(s[key])
                for key in ("loss", "tflops_per_device", "tokens_per_device")
            )
        }
    )

    seconds = finite(measured, "seconds")
    losses = [s["loss"] for s in measured if s["loss"] is not None]
    any_bad_loss = any(isinstance(s["loss"], float) and not math.isfinite(s["loss"]) for s in steps)
    if not measured:
        loss_decreased: Optional[bool] = None
    elif any_bad_loss:
        loss_decreased = False
    elif len(losses) < 2:
        loss_decreased = None
    else:
        loss_decreased = losses[-1] < losses[0]

    final_loss = None
    for entry in reversed(steps):
        if entry["loss"] is not None:
            final_loss = float(entry["loss"])
            break

    final_eval_loss = None
    for entry in reversed(evals):
        if entry["loss"] is not None:
            final_eval_loss = entry["loss"]
            break

    return {
        "steps": len(steps),
        "last_step": steps[-1]["step"] if steps else None,
        "tflops_per_device": _mean(finite(recent, "tflops_per_device")),
        "tokens_per_device": _mean(finite(recent, "tokens_per_device")),
        "step_time_mean": _mean(seconds),
        "step_time_p50": _percentile(seconds, 50),
        "step_time_p95": _percentile(seconds, 95),
        "final_loss": final_loss,
        "loss_decreased": loss_decreased,
        "nan_steps": nan_steps,
        "measured_steps": len(measured),
        "eval_steps": len(evals),
        "final_eval_loss": final_eval_loss,
    }


def completion_marker(steps: int) -> str:
    """Regex matching the line of the last step of a ``steps``-step run.

    Steps count from 0, so the marker is ``completed step:\\s*<steps-1>,``.
    """
    count = _check_int("steps", steps, 1)
    return rf"completed step:\s*{count - 1},"


#: The unit of every metric of a MaxText record ('' for counts, losses and yes/no): those of
#: :func:`maxtext_metrics` and upstream CVS's metrics that have no name here (_maxtext/cvs_thresholds.py).
UNITS: Dict[str, str] = {
    "steps": "",
    "last_step": "",
    "tflops_per_device": "TFLOP/s",
    "tokens_per_device": "tokens/s",
    "step_time_mean": "s",
    "step_time_p50": "s",
    "step_time_p95": "s",
    "final_loss": "",
    "loss_decreased": "",
    "nan_steps": "",
    "measured_steps": "",
    "eval_steps": "",
    "final_eval_loss": "",
    "tokens_per_sec_total": "tokens/s",
    "scaling_efficiency_pct": "%",
    "steps_to_target": "",
    "time_to_target_seconds": "s",
}

#: Upstream CVS's names of metrics that have one here: ``{upstream name: (name here, factor)}``, the upstream
#: value being ``factor`` x ours (its step times are in ms). A threshold may use either name; the record has one
#: row per metric, under the name here, listing the upstream names as ``aliases``.
ALIASES: Dict[str, Tuple[str, float]] = {
    "tflops_per_sec_per_gpu": ("tflops_per_device", 1.0),
    "tokens_per_sec_per_gpu": ("tokens_per_device", 1.0),
    "step_time_seconds": ("step_time_mean", 1.0),
    "step_time_mean_ms": ("step_time_mean", 1000.0),
    "step_time_p50_ms": ("step_time_p50", 1000.0),
    "step_time_p95_ms": ("step_time_p95", 1000.0),
    "eval_loss": ("final_eval_loss", 1.0),
}


def metric_rows(summary: Mapping[str, Any], thresholds: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The record's metric rows: one per metric of ``summary`` (upstream's names left out, they are aliases),
    each with its unit, checked against ``thresholds`` (keyed by either name); a metric without a value and without
    a threshold has no row; the rows in the order of :data:`UNITS`. Raises ValueError for a bad threshold, or two
    thresholds for one metric."""
    order = {name: index for index, name in enumerate(UNITS)}
    ordered = {k: summary[k] for k in sorted(summary, key=lambda k: order.get(str(k), len(order)))}
    return evaluate_thresholds(ordered, thresholds, units=UNITS, aliases=ALIASES, drop_missing=True)
