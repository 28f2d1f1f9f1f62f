# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters cvs.cluster.rvs_parse, cvs.cluster.rvs_judge and cvs.cluster.rvs_check_rows (docs: their .yml files)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.judge import judge_rvs
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.parse import parse_rvs_output
from ansible_collections.cvs.cluster.plugins.plugin_utils._rvs.record import check_rows


def _output_text(value: Any, filter_name: str) -> str:
    """RVS output from a string, a list of lines, or a registered command result."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        if "stdout" not in value and "stdout_lines" not in value and "stderr" not in value:
            raise AnsibleFilterError(
                f"{filter_name}: the input is a dictionary without stdout/stderr; "
                "pass RVS output text or a registered command result"
            )
        parts = []
        for key in ("stdout", "stderr"):
            part = value.get(key)
            if part is None and key == "stdout" and value.get("stdout_lines") is not None:
                part = value.get("stdout_lines")
            if part:
                parts.append(_output_text(part, filter_name))
        return "\n".join(parts)
    if isinstance(value, (list, tuple)):
        lines = []
        for index, item in enumerate(value):
            if not isinstance(item, (str, bytes)):
                raise AnsibleFilterError(
                    f"{filter_name}: item {index} of the input list is {type(item).__name__}, expected a line of text"
                )
            lines.append(_output_text(item, filter_name))
        return "\n".join(lines)
    raise AnsibleFilterError(
        f"{filter_name}: expected RVS output as a string, a list of lines or a registered result, "
        f"got {type(value).__name__}"
    )


def _patterns(value: Any, filter_name: str) -> Any:
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError(
            f"{filter_name}: fail_patterns must be a list of regular expressions or a dict of name: regex, "
            f"got {type(value).__name__}"
        )
    return list(value)


def rvs_parse(output: Any, fail_patterns: Any = None) -> list[dict]:
    """RVS output -> one record per result line."""
    text = _output_text(output, "rvs_parse")
    try:
        return parse_rvs_output(text, _patterns(fail_patterns, "rvs_parse"))
    except ValueError as exc:
        raise AnsibleFilterError(f"rvs_parse: {exc}") from exc


def rvs_judge(
    output: Any,
    rc: Any = None,
    test: Any = "",
    fail_patterns: Any = None,
) -> dict:
    """RVS output (+ exit status) -> one verdict for the test."""
    text = _output_text(output, "rvs_judge")
    if rc is None:
        rc = output.get("rc", 0) if isinstance(output, Mapping) else 0
    if isinstance(rc, bool):
        raise AnsibleFilterError(f"rvs_judge: rc must be an integer exit status, got {rc!r}")
    if rc is not None:
        try:
            rc = int(rc)
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"rvs_judge: rc must be an integer exit status, got {rc!r}") from None
    if test is None:
        test = ""
    if not isinstance(test, str):
        raise AnsibleFilterError(f"rvs_judge: test must be a string, got {type(test).__name__}")
    try:
        return judge_rvs(text, rc, str(test), _patterns(fail_patterns, "rvs_judge"))
    except ValueError as exc:
        raise AnsibleFilterError(f"rvs_judge: {exc}") from exc


def rvs_check_rows(tests: Any) -> dict:
    if not isinstance(tests, (list, tuple)):
        raise AnsibleFilterError(f"rvs_check_rows: expected the list of RVS test results, got {type(tests).__name__}")
    return check_rows(tests)


class FilterModule:
    """RVS output filters."""

    def filters(self) -> dict:
        return {
            "rvs_parse": rvs_parse,
            "rvs_judge": rvs_judge,
            "rvs_check_rows": rvs_check_rows,
        }
