# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files on the controller: names from the inventory as single path components, and atomic writes.

An inventory host name may hold ``/``, be ``.`` or ``..``, or be longer than a file name may be (a 253-character
FQDN plus a suffix such as ``-ctr``). Joined into a path unchanged it would nest directories, climb out of the
directory meant for it, or fail with "File name too long".
"""

from __future__ import annotations

import hashlib
import os
import tempfile

__all__ = ["NAME_MAX", "atomic_write", "path_component"]

# bytes in one file name on Linux file systems
NAME_MAX = 255


def path_component(name: str, max_bytes: int = NAME_MAX) -> str:
    """``name`` as one file name, distinct names giving distinct file names.

    ``%`` is written as ``%25`` and ``/`` as ``%2F``; ``.`` and ``..`` become ``%2E`` and ``%2E%2E``; a name still
    over ``max_bytes`` bytes is cut and ends with ``-`` and 16 hex digits of its SHA-256. Any other name (every
    usual host name) is kept as it is.
    """
    text = name.replace("%", "%25").replace("/", "%2F")
    if text in (".", ".."):
        text = text.replace(".", "%2E")
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= max_bytes:
        return text
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    keep = raw[: max_bytes - len(digest) - 1].decode("utf-8", "ignore")
    return f"{keep}-{digest}"


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
