# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names from data as single path components (the one rule, controller and nodes alike), and atomic writes.

Every path the collection builds from data - a node's scratch directory, MaxText's run directory (launch.sh,
training.log), the check records and log copies under ``<results>/<run id>/``, log_poll's saved copies - joins each
name through :func:`path_component`, on the controller, and hands the nodes whole paths.

* Names the inventory gives (host names) are accepted as Ansible accepts them and *escaped*: an inventory host name
  may hold ``/``, be ``.`` or ``..``, hold a newline, or be longer than a file name may be (a 253-character FQDN plus
  a suffix such as ``-ctr``). Joined into a path unchanged it would nest directories, climb out of the directory
  meant for it, or fail with "File name too long".
* Identities the user chooses (``cvs_run_id``, ``cvs_finish_run``) are *refused* when they would need escaping
  (:func:`component_problem`): the first play of every playbook names the variable and the value before anything
  starts.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from typing import Any

__all__ = ["NAME_MAX", "atomic_write", "component_problem", "component_problems", "path_component"]

# bytes in one file name on Linux file systems
NAME_MAX = 255

# what a name must not hold to be one path component as it is
_CONTROL = frozenset(chr(c) for c in (*range(0x20), 0x7F))
_ESCAPED = frozenset({"%", "/"}) | _CONTROL
# whole names that are not file names of their own ("%" alone is no escape of anything else: a "%" is "%25")
_DOTS = {"": "%", ".": "%2E", "..": "%2E%2E"}

_RULE = (
    "a run id becomes a directory name on the controller and the nodes: use letters, digits, '.', '_' and '-' "
    f"(not '.' or '..', no '/', no control characters, 1 to {NAME_MAX} bytes)"
)


def path_component(name: str, max_bytes: int = NAME_MAX) -> str:
    """``name`` as one file name, distinct names giving distinct file names.

    ``%`` is written as ``%25``, ``/`` as ``%2F`` and every control character (``\\n`` ``%0A``, NUL ``%00``, DEL
    ``%7F`` ...) as ``%`` and its two hex digits; ``.`` and ``..`` become ``%2E`` and ``%2E%2E``, the empty name
    ``%``; a name still over ``max_bytes`` bytes is cut and ends with ``-`` and 16 hex digits of its SHA-256. Any
    other name (every usual host name) is kept as it is.
    """
    text = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)
    text = _DOTS.get(text, text)
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= max_bytes:
        return text
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    keep = raw[: max_bytes - len(digest) - 1].decode("utf-8", "ignore")
    return f"{keep}-{digest}"


def component_problem(value: Any, variable: str) -> str:
    """Why ``value`` (the value of ``variable``) cannot name a directory as it is, or ``""``.

    The value must be a non-empty string that :func:`path_component` keeps unchanged: not ``.`` or ``..``, no
    ``/``, ``%`` or control character, at most :data:`NAME_MAX` bytes. The message names the variable, the value and
    the fix.
    """
    if not isinstance(value, str):
        return f"{variable}: {value!r} is not a string; {_RULE}"
    if not value.strip():
        why = "it is empty"
    elif value in (".", ".."):
        why = f"{value!r} names a directory that exists already"
    elif "/" in value:
        why = "it holds '/'"
    elif any(c in _CONTROL for c in value):
        why = "it holds a control character"
    elif "%" in value:
        why = "it holds '%'"
    elif len(value.encode("utf-8", "surrogateescape")) > NAME_MAX:
        why = f"it is longer than {NAME_MAX} bytes"
    else:
        return ""
    return f"{variable}: {value!r} cannot be used: {why}; {_RULE}"


def component_problems(values: Mapping[str, Any]) -> list[str]:
    """:func:`component_problem` of each ``variable: value`` given (``None``: the variable is not set, no problem)."""
    return [p for variable, value in values.items() if value is not None and (p := component_problem(value, variable))]


def atomic_write(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``path`` whole or not at all: a reader sees the old file or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
