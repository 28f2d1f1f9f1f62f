# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter cvs.cluster.labelled_lines (documentation: labelled_lines.yml beside this file; logic: _log_poll/scan.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Dict, List

from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.plugin_utils._log_poll.scan import labelled_lines as _labelled_lines


def labelled_lines(result: Any) -> List[Dict[str, str]]:
    if not isinstance(result, Mapping):
        raise AnsibleFilterError(
            f"cvs.cluster.labelled_lines expects a cvs.cluster.log_poll result (a mapping), got {type(result).__name__}"
        )
    return _labelled_lines(result)


class FilterModule:
    """The lines of a log_poll result with their logs."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"labelled_lines": labelled_lines}
