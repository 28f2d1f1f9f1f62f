# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the node checks of the cvs.cluster.maxtext role found on one node (pure logic).

The role runs roles/maxtext/files/preflight.py with the training interpreter (it prints one JSON object: what it
found and ``problems``, ``[field, problem]`` pairs) and arms the log watch (which compiles every pattern).
:func:`node_problems` turns both results into the node's findings and its problems, each ``"<node>: <field>:
<problem>"``; the role launches nothing unless every node has none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

__all__ = ["node_problems"]

_OUTPUT_KEPT = 400  # characters of a failed check's output kept in the message


def _findings(preflight: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    out = str(preflight.get("stdout") or "").strip()
    if preflight.get("rc", 1) != 0 or not out.startswith("{"):
        return None
    try:
        found = json.loads(out)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def node_problems(node: str, python: str, preflight: Any, armed: Any) -> dict[str, Any]:
    """``{found, problems}``: ``found`` is what preflight.py printed (None when it could not run)."""
    preflight = preflight if isinstance(preflight, Mapping) else {}
    armed = armed if isinstance(armed, Mapping) else {}
    found = _findings(preflight)
    if found is None:
        said = str(preflight.get("stderr", "") or preflight.get("msg", "")).strip()[-_OUTPUT_KEPT:]
        problems = [
            f"{node}: maxtext_python: could not run the node checks with {python} "
            f"(rc {preflight.get('rc', '?')}): {said}"
        ]
    else:
        problems = [f"{node}: " + ": ".join(str(part) for part in pair) for pair in found.get("problems") or []]
    if not armed.get("armed", False):
        problems.append(
            f"{node}: maxtext_error_patterns/maxtext_ignore_error_patterns: "
            f"{armed.get('msg', 'log watch could not be armed')}"
        )
    return {"found": found, "problems": problems}
