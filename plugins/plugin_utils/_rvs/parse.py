# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse ROCm Validation Suite (RVS) console output into result records.

Pure Python (>= 3.9), no Ansible import; runs on the controller (filters rvs_parse and rvs_judge).

RVS's exit status does not reflect test failures, and its output format
changed between releases (GST ``met: TRUE`` vs the older ``pass: TRUE``), so
the verdict is taken from the output, line by line, case-insensitively.

``parse_rvs_output`` turns the text into records, one per result line::

    {"action": str | None, "module": str | None, "gpu": int | None,
     "passed": True | False | None, "metrics": {...}, "line": str,
     "lineno": int, "kind": str, "reason": str | None}

``passed`` is None for lines that only carry measurements (bandwidth,
BabelStream tables, package totals, GPU properties). ``kind`` is one of
``result`` (a verdict or metric line of a module), ``summary`` (a row of the
``ROCm Validation Suite (RVS) Summary`` box), ``package`` (rcqt package
counts), ``error`` (``[ERROR ]``, ``RVS-ERROR``, ``FAIL``, ``ERROR:`` …),
``pattern`` (a caller's extra fail pattern) and ``missing`` (a GPU that
started a gst/iet/tst action but never printed its verdict: the output ended
early, e.g. a hang or a crash).

A line outside the summary box is tried against ``_RULES``, one row per line
kind (a compiled regex and its handler), in order; the first row whose regex
matches decides the line. The verdict over the records is in _rvs/judge.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Optional

__all__ = [
    "KNOWN_MODULES",
    "compile_fail_patterns",
    "parse_rvs_output",
    "rvs_text",
]

#: RVS modules (``module:`` key of an action).
KNOWN_MODULES = (
    "babel",
    "gm",
    "gpup",
    "gst",
    "iet",
    "mem",
    "pbqt",
    "pebb",
    "peqt",
    "perf",
    "pesm",
    "pulse",
    "rcqt",
    "smqt",
    "tst",
)

# Modules whose per-GPU verdict line is well known: a GPU that printed
# progress for such an action but no verdict is reported as a failure.
_VERDICT_MODULES = frozenset(("gst", "iet", "tst"))

_TRUE = frozenset(("true", "pass", "passed", "yes"))

_F = re.IGNORECASE

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# colour codes whose ESC byte was lost on the way (seen in captured logs)
_ORPHAN_COLOUR = re.compile(r"\[[0-9;]*m")
_PREFIX = re.compile(r"^\s*(?:\[\s*(RESULT|ERROR|INFO|DEBUG|TRACE|NONE)\s*\]\s*)?(?:\[\s*\d+\.?\d*\s*\]\s*)?", _F)
_ACTION = re.compile(r"^\[(?!\s*(?:GPU|CPU)\s*::)([^\[\]]*)\]\s*", _F)
_GPU_ID = re.compile(r"\[\s*GPU\s*::\s*(\d+)\s*\]", _F)
_GPU_FULL = re.compile(
    r"\[\s*GPU\s*::\s*(\d+)\s*-\s*(\d+)\s*-\s*([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])\s*\]", _F
)
_CPU = re.compile(r"\[\s*CPU\s*::\s*(\d+)\s*\]", _F)
_TRANSFER = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*\]")

_BOX_TITLE = re.compile(r"ROCm Validation Suite \(RVS\) Summary", _F)
_BOX_HEADER = re.compile(r"\|\s*Action Name\s*\|\s*Module\s*\|\s*Result\s*\|", _F)
_BOX_ROW = re.compile(r"^\s*\|\s*(.+?)\s*\|\s*([A-Za-z0-9_.-]+)\s*\|\s*([A-Za-z/ ]+?)\s*\|\s*$")
_BOX_RESULTS = {
    "pass": True,
    "passed": True,
    "fail": False,
    "failed": False,
    "error": False,
    "timeout": False,
    "skip": None,
    "skipped": None,
    "n/a": None,
    "na": None,
}

_RVS_ERROR = re.compile(r"RVS-ERROR\s*(?:\[([^\]]*)\])?\s*(?:\[([^\]]*)\])?\s*(.*)$", _F)
_VERDICT = re.compile(r"\b(?:pass|met)\s*:\s*(true|false)\b", _F)
_MODULE_GPU = re.compile(r"^\s*([a-z]+)\s+(\d+)\b", _F)
_GST_OLD_KV = re.compile(r"\b(flops_per_op|bytes_copied_per_op|try_ops_per_sec)\s*:\s*([\d.]+)(?:\s*x\s*1e(\d+))?", _F)
_BANDWIDTH = r"(?:([\d.]+)\s*GBps|\(\s*not measured\s*\))(\s*\(\*\))?(?:\s*duration\s*:\s*([\d.]+)\s*secs?)?"
_PACKAGE_KEYS = {
    "total packages validated": ("total_packages", False),
    "installed packages": ("installed_packages", False),
    "missing packages": ("missing_packages", True),
    "version mismatch packages": ("version_mismatch_packages", True),
}

# Failure markers for lines no structured rule explains (docs/formats.md list,
# plus a few crash / environment markers).
_FAIL_MARKERS = (
    ("met: FALSE", r"\bmet\s*:\s*false\b"),
    ("pass: FALSE", r"\bpass\s*:\s*false\b"),
    ("[ERROR]", r"\[ERROR\s*\]"),
    ("RVS-ERROR", r"RVS-ERROR"),
    ("peqt false", r"\bpeqt\s+false\b"),
    ("ERROR:", r"\bERROR\s*:"),
    ("FAIL", r"\bFAIL"),
    ("no supported GPUs", r"No supported GPUs available"),
    ("no test level support", r"No test levels support"),
    ("not installed", r"\bnot installed\b"),
    ("segmentation fault", r"Segmentation fault|SIGSEGV|core dumped"),
    ("uncaught exception", r"terminate called after throwing"),
)


# --------------------------------------------------------------------------
# helpers


def _num(value: str) -> float:
    return float(value)


def _bool(value: str) -> bool:
    return value.strip().lower() in _TRUE


def _clean(raw: str) -> str:
    """Strip ANSI colours; keep the last carriage-return segment (RVS redraws rows with ``\\r``)."""
    line = _ANSI.sub("", raw)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line.rstrip()


def rvs_text(text: Any) -> str:
    """RVS output as one string: text, bytes (UTF-8) or a list of lines; None is empty. TypeError otherwise."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if isinstance(text, str):
        return text
    if isinstance(text, (list, tuple)):
        return "\n".join(rvs_text(t) for t in text)
    raise TypeError(f"RVS output must be text, got {type(text).__name__}")


def _module_from_action(action: Optional[str]) -> Optional[str]:
    if not action:
        return None
    for token in re.split(r"[-_\s.:]+", action.lower()):
        if token in KNOWN_MODULES:
            return token
    return None


def compile_fail_patterns(patterns: Any) -> list[tuple[str, re.Pattern]]:
    """Compile extra fail patterns case-insensitively.

    patterns: a list of regular expressions, or a dict ``{name: regex}`` (as
    log_poll's error_patterns). Returns ``[(label, compiled)]`` where label is
    the name, or the expression itself for a list. Raises ValueError naming
    the pattern and the regex error.
    """
    if patterns is None:
        return []
    if isinstance(patterns, (str, bytes)):
        patterns = [patterns]
    if isinstance(patterns, Mapping):
        items = [(str(name), regex, f"{name!r} ({regex!r})") for name, regex in patterns.items()]
    else:
        items = [(None, regex, None) for regex in patterns]
    compiled = []
    for name, regex, label in items:
        if isinstance(regex, bytes):
            regex = regex.decode("utf-8", errors="replace")
        shown = label or repr(regex)
        if not isinstance(regex, str):
            raise ValueError(f"invalid fail pattern {shown}: expected a string, got {type(regex).__name__}")
        if not regex:
            raise ValueError(f"invalid fail pattern {shown}: an empty pattern would match every line")
        try:
            compiled.append((name if name is not None else regex, re.compile(regex, _F)))
        except re.error as exc:
            raise ValueError(f"invalid fail pattern {shown}: {exc}") from None
    return compiled


class _State:
    """Context carried from line to line."""

    def __init__(self) -> None:
        self.action: Optional[str] = None
        self.module: Optional[str] = None
        self.modules: dict[str, str] = {}
        self.in_box = False
        self.box_rows = False
        # (action, gpu) -> (module, line, lineno) for gst/iet/tst progress lines
        self.progress: dict[tuple[Optional[str], int], tuple[str, str, int]] = {}
        self.answered: set[tuple[Optional[str], int]] = set()

    def module_for(self, action: Optional[str], token: Optional[str] = None) -> Optional[str]:
        if token and token.lower() in KNOWN_MODULES:
            return token.lower()
        if action is not None and action in self.modules:
            return self.modules[action]
        if action is None and self.module:
            return self.module
        return _module_from_action(action) or (token.lower() if token else None)


def _rec(
    kind: str,
    action: Optional[str],
    module: Optional[str],
    gpu: Optional[int],
    passed: Optional[bool],
    metrics: Optional[dict],
    line: str,
    lineno: int,
    reason: Optional[str] = None,
) -> dict:
    return {
        "action": action,
        "module": module,
        "gpu": gpu,
        "passed": passed,
        "metrics": metrics or {},
        "line": line,
        "lineno": lineno,
        "kind": kind,
        "reason": reason,
    }


class _Line:
    """One cleaned output line split into its parts: ``[LEVEL] [time] [action] body``."""

    def __init__(self, line: str, lineno: int, state: _State) -> None:
        self.line, self.lineno, self.state = line, lineno, state
        prefix = _PREFIX.match(line)  # every part is optional: it always matches
        self.level = (prefix.group(1) or "").upper()
        self.rest = line[prefix.end() :]
        # INFO / DEBUG lines repeat interval measurements; only these levels carry final metrics
        self.metric_level = self.level in ("", "RESULT", "NONE")
        am = _ACTION.match(self.rest)
        self.own_action: Optional[str] = (am.group(1).strip() or None) if am else None
        self.body = self.rest[am.end() :] if am else self.rest
        gm = _GPU_ID.search(self.body)
        self.gpu: Optional[int] = int(gm.group(1)) if gm else None

    @property
    def action(self) -> Optional[str]:
        """The line's own ``[action]``, else the last ``Action name`` seen (read when asked: that can change)."""
        return self.own_action if self.own_action is not None else self.state.action

    def record(
        self,
        module: Optional[str],
        gpu: Optional[int],
        passed: Optional[bool],
        metrics: Optional[dict] = None,
        reason: Optional[str] = None,
        kind: str = "result",
    ) -> dict:
        return _rec(kind, self.action, module, gpu, passed, metrics, self.line, self.lineno, reason)


# --------------------------------------------------------------------------
# summary box


def _parse_box(line: str, state: _State, lineno: int) -> tuple[bool, Optional[dict]]:
    """Summary box rows. Returns (consumed, record)."""
    if _BOX_TITLE.search(line):
        state.in_box, state.box_rows = True, False
        return True, None
    if not state.in_box:
        return False, None
    stripped = line.strip()
    if _BOX_HEADER.search(stripped):
        state.box_rows = True
        return True, None
    if stripped.startswith("+"):
        return True, None
    if stripped.startswith("|"):
        if state.box_rows:
            m = _BOX_ROW.match(_ORPHAN_COLOUR.sub("", stripped))
            if m and m.group(3).strip().lower() in _BOX_RESULTS:
                action, module, result = m.group(1).strip(), m.group(2).lower(), m.group(3).strip()
                passed = _BOX_RESULTS[result.lower()]
                reason = None if passed is not False else f"RVS summary: action '{action}' ({module}) {result.upper()}"
                return True, _rec("summary", action, module, None, passed, {}, line, lineno, reason)
        return True, None
    if not _RVS_ERROR.search(stripped):
        # stderr lines (RVS-ERROR) can land inside the box when both streams are captured together
        state.in_box = state.box_rows = False
    return False, None


# --------------------------------------------------------------------------
# line rules: handlers, then the table. A handler returns the line's record,
# or None when the line is its kind but yields no record (context, interval).


def _action_name(m: re.Match, ln: _Line) -> None:
    ln.state.action, ln.state.module = m.group(1).strip(), None


def _module_name(m: re.Match, ln: _Line) -> None:
    state = ln.state
    state.module = m.group(1).lower()
    if state.action is not None:
        state.modules[state.action] = state.module


def _rvs_error(m: re.Match, ln: _Line) -> dict:
    module = (m.group(1) or "").strip().lower() or None
    action = (m.group(2) or "").strip() or None
    if module is None or module not in KNOWN_MODULES:
        module = ln.state.module_for(action, module)
    message = m.group(3).strip() or "RVS-ERROR"
    return _rec("error", action, module, None, False, {}, ln.line, ln.lineno, f"RVS-ERROR: {message}")


def _error_level(_m: re.Match, ln: _Line) -> dict:
    return ln.record(ln.state.module_for(ln.action), ln.gpu, False, reason=f"[ERROR] {ln.body.strip()}", kind="error")


def _gst(m: re.Match, ln: _Line) -> dict:
    gpu = int(m.group(1))
    passed = _bool(m.group(4))
    metrics = {"gflops": _num(m.group(2)), "target_gflops": _num(m.group(3))}
    reason = None if passed else f"GPU {gpu}: GFLOPS {m.group(2)} below target {m.group(3)} (met: FALSE)"
    return ln.record("gst", gpu, passed, metrics, reason)


def _gst_before_2024(m: re.Match, ln: _Line) -> dict:
    gpu = int(m.group(1))
    metrics = {"gflops": _num(m.group(2))}
    for key, value, exp in _GST_OLD_KV.findall(ln.body):
        metrics[key.lower()] = _num(value) * (10 ** int(exp) if exp else 1)
    vm = _VERDICT.search(ln.body)
    passed = _bool(vm.group(1)) if vm else None
    reason = f"GPU {gpu}: Gflop {m.group(2)} pass: FALSE" if passed is False else None
    return ln.record("gst", gpu, passed, metrics, reason)


def _peqt(m: re.Match, ln: _Line) -> dict:
    passed = _bool(m.group(1))
    reason = None if passed else "peqt false: PCIe capability check failed"
    return ln.record("peqt", None, passed, reason=reason)


def _mem_verdict(m: re.Match, ln: _Line) -> dict:
    passed = m.group(2).lower() == "pass"
    reason = None if passed else f"mem Test {m.group(1)} FAIL"
    return ln.record("mem", ln.gpu, passed, {"test": int(m.group(1))}, reason)


def _mem_errors(m: re.Match, ln: _Line) -> dict:
    errors = int(m.group(1))
    reason = f"mem: {errors} memory errors" if errors else None
    return ln.record("mem", ln.gpu, errors == 0, {"errors": errors}, reason)


def _mem_bandwidth(m: re.Match, ln: _Line) -> dict:
    metrics = {"test": int(m.group(1)), "elapsed_ms": _num(m.group(2)), "bandwidth_gbps": _num(m.group(3))}
    return ln.record("mem", ln.gpu, None, metrics)


def _packages(m: re.Match, ln: _Line) -> dict:
    key, judged = _PACKAGE_KEYS[re.sub(r"\s+", " ", m.group(1).lower())]
    count = int(m.group(2))
    passed = (count == 0) if judged else None
    reason = f"{m.group(1)}: {count}" if passed is False else None
    # printed without prefix or action: they belong to the last "Action name"
    return _rec("package", ln.state.action, "rcqt", None, passed, {key: count}, ln.line, ln.lineno, reason)


def _bandwidth(m: re.Match, first_group: int) -> tuple[dict, Optional[str]]:
    """Metrics of a pebb/pbqt bandwidth tail ``<n> GBps | (not measured) [(*)] [duration: <s> secs]``.

    Returns (metrics, failure reason or None).
    """
    value, duration = m.group(first_group), m.group(first_group + 2)
    metrics: dict[str, Any] = {}
    if value is None:
        metrics["bandwidth_gbps"] = None
        reason: Optional[str] = "bandwidth not measured"
    else:
        metrics["bandwidth_gbps"] = _num(value)
        reason = None
    if duration is not None:
        metrics["duration_s"] = _num(duration)
    return metrics, reason


def _interval(m: re.Match, first_group: int, ln: _Line) -> bool:
    """A pebb/pbqt line that is not a final result: INFO level or a ``(*)`` interval measurement."""
    return not ln.metric_level or bool(m.group(first_group + 1))


def _transfer(metrics: dict, ln: _Line) -> None:
    tm = _TRANSFER.search(ln.body)
    if tm:
        metrics["transfer"] = int(tm.group(1))


def _peer_pair(metrics: dict, ln: _Line, nodes: bool = False) -> Optional[int]:
    """The source GPU of a GPU-to-GPU line; the peer (and with nodes both node ids) go into metrics."""
    gpus = _GPU_FULL.findall(ln.body)
    if len(gpus) > 1:
        metrics["peer_gpu"] = int(gpus[1][1])
        if nodes:
            metrics["gpu_node"], metrics["peer_gpu_node"] = int(gpus[0][0]), int(gpus[1][0])
    return int(gpus[0][1]) if gpus else ln.gpu


def _pbqt_p2p(m: re.Match, ln: _Line) -> Optional[dict]:
    if _interval(m, 2, ln):
        return None
    metrics, reason = _bandwidth(m, 2)
    metrics["bidirectional"] = _bool(m.group(1))
    src = _peer_pair(metrics, ln, nodes=True)
    _transfer(metrics, ln)
    if reason:
        reason = f"GPU {src} -> {metrics.get('peer_gpu')}: {reason}"
    return ln.record("pbqt", src, False if reason else None, metrics, reason)


def _pebb(m: re.Match, ln: _Line) -> Optional[dict]:
    if _interval(m, 3, ln):
        return None
    gpu = ln.gpu
    metrics, reason = _bandwidth(m, 3)
    metrics["h2d"], metrics["d2h"] = _bool(m.group(1)), _bool(m.group(2))
    cm = _CPU.search(ln.body)
    if cm:
        metrics["cpu_node"] = int(cm.group(1))
    full = _GPU_FULL.search(ln.body)
    if full:
        gpu = int(full.group(2))
        metrics["gpu_node"] = int(full.group(1))
        metrics["bdf"] = full.group(3)
    _transfer(metrics, ln)
    if reason:
        reason = f"GPU {gpu}: {reason}"
    module = "pebb" if "pcie-bandwidth" in ln.body.lower() else ln.state.module_for(ln.action) or "pebb"
    return ln.record(module, gpu, False if reason else None, metrics, reason)


def _a2a_all(m: re.Match, ln: _Line) -> dict:
    metrics = {"gpus": int(m.group(1)), "transfers": int(m.group(2)), "aggregate_bandwidth_gbps": _num(m.group(3))}
    return ln.record("pbqt", None, None, metrics)


def _a2a_gpu(m: re.Match, ln: _Line) -> dict:
    full = _GPU_FULL.search(ln.body)
    gpu = int(full.group(2)) if full else ln.gpu
    return ln.record("pbqt", gpu, None, {"aggregate_peer_bandwidth_gbps": _num(m.group(1))})


def _a2a_p2p(m: re.Match, ln: _Line) -> dict:
    metrics = {"bandwidth_gbps": _num(m.group(1))}
    src = _peer_pair(metrics, ln)
    return ln.record("pbqt", src, None, metrics)


def _babel_row(m: re.Match, ln: _Line) -> dict:
    fn = m.group(2).lower()
    metrics = {
        f"{fn}_mbytes_per_sec": _num(m.group(3)),
        f"{fn}_max_mbytes_per_sec": _num(m.group(4)),
        f"{fn}_min_mbytes_per_sec": _num(m.group(5)),
        f"{fn}_avg_mbytes_per_sec": _num(m.group(6)),
    }
    # the table has no prefix nor action bracket: the last "Action name" is its action
    return _rec("result", ln.state.action, "babel", int(m.group(1)), None, metrics, ln.line, ln.lineno)


def _verdict(m: re.Match, ln: _Line) -> dict:
    passed = _bool(m.group(1))
    gpu, token = ln.gpu, None
    mg = _MODULE_GPU.match(ln.body)
    if mg and mg.group(1).lower() in KNOWN_MODULES:
        token = mg.group(1).lower()
        if gpu is None:
            gpu = int(mg.group(2))
    module = ln.state.module_for(ln.action, token)
    where = f"GPU {gpu}" if gpu is not None else (module or "RVS")
    reason = None if passed else f"{where}: {m.group(0)}"
    return ln.record(module, gpu, passed, {}, reason)


def _gm(m: re.Match, ln: _Line) -> dict:
    return ln.record("gm", int(m.group(1)), None, {f"{m.group(2).lower()}_{m.group(3).lower()}": _num(m.group(4))})


def _pesm(m: re.Match, ln: _Line) -> dict:
    return ln.record("pesm", int(m.group(1)), None, {"pcie_speed_change": _bool(m.group(2))})


def _gpup(m: re.Match, ln: _Line) -> dict:
    metrics: dict[str, Any] = {m.group(3).lower(): _num(m.group(4))}
    if m.group(2) is not None:
        metrics["io_link"] = int(m.group(2))
    return ln.record("gpup", int(m.group(1)), None, metrics)


def _fail_marker(label: str) -> Callable[[re.Match, _Line], dict]:
    def handler(_m: re.Match, ln: _Line) -> dict:
        reason = f"failure marker {label!r}: {ln.body.strip()}"
        return ln.record(ln.state.module_for(ln.action), ln.gpu, False, {}, reason, kind="error")

    return handler


class _Rule(NamedTuple):
    """One line kind: ``find`` (a compiled regex's match or search) applied to the part of the line named by
    ``part`` (``rest``: after level and time, ``body``: after the action too, ``level``); ``results_only``
    skips the rule on INFO/DEBUG/TRACE/ERROR lines."""

    part: str
    find: Callable[[str], Optional[re.Match]]
    handle: Callable[[re.Match, _Line], Optional[dict]]
    results_only: bool = False


_RULES: tuple[_Rule, ...] = (
    # context lines
    _Rule("rest", re.compile(r"^Action name\s*:\s*(.+?)\s*$", _F).match, _action_name),
    _Rule("rest", re.compile(r"^Module name\s*:\s*(\S+)", _F).match, _module_name),
    # errors
    _Rule("rest", _RVS_ERROR.search, _rvs_error),
    _Rule("level", re.compile(r"ERROR\Z").match, _error_level),
    # gst: current format, then the pre-2024 one
    _Rule(
        "body",
        re.compile(
            r"\[\s*GPU\s*::\s*(\d+)\s*\]\s*GFLOPS\s*:?\s*([\d.]+)\s+Target\s+GFLOPS\s*:\s*([\d.]+)\s+"
            r"met\s*:\s*(true|false)\b",
            _F,
        ).search,
        _gst,
    ),
    _Rule("body", re.compile(r"\bgst\s+(\d+)\s+Gflop\s*:\s*([\d.]+)", _F).search, _gst_before_2024),
    # peqt: one verdict per action
    _Rule("body", re.compile(r"\bpeqt\s+(true|false)\s*$", _F).search, _peqt),
    # mem
    _Rule("body", re.compile(r"\bmem\s+Test\s+(\d+)\s*:\s*(pass|fail)\w*", _F).search, _mem_verdict),
    _Rule("body", re.compile(r"\bmem\s+Number of errors\s*:\s*(\d+)", _F).search, _mem_errors),
    _Rule(
        "body",
        re.compile(
            r"\bmem\s+Test\s+(\d+)\s*:\s*elapsedtime\s*=\s*([\d.]+)\s+bandwidth\s*=\s*([\d.]+)\s*GB/?s", _F
        ).search,
        _mem_bandwidth,
        results_only=True,
    ),
    # rcqt package counts
    _Rule(
        "rest",
        re.compile(
            r"^\s*(Total packages validated|Installed packages|Missing packages|Version mismatch packages)"
            r"\s*:\s*<?\s*(\d+)\s*>?\s*$",
            _F,
        ).match,
        _packages,
    ),
    # pbqt / pebb bandwidth (final lines are RESULT, interval lines INFO)
    _Rule(
        "body",
        re.compile(r"\bp2p-bandwidth\b.*?bidirectional\s*:\s*(true|false)\s+" + _BANDWIDTH, _F).search,
        _pbqt_p2p,
    ),
    _Rule("body", re.compile(r"h2d\s*::\s*(true|false)\s+d2h\s*::\s*(true|false)\s+" + _BANDWIDTH, _F).search, _pebb),
    _Rule(
        "body",
        re.compile(
            r"\ba2a-bandwidth\s*\[\s*(\d+)\s*GPUs\s*\]\s*\[\s*(\d+)\s*p2p transfers\s*\]"
            r"\s*Aggregate bandwidth\s*:\s*([\d.]+)\s*GBps",
            _F,
        ).search,
        _a2a_all,
        results_only=True,
    ),
    _Rule(
        "body",
        re.compile(r"\ba2a-gpu-bandwidth\b.*Aggregate peer bandwidth\s*:\s*([\d.]+)\s*GBps", _F).search,
        _a2a_gpu,
        results_only=True,
    ),
    _Rule("body", re.compile(r"\ba2a-p2p-bandwidth\b.*\]\s*([\d.]+)\s*GBps", _F).search, _a2a_p2p, results_only=True),
    # BabelStream table rows
    _Rule(
        "rest",
        re.compile(
            r"^\s*(\d+)\s+(read|write|copy|mul|add|triad|dot|nstream)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$",
            _F,
        ).match,
        _babel_row,
    ),
    # generic verdict: iet, tst, smqt, babel, older iet/tst formats …
    _Rule("body", _VERDICT.search, _verdict),
    # metric-only lines of other modules
    _Rule(
        "body",
        re.compile(r"\bgm\s+(\d+)\s+(\w+)\s+(violations|average)\s+(-?[\d.]+)", _F).search,
        _gm,
        results_only=True,
    ),
    _Rule(
        "body", re.compile(r"\bGPU\s+(\d+)\s+PCIe speed change\s+(true|false)\b", _F).search, _pesm, results_only=True
    ),
    _Rule(
        "body",
        re.compile(r"\bgpup\s+(\d+)\s+(?:(\d+)\s+)?([a-z_]\w*)\s+(-?\d+(?:\.\d+)?)\s*$", _F).search,
        _gpup,
        results_only=True,
    ),
    # anything else that says it failed
    *(_Rule("body", re.compile(regex, _F).search, _fail_marker(label)) for label, regex in _FAIL_MARKERS),
)


def _parse_line(ln: _Line) -> Optional[dict]:
    consumed, record = _parse_box(ln.line, ln.state, ln.lineno)
    if consumed:
        return record
    for rule in _RULES:
        if rule.results_only and not ln.metric_level:
            continue
        m = rule.find(getattr(ln, rule.part))
        if m:
            return rule.handle(m, ln)
    # progress of a verdict module: remember it to spot GPUs that never answer
    if ln.gpu is not None:
        module = ln.state.module_for(ln.action)
        if module in _VERDICT_MODULES:
            ln.state.progress.setdefault((ln.action, ln.gpu), (module, ln.line, ln.lineno))
    return None


# --------------------------------------------------------------------------
# public API


def parse_rvs_output(text: Any, extra_fail_patterns: Any = None) -> list[dict]:
    """Parse RVS console output (stdout and/or stderr) into result records.

    extra_fail_patterns: regular expressions (case-insensitive; a list, or a
    dict name -> regex) that make any line they match a failing record. An
    invalid pattern raises ValueError naming the pattern and the regex error.
    """
    patterns = compile_fail_patterns(extra_fail_patterns)
    text = rvs_text(text)
    state = _State()
    records: list[dict] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = _clean(raw)
        if not line.strip():
            continue
        ln = _Line(line, lineno, state)
        record = _parse_line(ln)
        for source, pattern in patterns:
            if pattern.search(line):
                reason = f"matched fail pattern {source!r}"
                if record is None:
                    record = ln.record(state.module_for(ln.action), ln.gpu, False, {}, reason, kind="pattern")
                else:
                    record["passed"] = False
                    record["reason"] = f"{record['reason']}; {reason}" if record["reason"] else reason
                break
        if record is not None:
            if record["gpu"] is not None:
                state.answered.add((record["action"], record["gpu"]))
            peer = record["metrics"].get("peer_gpu")
            if isinstance(peer, int):
                state.answered.add((record["action"], peer))
            records.append(record)
    for (action, gpu), (module, line, lineno) in state.progress.items():
        if (action, gpu) not in state.answered:
            reason = f"GPU {gpu} started {module} action '{action}' but printed no result (output ended early)"
            records.append(_rec("missing", action, module, gpu, False, {}, line, lineno, reason))
    return records
