# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``rvs`` block of an upstream CVS health configuration, mapped onto the rvs role's settings.

Every key of upstream's schema is honoured with upstream's meaning, ignored with a stated reason (keys that
only upstream's installer reads), or refused naming its key path and the closest valid key. Upstream's own
defaults apply to what the block leaves out: 7200 s for the level run (its ``level_config`` entry) and 9000 s
for an individual test. Fail patterns are matched case-insensitively, as upstream does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.cvs.cluster.plugins.plugin_utils._common.messages import closest

LEVEL_TEST = "level_config"
LEVEL_TIMEOUT = 7200
TEST_TIMEOUT = 9000

# Read by upstream's RVS installer only: this collection runs the rvs that `path` (or the image) provides.
INSTALL_ONLY = {
    "git_install_path": "upstream's installer clones RVS there; this collection runs the rvs found at path",
    "git_url": "upstream's installer builds RVS from it; this collection installs nothing",
    "nfs_install": "upstream's installer uses it to install once on shared storage; this collection installs nothing",
    "rocm_path": "upstream's installer locates ROCm with it; set path (the rvs binary or its directory) instead",
    "config_path_mi300x": "upstream's installer checks it; the model folder under config_path_default is chosen "
    "from amd-smi, as upstream's tests do",
}
BLOCK_KEYS = ("path", "rocm_runtime_lib_path", "config_path_default", "rvs_test_level", "tests", *INSTALL_ONLY)
TEST_KEYS = (
    "name",
    "config_file",
    "description",
    "timeout",
    "expected_pass",
    "fail_regex_pattern",
    "fail_regex_patterns",
)
_PLACEHOLDER = re.compile(r"<changeme>|\{user-id\}|\{[^{}]*\|[^{}]*\}", re.IGNORECASE)


class RvsConfigError(ValueError):
    """A key of the upstream block that cannot be honoured; the message names its key path."""


def _is_comment(key: Any) -> bool:
    return str(key).startswith("_comment")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise RvsConfigError(f"{where}: expected a string, got {type(value).__name__}")
    text = str(value)
    found = _PLACEHOLDER.search(text)
    if found:
        raise RvsConfigError(f"{where}: still holds the placeholder {found.group(0)!r} ({text!r}); set a real value")
    return text


def _seconds(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RvsConfigError(f"{where}: expected seconds, got {value!r}")
    try:
        seconds = int(float(value))
    except ValueError as exc:
        raise RvsConfigError(f"{where}: expected seconds, got {value!r}") from exc
    if seconds <= 0:
        raise RvsConfigError(f"{where}: expected a positive number of seconds, got {value!r}")
    return seconds


def _patterns(test: Mapping[str, Any], where: str) -> list[str]:
    """fail_regex_pattern (one string) and fail_regex_patterns (a list), each compiled, case-insensitive."""
    out: list[str] = []
    for key in ("fail_regex_pattern", "fail_regex_patterns"):
        if key not in test:
            continue
        raw = test[key]
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list):
            raise RvsConfigError(f"{where}.{key}: expected a regular expression or a list of them, got {raw!r}")
        for index, pattern in enumerate(items):
            at = f"{where}.{key}" if isinstance(raw, str) else f"{where}.{key}[{index}]"
            if not isinstance(pattern, str):
                raise RvsConfigError(f"{at}: expected a regular expression, got {pattern!r}")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise RvsConfigError(f"{at}: invalid regular expression {pattern!r}: {exc}") from exc
            out.append(pattern)
    return out


def _check_keys(raw: Mapping[str, Any], valid: tuple[str, ...], where: str) -> None:
    for key in raw:
        if not _is_comment(key) and key not in valid:
            raise RvsConfigError(f"{where}.{key}: is not a key of upstream's rvs schema" + closest(key, valid))


def _test(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, str):  # a bare name, as in the role's own rvs_tests
        raw = {"name": raw}
    if not isinstance(raw, Mapping):
        raise RvsConfigError(f"{where}: expected a test name or a mapping with at least a name, got {raw!r}")
    _check_keys(raw, TEST_KEYS, where)
    if not raw.get("name"):
        raise RvsConfigError(f"{where}.name: every test needs a name")
    name = _text(raw["name"], f"{where}.name")
    if raw.get("expected_pass", True) is not True:
        raise RvsConfigError(
            f"{where}.expected_pass: only true is supported (upstream does not read it either; "
            "a test expected to fail has no verdict here): remove the test or set true"
        )
    level = name == LEVEL_TEST
    test: dict[str, Any] = {
        "name": name,
        "timeout": _seconds(raw.get("timeout", LEVEL_TIMEOUT if level else TEST_TIMEOUT), f"{where}.timeout"),
        "fail_regex_patterns": _patterns(raw, where),
    }
    if "description" in raw:
        test["description"] = _text(raw["description"], f"{where}.description")
    if "config_file" in raw:
        if level:
            raise RvsConfigError(f"{where}.config_file: the level run (rvs -r <level>) takes no configuration file")
        test["config_file"] = _text(raw["config_file"], f"{where}.config_file")
    return test


def rvs_settings(block: Any, where: str = "rvs") -> dict[str, Any]:
    """Map an upstream ``rvs`` block onto the role's settings.

    Returns ``{"settings": {...}, "ignored": [messages]}``; settings holds only the keys the block sets:
    ``path``, ``rocm_runtime_lib_path``, ``config_path_default``, ``rvs_test_level``, ``tests`` (individual
    tests, level_config excluded) and ``level`` (the level run's timeout, patterns and description; upstream's
    default when the block has no level_config entry but has tests).
    """
    if not isinstance(block, Mapping):
        raise RvsConfigError(f"{where}: expected the rvs block of a CVS health configuration (a mapping)")
    _check_keys(block, BLOCK_KEYS, where)
    settings: dict[str, Any] = {}
    ignored = [f"{where}.{key}: ignored: {INSTALL_ONLY[key]}" for key in block if key in INSTALL_ONLY]
    for key in ("path", "config_path_default"):
        if key in block:
            settings[key] = _text(block[key], f"{where}.{key}")
    if "rocm_runtime_lib_path" in block:
        settings["rocm_runtime_lib_path"] = _text(
            block["rocm_runtime_lib_path"] or "", f"{where}.rocm_runtime_lib_path"
        )
    if "rvs_test_level" in block:
        level = block["rvs_test_level"]
        if isinstance(level, bool) or str(level).strip() not in {"0", "1", "2", "3", "4", "5"}:
            raise RvsConfigError(
                f"{where}.rvs_test_level: must be 0 (individual tests) or 1-5 (RVS level mode), got {level!r}"
            )
        settings["rvs_test_level"] = int(str(level).strip())
    if "tests" in block:
        raw_tests = block["tests"]
        if not isinstance(raw_tests, list):
            raise RvsConfigError(f"{where}.tests: expected a list of tests, got {type(raw_tests).__name__}")
        tests = [_test(raw, f"{where}.tests[{index}]") for index, raw in enumerate(raw_tests)]
        names = [t["name"] for t in tests]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise RvsConfigError(f"{where}.tests: {', '.join(twice)} listed more than once")
        level_entry = next((t for t in tests if t["name"] == LEVEL_TEST), None)
        settings["tests"] = [t for t in tests if t["name"] != LEVEL_TEST]
        settings["level"] = level_entry or {"name": LEVEL_TEST, "timeout": LEVEL_TIMEOUT, "fail_regex_patterns": []}
    return {"settings": settings, "ignored": ignored}
