# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse and judge ROCm Validation Suite (RVS) output.

Pure Python (>= 3.9), no Ansible import: used by modules on the nodes and by
filter plugins on the controller.

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

``summarize_rvs`` and ``judge_rvs`` turn records into one verdict per test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Iterable, Optional, Sequence

__all__ = [
    "KNOWN_MODULES",
    "RVS_LEVELS_MIN_VERSION",
    "compile_fail_patterns",
    "gpu_config_folder",
    "judge_rvs",
    "parse_rvs_output",
    "parse_rvs_version",
    "rvs_version_supports_levels",
    "summarize_rvs",
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

#: First RVS release with test levels (``rvs -r 1..5``).
RVS_LEVELS_MIN_VERSION = (1, 3, 0)

# Modules whose per-GPU verdict line is well known: a GPU that printed
# progress for such an action but no verdict is reported as a failure.
_VERDICT_MODULES = frozenset(("gst", "iet", "tst"))

# Metric keys that identify things rather than measure them (not aggregated).
_ID_METRICS = frozenset(
    ("test", "io_link", "gpu_node", "cpu_node", "peer_gpu", "peer_gpu_node", "transfer", "transfers", "gpus")
)

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

_ACTION_NAME = re.compile(r"^Action name\s*:\s*(.+?)\s*$", _F)
_MODULE_NAME = re.compile(r"^Module name\s*:\s*(\S+)", _F)

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

_GST_NEW = re.compile(
    r"\[\s*GPU\s*::\s*(\d+)\s*\]\s*GFLOPS\s*:?\s*([\d.]+)\s+Target\s+GFLOPS\s*:\s*([\d.]+)\s+met\s*:\s*(true|false)\b",
    _F,
)
_GST_OLD = re.compile(r"\bgst\s+(\d+)\s+Gflop\s*:\s*([\d.]+)", _F)
_GST_OLD_KV = re.compile(r"\b(flops_per_op|bytes_copied_per_op|try_ops_per_sec)\s*:\s*([\d.]+)(?:\s*x\s*1e(\d+))?", _F)

_VERDICT = re.compile(r"\b(?:pass|met)\s*:\s*(true|false)\b", _F)
_MODULE_GPU = re.compile(r"^\s*([a-z]+)\s+(\d+)\b", _F)

_PEQT = re.compile(r"\bpeqt\s+(true|false)\s*$", _F)

_MEM_VERDICT = re.compile(r"\bmem\s+Test\s+(\d+)\s*:\s*(pass|fail)\w*", _F)
_MEM_BW = re.compile(r"\bmem\s+Test\s+(\d+)\s*:\s*elapsedtime\s*=\s*([\d.]+)\s+bandwidth\s*=\s*([\d.]+)\s*GB/?s", _F)
_MEM_ERRORS = re.compile(r"\bmem\s+Number of errors\s*:\s*(\d+)", _F)

_PACKAGES = re.compile(
    r"^\s*(Total packages validated|Installed packages|Missing packages|Version mismatch packages)"
    r"\s*:\s*<?\s*(\d+)\s*>?\s*$",
    _F,
)
_PACKAGE_KEYS = {
    "total packages validated": ("total_packages", False),
    "installed packages": ("installed_packages", False),
    "missing packages": ("missing_packages", True),
    "version mismatch packages": ("version_mismatch_packages", True),
}

_BANDWIDTH = r"(?:([\d.]+)\s*GBps|\(\s*not measured\s*\))(\s*\(\*\))?(?:\s*duration\s*:\s*([\d.]+)\s*secs?)?"
_PEBB = re.compile(r"h2d\s*::\s*(true|false)\s+d2h\s*::\s*(true|false)\s+" + _BANDWIDTH, _F)
_PBQT = re.compile(r"\bp2p-bandwidth\b.*?bidirectional\s*:\s*(true|false)\s+" + _BANDWIDTH, _F)
_A2A_P2P = re.compile(r"\ba2a-p2p-bandwidth\b.*\]\s*([\d.]+)\s*GBps", _F)
_A2A_GPU = re.compile(r"\ba2a-gpu-bandwidth\b.*Aggregate peer bandwidth\s*:\s*([\d.]+)\s*GBps", _F)
_A2A_ALL = re.compile(
    r"\ba2a-bandwidth\s*\[\s*(\d+)\s*GPUs\s*\]\s*\[\s*(\d+)\s*p2p transfers\s*\]"
    r"\s*Aggregate bandwidth\s*:\s*([\d.]+)\s*GBps",
    _F,
)

_BABEL_ROW = re.compile(
    r"^\s*(\d+)\s+(read|write|copy|mul|add|triad|dot|nstream)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", _F
)
_GM = re.compile(r"\bgm\s+(\d+)\s+(\w+)\s+(violations|average)\s+(-?[\d.]+)", _F)
_PESM = re.compile(r"\bGPU\s+(\d+)\s+PCIe speed change\s+(true|false)\b", _F)
_GPUP = re.compile(r"\bgpup\s+(\d+)\s+(?:(\d+)\s+)?([a-z_]\w*)\s+(-?\d+(?:\.\d+)?)\s*$", _F)

# Failure markers for lines no structured rule explains (FORMATS.md list, plus
# a few crash / environment markers).
_FAIL_MARKERS = (
    ("met: FALSE", re.compile(r"\bmet\s*:\s*false\b", _F)),
    ("pass: FALSE", re.compile(r"\bpass\s*:\s*false\b", _F)),
    ("[ERROR]", re.compile(r"\[ERROR\s*\]", _F)),
    ("RVS-ERROR", re.compile(r"RVS-ERROR", _F)),
    ("peqt false", re.compile(r"\bpeqt\s+false\b", _F)),
    ("ERROR:", re.compile(r"\bERROR\s*:", _F)),
    ("FAIL", re.compile(r"\bFAIL", _F)),
    ("no supported GPUs", re.compile(r"No supported GPUs available", _F)),
    ("no test level support", re.compile(r"No test levels support", _F)),
    ("not installed", re.compile(r"\bnot installed\b", _F)),
    ("segmentation fault", re.compile(r"Segmentation fault|SIGSEGV|core dumped", _F)),
    ("uncaught exception", re.compile(r"terminate called after throwing", _F)),
)

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_VERSION_AFTER_WORD = re.compile(r"version\D{0,20}?(\d+)\.(\d+)(?:\.(\d+))?", _F)

_MARKET_MI = re.compile(r"\b(MI\d{3}[A-Z]?)(-HF)?\b", _F)
_MARKET_RX = re.compile(r"\bRX\s*(\d{4})\s*(GRE)?\b", _F)
_MARKET_NAME_TEXT = re.compile(r"market[_ ]name\W{0,6}([^\"\n,}]+)", _F)


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


def _to_text(text: Any) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if isinstance(text, str):
        return text
    if isinstance(text, (list, tuple)):
        return "\n".join(_to_text(t) for t in text)
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


def _bandwidth_metrics(match: re.Match, first_group: int) -> tuple[dict, Optional[str]]:
    """Metrics of a pebb/pbqt bandwidth tail; returns (metrics, failure reason or None)."""
    value, duration = match.group(first_group), match.group(first_group + 2)
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


# --------------------------------------------------------------------------
# line parser


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


def _parse_line(line: str, state: _State, lineno: int) -> Optional[dict]:
    consumed, record = _parse_box(line, state, lineno)
    if consumed:
        return record

    prefix = _PREFIX.match(line)
    level = (prefix.group(1) or "").upper() if prefix else ""
    rest = line[prefix.end() :] if prefix else line.strip()
    metric_level = level in ("", "RESULT", "NONE")

    m = _ACTION_NAME.match(rest)
    if m:
        state.action, state.module = m.group(1).strip(), None
        return None
    m = _MODULE_NAME.match(rest)
    if m:
        state.module = m.group(1).lower()
        if state.action is not None:
            state.modules[state.action] = state.module
        return None

    m = _RVS_ERROR.search(rest)
    if m:
        module = (m.group(1) or "").strip().lower() or None
        action = (m.group(2) or "").strip() or None
        if module is None or module not in KNOWN_MODULES:
            module = state.module_for(action, module)
        message = m.group(3).strip() or "RVS-ERROR"
        return _rec("error", action, module, None, False, {}, line, lineno, f"RVS-ERROR: {message}")

    am = _ACTION.match(rest)
    if am:
        action: Optional[str] = am.group(1).strip() or None
        body = rest[am.end() :]
    else:
        action, body = None, rest
    context_action = action if action is not None else state.action

    gm = _GPU_ID.search(body)
    gpu = int(gm.group(1)) if gm else None

    if level == "ERROR":
        return _rec(
            "error",
            context_action,
            state.module_for(context_action),
            gpu,
            False,
            {},
            line,
            lineno,
            f"[ERROR] {body.strip()}",
        )

    # --- GST: current format, then the pre-2024 one
    m = _GST_NEW.search(body)
    if m:
        gpu = int(m.group(1))
        passed = _bool(m.group(4))
        metrics = {"gflops": _num(m.group(2)), "target_gflops": _num(m.group(3))}
        reason = None if passed else f"GPU {gpu}: GFLOPS {m.group(2)} below target {m.group(3)} (met: FALSE)"
        return _rec("result", context_action, "gst", gpu, passed, metrics, line, lineno, reason)
    m = _GST_OLD.search(body)
    if m:
        gpu = int(m.group(1))
        metrics = {"gflops": _num(m.group(2))}
        for key, value, exp in _GST_OLD_KV.findall(body):
            metrics[key.lower()] = _num(value) * (10 ** int(exp) if exp else 1)
        vm = _VERDICT.search(body)
        passed = _bool(vm.group(1)) if vm else None
        reason = f"GPU {gpu}: Gflop {m.group(2)} pass: FALSE" if passed is False else None
        return _rec("result", context_action, "gst", gpu, passed, metrics, line, lineno, reason)

    # --- peqt (one verdict per action)
    m = _PEQT.search(body)
    if m:
        passed = _bool(m.group(1))
        reason = None if passed else "peqt false: PCIe capability check failed"
        return _rec("result", context_action, "peqt", None, passed, {}, line, lineno, reason)

    # --- mem
    m = _MEM_VERDICT.search(body)
    if m:
        passed = m.group(2).lower() == "pass"
        reason = None if passed else f"mem Test {m.group(1)} FAIL"
        return _rec("result", context_action, "mem", gpu, passed, {"test": int(m.group(1))}, line, lineno, reason)
    m = _MEM_ERRORS.search(body)
    if m:
        errors = int(m.group(1))
        reason = f"mem: {errors} memory errors" if errors else None
        return _rec("result", context_action, "mem", gpu, errors == 0, {"errors": errors}, line, lineno, reason)
    m = _MEM_BW.search(body)
    if m and metric_level:
        metrics = {"test": int(m.group(1)), "elapsed_ms": _num(m.group(2)), "bandwidth_gbps": _num(m.group(3))}
        return _rec("result", context_action, "mem", gpu, None, metrics, line, lineno)

    # --- rcqt package counts (printed without prefix)
    m = _PACKAGES.match(rest)
    if m:
        key, judged = _PACKAGE_KEYS[re.sub(r"\s+", " ", m.group(1).lower())]
        count = int(m.group(2))
        passed = (count == 0) if judged else None
        reason = f"{m.group(1)}: {count}" if passed is False else None
        return _rec("package", state.action, "rcqt", None, passed, {key: count}, line, lineno, reason)

    # --- pebb / pbqt bandwidth (final lines are RESULT, interval lines INFO)
    m = _PBQT.search(body)
    if m:
        if not metric_level or m.group(3):
            return None
        gpus = _GPU_FULL.findall(body)
        metrics, reason = _bandwidth_metrics(m, 2)
        metrics["bidirectional"] = _bool(m.group(1))
        src = int(gpus[0][1]) if gpus else gpu
        if len(gpus) > 1:
            metrics["peer_gpu"] = int(gpus[1][1])
            metrics["gpu_node"], metrics["peer_gpu_node"] = int(gpus[0][0]), int(gpus[1][0])
        tm = _TRANSFER.search(body)
        if tm:
            metrics["transfer"] = int(tm.group(1))
        if reason:
            reason = f"GPU {src} -> {metrics.get('peer_gpu')}: {reason}"
        return _rec("result", context_action, "pbqt", src, False if reason else None, metrics, line, lineno, reason)
    m = _PEBB.search(body)
    if m:
        if not metric_level or m.group(4):
            return None
        full = _GPU_FULL.search(body)
        metrics, reason = _bandwidth_metrics(m, 3)
        metrics["h2d"], metrics["d2h"] = _bool(m.group(1)), _bool(m.group(2))
        cm = _CPU.search(body)
        if cm:
            metrics["cpu_node"] = int(cm.group(1))
        if full:
            gpu = int(full.group(2))
            metrics["gpu_node"] = int(full.group(1))
            metrics["bdf"] = full.group(3)
        tm = _TRANSFER.search(body)
        if tm:
            metrics["transfer"] = int(tm.group(1))
        if reason:
            reason = f"GPU {gpu}: {reason}"
        module = "pebb" if "pcie-bandwidth" in body.lower() else state.module_for(context_action) or "pebb"
        return _rec("result", context_action, module, gpu, False if reason else None, metrics, line, lineno, reason)
    m = _A2A_ALL.search(body)
    if m and metric_level:
        metrics = {"gpus": int(m.group(1)), "transfers": int(m.group(2)), "aggregate_bandwidth_gbps": _num(m.group(3))}
        return _rec("result", context_action, "pbqt", None, None, metrics, line, lineno)
    m = _A2A_GPU.search(body)
    if m and metric_level:
        full = _GPU_FULL.search(body)
        gpu = int(full.group(2)) if full else gpu
        metrics = {"aggregate_peer_bandwidth_gbps": _num(m.group(1))}
        return _rec("result", context_action, "pbqt", gpu, None, metrics, line, lineno)
    m = _A2A_P2P.search(body)
    if m and metric_level:
        gpus = _GPU_FULL.findall(body)
        metrics = {"bandwidth_gbps": _num(m.group(1))}
        if len(gpus) > 1:
            metrics["peer_gpu"] = int(gpus[1][1])
        return _rec("result", context_action, "pbqt", int(gpus[0][1]) if gpus else gpu, None, metrics, line, lineno)

    # --- BabelStream table rows (no prefix, no action bracket)
    m = _BABEL_ROW.match(rest)
    if m:
        fn = m.group(2).lower()
        metrics = {
            f"{fn}_mbytes_per_sec": _num(m.group(3)),
            f"{fn}_max_mbytes_per_sec": _num(m.group(4)),
            f"{fn}_min_mbytes_per_sec": _num(m.group(5)),
            f"{fn}_avg_mbytes_per_sec": _num(m.group(6)),
        }
        return _rec("result", state.action, "babel", int(m.group(1)), None, metrics, line, lineno)

    # --- generic verdict: IET, TST, smqt, babel, older IET/TST formats …
    m = _VERDICT.search(body)
    if m:
        passed = _bool(m.group(1))
        token = None
        mg = _MODULE_GPU.match(body)
        if mg and mg.group(1).lower() in KNOWN_MODULES:
            token = mg.group(1).lower()
            if gpu is None:
                gpu = int(mg.group(2))
        module = state.module_for(context_action, token)
        where = f"GPU {gpu}" if gpu is not None else (module or "RVS")
        reason = None if passed else f"{where}: {m.group(0)}"
        return _rec("result", context_action, module, gpu, passed, {}, line, lineno, reason)

    # --- metric-only lines of other modules
    if metric_level:
        m = _GM.search(body)
        if m:
            metrics = {f"{m.group(2).lower()}_{m.group(3).lower()}": _num(m.group(4))}
            return _rec("result", context_action, "gm", int(m.group(1)), None, metrics, line, lineno)
        m = _PESM.search(body)
        if m:
            metrics = {"pcie_speed_change": _bool(m.group(2))}
            return _rec("result", context_action, "pesm", int(m.group(1)), None, metrics, line, lineno)
        m = _GPUP.search(body)
        if m:
            metrics = {m.group(3).lower(): _num(m.group(4))}
            if m.group(2) is not None:
                metrics["io_link"] = int(m.group(2))
            return _rec("result", context_action, "gpup", int(m.group(1)), None, metrics, line, lineno)

    # --- anything else that says it failed
    for label, pattern in _FAIL_MARKERS:
        fm = pattern.search(body)
        if fm:
            module = state.module_for(context_action)
            reason = f"failure marker {label!r}: {body.strip()}"
            return _rec("error", context_action, module, gpu, False, {}, line, lineno, reason)

    # --- progress of a verdict module: remember it to spot GPUs that never answer
    if gpu is not None:
        module = state.module_for(context_action)
        if module in _VERDICT_MODULES:
            state.progress.setdefault((context_action, gpu), (module, line, lineno))
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
    text = _to_text(text)
    state = _State()
    records: list[dict] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = _clean(raw)
        if not line.strip():
            continue
        record = _parse_line(line, state, lineno)
        for source, pattern in patterns:
            if pattern.search(line):
                reason = f"matched fail pattern {source!r}"
                if record is None:
                    action = state.action
                    am = _ACTION.match(_PREFIX.sub("", line, count=1))
                    if am and am.group(1).strip():
                        action = am.group(1).strip()
                    gm = _GPU_ID.search(line)
                    record = _rec(
                        "pattern",
                        action,
                        state.module_for(action),
                        int(gm.group(1)) if gm else None,
                        False,
                        {},
                        line,
                        lineno,
                        reason,
                    )
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


def _aggregate(records: Iterable[dict]) -> dict:
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in (record.get("metrics") or {}).items():
            if key in _ID_METRICS or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            values.setdefault(key, []).append(float(value))
    return {
        key: {
            "min": min(vals),
            "max": max(vals),
            "mean": round(sum(vals) / len(vals), 6),
            "count": len(vals),
        }
        for key, vals in sorted(values.items())
    }


def summarize_rvs(records: Sequence[dict], test_name: str = "") -> dict:
    """One verdict for a test from its records.

    Returns ``{test, passed, status, reason, failures: [{action, module, gpu,
    line, reason}], gpus, metrics: {name: {min, max, mean, count}}, actions:
    {name: {module, status}}, counts: {passed, failed, info}, parsed}``.
    status is FAIL when any record failed, ERROR when nothing was recognised
    ("unparseable output"), PASS otherwise.
    """
    records = list(records or [])
    failures = [
        {
            "action": r.get("action"),
            "module": r.get("module"),
            "gpu": r.get("gpu"),
            "line": r.get("line", ""),
            "reason": r.get("reason") or "failed",
        }
        for r in records
        if r.get("passed") is False
    ]
    counts = {
        "passed": sum(1 for r in records if r.get("passed") is True),
        "failed": len(failures),
        "info": sum(1 for r in records if r.get("passed") is None),
    }
    gpus = sorted({r["gpu"] for r in records if isinstance(r.get("gpu"), int) and not isinstance(r.get("gpu"), bool)})
    actions: dict[str, dict] = {}
    for r in records:
        name = r.get("action")
        if not name:
            continue
        entry = actions.setdefault(name, {"module": r.get("module"), "status": "INFO"})
        if entry["module"] is None and r.get("module"):
            entry["module"] = r.get("module")
        if r.get("passed") is False:
            entry["status"] = "FAIL"
        elif r.get("passed") is True and entry["status"] == "INFO":
            entry["status"] = "PASS"

    if not records:
        status, reason = "ERROR", "unparseable output: no RVS result line found"
    elif failures:
        first = failures[0]
        status = "FAIL"
        reason = f"{len(failures)} failing result(s); first: {first['reason']}"
    else:
        status = "PASS"
        reason = f"{len(records)} result(s), {counts['passed']} passed, none failed"
    return {
        "test": test_name or "",
        "passed": status == "PASS",
        "status": status,
        "reason": reason,
        "failures": failures,
        "gpus": gpus,
        "metrics": _aggregate(records),
        "actions": actions,
        "counts": counts,
        "parsed": len(records),
    }


def judge_rvs(
    text: Any,
    rc: Optional[int] = 0,
    test_name: str = "",
    extra_fail_patterns: Any = None,
) -> dict:
    """Verdict for one RVS run from its output and exit status.

    The output decides: any failing record or fail-pattern match is FAIL, no
    recognisable result is ERROR. A non-zero rc never passes: with no results
    it is ERROR naming rc, with only passing results it is ERROR too (RVS
    stopped abnormally), with failures it stays FAIL. rc 0 decides nothing.
    The summary gets an ``rc`` key.
    """
    if rc is not None:
        if isinstance(rc, bool):
            raise ValueError(f"rc must be an integer, got {rc!r}")
        try:
            rc = int(rc)
        except (TypeError, ValueError):
            raise ValueError(f"rc must be an integer, got {rc!r}") from None
    summary = summarize_rvs(parse_rvs_output(text, extra_fail_patterns), test_name)
    summary["rc"] = rc
    if rc not in (None, 0):
        if summary["parsed"] == 0:
            summary["status"] = "ERROR"
            summary["reason"] = f"rvs exited with rc {rc} and printed no recognisable result (unparseable output)"
        elif summary["status"] == "PASS":
            summary["status"] = "ERROR"
            summary["reason"] = f"rvs exited with rc {rc} although no failing result was parsed"
        else:
            summary["reason"] = f"{summary['reason']}; rvs exited with rc {rc}"
        summary["passed"] = False
    return summary


def parse_rvs_version(version_text: Any) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) from ``rvs --version`` output, or None."""
    try:
        text = _to_text(version_text)
    except TypeError:
        return None
    m = _VERSION_AFTER_WORD.search(text) or _VERSION.search(text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def rvs_version_supports_levels(version_text: Any) -> bool:
    """True when the RVS version printed by ``rvs --version`` is >= 1.3.0 (``rvs -r``)."""
    version = parse_rvs_version(version_text)
    return version is not None and version >= RVS_LEVELS_MIN_VERSION


def _market_names(data: Any) -> list[str]:
    """market_name values in amd-smi static JSON (list, dict, or {"gpu_data": [...]})."""
    if isinstance(data, list):
        names = []
        for item in data:
            names.extend(_market_names(item))
        return names
    if not isinstance(data, dict):
        return []
    lower = {str(k).lower(): v for k, v in data.items()}
    for key in ("gpu_data", "gpus", "data"):
        if isinstance(lower.get(key), list):
            return _market_names(lower[key])
    asic = lower.get("asic")
    if isinstance(asic, dict):
        asic_lower = {str(k).lower(): v for k, v in asic.items()}
        if isinstance(asic_lower.get("market_name"), str):
            return [asic_lower["market_name"]]
    if isinstance(lower.get("market_name"), str):
        return [lower["market_name"]]
    return []


def _folder_from_market_name(name: str) -> Optional[str]:
    m = _MARKET_MI.search(name)
    if m:
        return m.group(1).upper() + (m.group(2) or "").upper()
    m = _MARKET_RX.search(name)
    if m:
        return "RX" + m.group(1) + (m.group(2) or "").upper()
    return None


def gpu_config_folder(amd_smi_static_json: Any) -> Optional[str]:
    """RVS config sub-folder for the GPU model, from ``amd-smi static -a -g 0 --json``.

    "AMD Instinct MI300X" -> "MI300X". Accepts the JSON text (list, dict or
    ``{"gpu_data": [...]}`` shapes, tolerating noise before the JSON) or the
    already-decoded data. None when no known model is found.
    """
    data: Any = amd_smi_static_json
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if isinstance(data, str):
        text = data
        data = None
        decoder = json.JSONDecoder()
        starts = [i for i, ch in enumerate(text) if ch in "[{"][:50]
        for start in starts:
            try:
                candidate, _end = decoder.raw_decode(text, start)
            except ValueError:
                continue
            if _market_names(candidate):
                data = candidate
                break
        if data is None:
            m = _MARKET_NAME_TEXT.search(text)
            return _folder_from_market_name(m.group(1)) if m else None
    for name in _market_names(data):
        folder = _folder_from_market_name(name)
        if folder:
            return folder
    return None
