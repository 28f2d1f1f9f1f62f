# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Words of the collection's error messages about settings: the closest valid key, a value's kind.

Every settings check (container, Slurm, upstream CVS files, cluster files) names an unknown key's closest valid one
with :func:`closest`, so a typo reads the same wherever it is made.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping


def closest(key: Any, valid: Any, what: str = "keys") -> str:
    """'; did you mean X? (valid …)' naming the closest valid key (difflib), else the list of valid keys."""
    names = sorted(str(v) for v in valid)
    match = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
    if match:
        return f"; did you mean {match[0]!r}? (valid {what}: {', '.join(names)})"
    return f"; valid {what}: {', '.join(names)}"


def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return "a number"
    return "a string" if isinstance(value, str) else type(value).__name__
