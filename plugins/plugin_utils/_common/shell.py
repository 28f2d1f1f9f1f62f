# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values on their way into shell scripts: quoting, comment text and environment variable names.

Controller-only, pure logic. The rule of the collection: a value reaches a shell only as a single-quoted word
assigned to a shell variable (``x={{ value | quote }}``, used as ``"$x"``), as an argv element, or in a file the
shell reads as data. Generated scripts also name the run in comments; a newline in a host name would end such a
comment and make the rest of the name a command, so comment text is reduced to one printable line.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ENV_NAME_RE", "EnvNameError", "comment_text", "env_name_problems", "quote", "quote_all", "valid_env_names"]

# POSIX: names of environment variables a shell can export (letters, digits, '_', not starting with a digit)
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Longest comment text kept (a 253-character host name fits); longer text is cut with an ellipsis.
COMMENT_MAX = 400


class EnvNameError(ValueError):
    """A mapping of environment variables holds a name a shell cannot export."""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def quote(value: Any) -> str:
    """One shell word that stands for ``value`` exactly (None is the empty word, booleans are true/false)."""
    return shlex.quote(_text(value))


def comment_text(value: Any, limit: int = COMMENT_MAX) -> str:
    """``value`` as text safe inside a ``#`` comment: one line, printable characters only.

    Control characters (newline, carriage return, escape ...), Unicode line and paragraph separators, unassigned
    code points and lone surrogates (undecodable bytes) each become ``?``.
    """
    out = []
    for char in _text(value):
        category = unicodedata.category(char)
        out.append("?" if category in ("Cc", "Cs", "Cn", "Zl", "Zp") else char)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def env_name_problems(env: Any, field: str) -> list[str]:
    """Messages for the names in ``env`` that are not environment variable names; [] when all are fine."""
    if env is None:
        return []
    if not isinstance(env, Mapping):
        return [f"{field} must be a mapping of environment variable names to values"]
    return [
        f"{field}: {_shown(name)} is not an environment variable name (letters, digits and '_', not starting "
        "with a digit)"
        for name in env
        if not isinstance(name, str) or not ENV_NAME_RE.match(name)
    ]


def valid_env_names(env: Any, field: str) -> Any:
    """``env`` unchanged when every name is valid; else EnvNameError naming every bad key."""
    problems = env_name_problems(env, field)
    if problems:
        raise EnvNameError("; ".join(problems))
    return env


def _shown(name: Any) -> str:
    """A key as the messages show it: in single quotes, control characters visible."""
    text = _text(name)
    return "'" + "".join(c if unicodedata.category(c) not in ("Cc", "Cs") else repr(c)[1:-1] for c in text) + "'"


def quote_all(values: Iterable[Any]) -> str:
    """The shell words of ``values``, space-separated (an argv as one line of shell)."""
    return " ".join(quote(v) for v in values)
