# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which files the running ansible-playbook read extra vars from (``-e @file``), to name them in messages."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

_OPTIONS = ("-e", "--extra-vars")


def extra_vars_files(argv: Optional[Sequence[str]] = None) -> list[str]:
    """The ``@file`` arguments of ``-e``/``--extra-vars`` in ``argv`` (default: this process's, which a worker
    shares with its ansible-playbook)."""
    args = list(sys.argv if argv is None else argv)
    files: list[str] = []
    for i, arg in enumerate(args):
        value = None
        if arg in _OPTIONS and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--extra-vars="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-e") and arg not in _OPTIONS and not arg.startswith("--"):
            value = arg[2:]
        if value and value.startswith("@"):
            files.append(value[1:])
    return files


def given_as(default: str = "-e @file") -> str:
    """``-e @<file>[, -e @<file>]`` as this run was given, else ``default``."""
    files = extra_vars_files()
    return ", ".join(f"-e @{f}" for f in files) if files else default
