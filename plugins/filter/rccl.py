# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.rccl_judge (docs: rccl_judge.yml)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._rccl import judge, summary_rows


def rccl_judge(text: Any, test: str = "all_reduce_perf", thresholds: Any = None, in_place: bool = False) -> dict:
    if isinstance(text, list):
        text = "\n".join(str(x) for x in text)
    if not isinstance(text, str):
        raise AnsibleFilterError(f"rccl_judge: expected the test's output as text, got {type(text).__name__}")
    try:
        out = judge(text, str(test), thresholds, bool(in_place))
    except ValueError as exc:
        raise AnsibleFilterError(f"rccl_judge: {test}: {exc}") from exc
    out["table"] = summary_rows(out.pop("rows"))
    return out


class FilterModule:
    """rccl-tests filters."""

    def filters(self) -> dict:
        return {"rccl_judge": rccl_judge}
