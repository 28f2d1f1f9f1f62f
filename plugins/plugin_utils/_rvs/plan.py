# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the rvs role runs on a node: its settings checked (before anything starts), then the run planned from
what the node says about itself (module rvs_probe): the mode, the configuration folder, each test's file and argv.

Pure logic, no Ansible import; runs on the controller (filters rvs_settings and rvs_plan). A problem is returned as
a message naming the node (the role fails the node with it), never raised: the role records it as the node's
ERROR.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.cvs_config import RvsConfigError, rvs_settings
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.detect import (
    gpu_config_folder,
    rvs_version_supports_levels,
)
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import compile_fail_patterns

__all__ = ["ASYNC_MARGIN", "STEP_MARGIN", "check_settings", "plan_run"]

#: Seconds a test may run past its timeout and kill grace before the node gives up waiting for it (a process
#: that SIGKILL does not end, an srun step that does not start).
STEP_MARGIN = 60
#: Seconds the whole run's async job may take past the sum of its tests' limits.
ASYNC_MARGIN = 60

_LEVEL = re.compile(r"[0-5]\Z")


def _jinja_int(value: Any) -> Optional[int]:
    """A whole number of seconds as Jinja's ``int`` filter reads it ("30", 30.0, "30.5"), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return int(float(text))
            except ValueError:
                return None
    return None


def _test_name(test: Any) -> Any:
    """The name a test entry gives: the string itself, a mapping's name, else ''."""
    if isinstance(test, str):
        return test
    if isinstance(test, Mapping):
        return test.get("name") or ""
    return ""


def unknown_tests(tests: Sequence[Any], known: Mapping[str, Any]) -> list[str]:
    """Names of the entries that have no name, or a name that is not known and no config_file."""
    bad = []
    for test in tests:
        name = _test_name(test)
        no_file = isinstance(test, str) or not (isinstance(test, Mapping) and "config_file" in test)
        if not name or (name not in known and no_file):
            bad.append(str(name))
    return bad


def _unknown_message(node: str, bad: Sequence[str], known: Mapping[str, Any]) -> str:
    names = ", ".join(f"rvs test {n or '(unnamed)'}" for n in bad)
    verb = "is" if len(bad) == 1 else "are"
    return (
        f"{node}: {names} {verb} unknown (each test needs a name, and a config_file unless it is one of: "
        f"{', '.join(str(k) for k in known)})"
    )


def _patterns(value: Any) -> list[Any]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _normalise_tests(
    tests: Sequence[Any], known: Mapping[str, Any], default_timeout: int, role_patterns: list[Any], node: str
) -> tuple[list[dict[str, Any]], Optional[str]]:
    """Each known test as ``{name, config_file, timeout, patterns}``, or the first problem."""
    out = []
    for index, raw in enumerate(tests):
        test: Mapping[str, Any] = {"name": raw} if isinstance(raw, str) else raw
        name = str(test["name"])
        given = test.get("timeout")
        timeout = _jinja_int(given) if given else default_timeout
        if timeout is None or timeout <= 0:
            problem = f"rvs_tests[{index}].timeout ({name}): expected a positive number of seconds, got {given!r}"
            return [], f"{node}: {problem}"
        own = test["fail_regex_patterns"] if "fail_regex_patterns" in test else test.get("fail_regex_pattern")
        patterns = role_patterns + _patterns(own)
        try:
            compile_fail_patterns(patterns)
        except (TypeError, ValueError) as exc:
            return [], f"{node}: fail patterns of rvs test {name}: {exc}"
        out.append(
            {
                "name": name,
                "config_file": str(test["config_file"] if "config_file" in test else known[name]),
                "timeout": timeout,
                "patterns": patterns,
            }
        )
    return out, None


def check_settings(
    given: Mapping[str, Any], upstream: Any = None, node: str = "", upstream_source: str = "-e rvs=..."
) -> dict[str, Any]:
    """The rvs role's settings, checked: ``given`` holds the role variables by name (``rvs_path``, ``rvs_tests``,
    ...); an upstream CVS ``rvs`` block overrides them (``upstream_source`` names where it came from).

    Returns ``{problem, ignored, path, library_path, config_dir, amd_smi_path, level, tests, level_run,
    kill_grace, budget_seconds}``; ``problem`` is the first setting that cannot be used (None when all can),
    naming the node (an upstream block's problems name its key path, as cvs_config says them). ``level`` is the
    test level as text (``"0"``-``"5"``), ``tests`` the individual tests as ``{name, config_file, timeout,
    patterns}``, ``budget_seconds`` the longest the run can take (a Slurm time limit must hold it).
    """
    out: dict[str, Any] = {"problem": None, "ignored": [], "tests": [], "level_run": None, "budget_seconds": 0}
    try:
        mapped = rvs_settings(upstream) if upstream is not None else {"settings": {}, "ignored": []}
    except RvsConfigError as exc:
        out["problem"] = f"upstream CVS rvs block ({upstream_source}): {exc}"
        return out
    cfg = mapped["settings"]
    out["ignored"] = mapped["ignored"]
    known: Mapping[str, Any] = given.get("rvs_known_tests") or {}
    default_timeout = int(given["rvs_default_timeout"])
    grace = int(given["rvs_kill_grace"])
    role_patterns = list(given.get("rvs_fail_regex_patterns") or [])
    level = str(cfg.get("rvs_test_level", given.get("rvs_test_level"))).strip()
    raw_tests = cfg["tests"] if "tests" in cfg else list(given.get("rvs_tests") or [])
    level_run = cfg.get("level") or {"timeout": default_timeout, "fail_regex_patterns": []}
    out.update(
        path=str(cfg.get("path", given.get("rvs_path"))),
        library_path=str(cfg.get("rocm_runtime_lib_path", given.get("rvs_rocm_runtime_lib_path"))),
        config_dir=str(cfg.get("config_path_default", given.get("rvs_config_path_default"))),
        amd_smi_path=str(given.get("rvs_amd_smi_path")),
        level=level,
        kill_grace=grace,
    )
    if not _LEVEL.match(level):
        out["problem"] = f"{node}: rvs_test_level must be 0 (individual tests) or 1-5 (RVS level mode), got '{level}'"
        return out
    bad = unknown_tests(raw_tests, known)
    if bad:
        out["problem"] = _unknown_message(node, bad, known)
        return out
    try:
        compile_fail_patterns(role_patterns)
    except (TypeError, ValueError) as exc:
        out["problem"] = f"{node}: rvs_fail_regex_patterns: {exc}"
        return out
    tests, problem = _normalise_tests(raw_tests, known, default_timeout, role_patterns, node)
    if problem:
        out["problem"] = problem
        return out
    out["tests"] = tests
    out["level_run"] = {
        "timeout": int(level_run["timeout"]),
        "patterns": role_patterns + list(level_run.get("fail_regex_patterns") or []),
    }
    level_budget = out["level_run"]["timeout"] + grace if int(level) > 0 else 0
    out["budget_seconds"] = max(level_budget, sum(t["timeout"] + grace for t in tests))
    return out


def _command(argv: Sequence[Any]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def _result(settings: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A plan with nothing to run (yet): every key the role and the record read."""
    plan: dict[str, Any] = {
        "problem": None,
        "note": None,
        "mode": None,
        "version": None,
        "folder": None,
        "path": settings.get("path"),
        "tests": [],
        "commands": [],
        "lease_seconds": 0,
        "async_seconds": ASYNC_MARGIN,
    }
    plan.update(fields)
    return plan


def plan_run(
    settings: Mapping[str, Any], probe: Mapping[str, Any], node: str, step_argv: Sequence[Any] = ()
) -> dict[str, Any]:
    """What to run on the node, from its checked settings (:func:`check_settings`) and its probe (rvs_probe).

    Level mode when the level is 1-5 and ``rvs --version`` names 1.3.0 or newer (else the individual tests, with a
    ``note`` saying so); each individual test's configuration from the GPU-model folder (amd-smi), else the common
    folder. Returns ``{problem, note, mode, version, folder, path, tests, commands, lease_seconds, async_seconds}``;
    each test is ``{name, mode, config_file, timeout, patterns, args, command}`` (``command``: rvs and its
    arguments, as the record shows them), each command of module rvs_run ``{name, argv, deadline}``: what the node
    runs (``step_argv``, the Slurm step prefix, then ``timeout -k <grace> <timeout> rvs ...``) and the seconds it
    waits for it. ``problem`` names the node and what is missing.
    """
    rvs = probe.get("rvs") or {}
    path = str(rvs.get("path") or settings.get("path"))
    if not rvs.get("usable"):
        return _result(settings, path=path, problem=f"{node}: rvs binary not found or not executable at {path}")
    version = probe.get("version") or {}
    amd_smi = probe.get("amd_smi") or {}
    version_text = str(version.get("stdout") or "").strip()
    level = str(settings["level"])
    levels = int(level) > 0 and version.get("rc") == 0 and rvs_version_supports_levels(version.get("stdout"))
    folder = gpu_config_folder(amd_smi.get("stdout")) if amd_smi.get("rc") == 0 else None
    base = {"path": path, "version": version_text, "folder": folder, "mode": "level" if levels else "individual"}
    note = None
    if int(level) > 0 and not levels:
        note = (
            f"{node}: RVS version '{version_text}' has no test levels (needs >= 1.3.0); "
            f"running the individual tests instead of level {level}"
        )
    if levels:
        run = settings["level_run"]
        tests = [
            {
                "name": f"level{level}",
                "mode": "level",
                "config_file": None,
                "timeout": run["timeout"],
                "patterns": list(run["patterns"]),
                "args": ["-r", level],
            }
        ]
    else:
        found = set(probe.get("configs") or [])
        conf = str(settings["config_dir"])
        tests, missing = [], []
        for test in settings["tests"]:
            name, file = test["name"], test["config_file"]
            if file.startswith("/"):
                candidates = [file]
            else:  # the GPU model's folder first, then the common folder
                candidates = ([f"{conf}/{folder}/{file}"] if folder else []) + [f"{conf}/{file}"]
            chosen = next((c for c in candidates if c in found), None)
            if chosen is None:
                missing.append(f"configuration file of rvs test {name} not found (tried {', '.join(candidates)})")
            tests.append({**test, "mode": "individual", "config_file": chosen, "args": ["-c", chosen or ""]})
        if missing:
            return _result(settings, **base, note=note, problem=f"{node}: {'; '.join(missing)}")
        if not tests:
            return _result(settings, **base, note=note, problem=f"{node}: no rvs test to run (rvs_tests is empty)")
    grace = int(settings["kill_grace"])
    commands = []
    for test in tests:
        test["command"] = _command([path, *test["args"]])
        argv = [*step_argv, "timeout", "-k", grace, test["timeout"], path, *test["args"]]
        commands.append(
            {"name": test["name"], "argv": [str(a) for a in argv], "deadline": test["timeout"] + grace + STEP_MARGIN}
        )
    return _result(
        settings,
        **base,
        note=note,
        tests=tests,
        commands=commands,
        lease_seconds=sum(t["timeout"] + grace for t in tests),
        async_seconds=sum(c["deadline"] for c in commands) + ASYNC_MARGIN,
    )
