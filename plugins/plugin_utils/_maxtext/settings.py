# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The settings check of the cvs.cluster.maxtext role, before any node is touched (pure logic).

:func:`check_settings` takes the role's variables (``maxtext_*`` and ``cvs_env``, as the play sees them) and
returns the problems, each ``"<variable>: <problem>"`` or ``"<variable> must ..."``, the thresholds in this
collection's form and the longest time the run can take. The role fails naming the host in front of the
problems joined with ``; ``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.shell import env_name_problems
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.cvs_thresholds import (
    CvsThresholdError,
    is_threshold_file,
    threshold_cell,
    upstream_metrics,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._maxtext.metrics import maxtext_metrics, metric_rows

__all__ = ["check_settings", "input_problems", "known_metrics", "threshold_problems"]

_INT = re.compile(r"^ *-?[0-9]+ *$")
_NUMBER = re.compile(r"^ *-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)? *$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ROLE_KEYS = ("steps", "run_name", "base_output_directory")
_ROLE_ARG = re.compile(r"^(steps|run_name|base_output_directory)=")
# >= 0 numbers, in the order the problems are listed
_NUMBERS = (
    "maxtext_timeout",
    "maxtext_stall_timeout",
    "maxtext_stop_grace",
    "maxtext_gpus_per_node",
    "maxtext_warmup_steps",
    "maxtext_metrics_window",
)
_MAPPINGS = (
    "maxtext_config_overrides",
    "maxtext_env",
    "maxtext_base_env",
    "maxtext_single_node_env",
    "cvs_env",
    "maxtext_distributed_env",
    "maxtext_thresholds",
    "maxtext_error_patterns",
    "maxtext_error_patterns_extra",
    "maxtext_ignore_error_patterns",
    "maxtext_ignore_error_patterns_extra",
)


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _number_problem(field: str, value: Any, minimum: float, *, strict: bool = False) -> Optional[str]:
    if (
        isinstance(value, bool)
        or not _NUMBER.match(str(value))
        or (float(value) <= minimum if strict else float(value) < minimum)
    ):
        return f"{field} must be a number {'>' if strict else '>='} {minimum:g}, got {value}"
    return None


def input_problems(settings: Mapping[str, Any]) -> list[str]:
    """The problems of the role's variables, in the order a user fixes them; [] when every one is fine."""
    get = settings.get
    problems: list[str] = []
    steps = get("maxtext_steps")
    if not _INT.match(str(steps)) or int(str(steps)) < 1:
        problems.append(f"maxtext_steps must be an integer >= 1, got {steps}")
    for field in ("maxtext_sweep_name", "maxtext_check_name"):
        value = get(field)
        if not isinstance(value, str) or not _NAME.match(value):
            problems.append(
                f"{field} must be 1-64 letters, digits, '.', '_' or '-' (not starting with '.', '_' or '-'), "
                f"got '{value}'"
            )
    port = get("maxtext_coordinator_port")
    if not _INT.match(str(port)) or not 1 <= int(str(port)) <= 65535:
        problems.append(f"maxtext_coordinator_port must be a TCP port (1-65535), got {port}")
    for field in _NUMBERS:
        problem = _number_problem(field, get(field), 0)
        if problem:
            problems.append(problem)
    problem = _number_problem("maxtext_poll_interval", get("maxtext_poll_interval"), 0, strict=True)
    if problem:
        problems.append(problem)
    scripts = get("maxtext_train_scripts")
    if not _is_list(scripts):
        problems.append("maxtext_train_scripts must be a list of absolute paths")
    elif not scripts and not get("maxtext_train_module"):
        problems.append(
            "maxtext_train_scripts is empty and maxtext_train_module is empty: nothing names the train script"
        )
    else:
        problems.extend(
            f"maxtext_train_scripts: '{path}' is not an absolute path"
            for path in scripts
            if not isinstance(path, str) or not path.startswith("/")
        )
    for field in _MAPPINGS:
        value = get(field, {}) if field == "cvs_env" else get(field)
        if not isinstance(value, Mapping):
            problems.append(f"{field} must be a mapping")
        elif field.endswith("_env"):
            problems.extend(env_name_problems(value, field))
        elif "patterns" in field:
            problems.extend(
                f"{field}: pattern {name} must be a non-empty regex string"
                for name, regex in value.items()
                if not isinstance(regex, str) or not regex
            )
    overrides = get("maxtext_config_overrides")
    if isinstance(overrides, Mapping):
        problems.extend(
            f"maxtext_config_overrides: {key} is set by the role" + (" (use maxtext_steps)" if key == "steps" else "")
            for key in _ROLE_KEYS
            if key in overrides
        )
    extra = get("maxtext_extra_args")
    if not _is_list(extra):
        problems.append("maxtext_extra_args must be a list of strings")
    else:
        problems.extend(
            f"maxtext_extra_args: '{arg}' is set by the role"
            + (" (use maxtext_steps)" if str(arg).startswith("steps=") else "")
            for arg in extra
            if _ROLE_ARG.match(str(arg))
        )
    python = get("maxtext_python")
    if not isinstance(python, str) or not python:
        problems.append("maxtext_python must name a Python interpreter")
    return problems


def known_metrics() -> list[str]:
    """Every metric a threshold may name: cvs.cluster.maxtext_metrics' and upstream CVS's names."""
    metrics = maxtext_metrics("")
    return list({**upstream_metrics(metrics, 1, 1, None), **metrics})


def threshold_problems(thresholds: Any, cell: Any = "") -> tuple[dict[str, Any], list[str]]:
    """(the thresholds in this collection's form, problems): an upstream CVS threshold file becomes its ``cell``;
    every threshold is checked once against no metrics; every metric it names must exist."""
    if is_threshold_file(thresholds):
        try:
            thresholds = threshold_cell(thresholds, cell or None)
        except CvsThresholdError as exc:
            return {}, [f"maxtext_thresholds: {exc}"]
    try:
        metric_rows({}, thresholds)
    except ValueError as exc:
        return {}, [f"maxtext_thresholds: {exc}"]
    known = known_metrics()
    unknown = list(dict.fromkeys(str(name) for name in thresholds if name not in known))
    if unknown:
        return {}, [f"maxtext_thresholds: unknown metric(s) {', '.join(unknown)}; known metrics: {', '.join(known)}"]
    return dict(thresholds), []


def _jinja_int(value: Any) -> int:
    """As Jinja's ``int`` filter reads a validated number (``"5.5"`` -> 5)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return int(float(value))


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``{problems, thresholds, budget_seconds}`` of the role's variables: the input problems first; the thresholds
    are read only when there are none (their problem is then the only one)."""
    problems = input_problems(settings)
    thresholds: dict[str, Any] = {}
    budget = None
    if not problems:
        thresholds, problems = threshold_problems(
            settings.get("maxtext_thresholds"), settings.get("maxtext_threshold_cell")
        )
        budget = int(float(settings["maxtext_timeout"]) + _jinja_int(settings["maxtext_stop_grace"]))
    return {"problems": problems, "thresholds": thresholds, "budget_seconds": budget}
